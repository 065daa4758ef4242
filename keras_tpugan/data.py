"""Image datasets for GAN training: TFDS, the offline MNIST subset, numpy, folders.

`load_images` returns global batches of float32 images in [-1, 1] (and
int32 labels when asked), a new permutation of the whole dataset every
epoch, with a fixed global batch (as replicas need): a `tf.data.Dataset` on
the TensorFlow backend, a `keras_tpugan.EpochBatches` (no TensorFlow
needed) on JAX. Reading TFDS or a user's `tf.data.Dataset` needs TensorFlow.
"""

import functools
import logging
import os
import re
import socket
import weakref

import keras
import numpy as np

from keras_tpugan import image_files
from keras_tpugan.epoch_batches import EpochBatches, scaled, underlying
from keras_tpugan.keyed_dropout import hash_uint32
from keras_tpugan.tf_import import is_dataset, tf

logger = logging.getLogger("keras_tpugan")
# The datasets `load_images` made (weakly held).
_NORMALIZED = weakref.WeakSet()
# The epoch that keys the shuffle order (see `set_epoch`): one per process.
_EPOCH = [0]

SOURCES = ("auto", "tfds", "offline")
# The offline subset: 5,000 real MNIST digits (500 per class) shipped in the
# package (assets/mnist_5k.csv.gz, one row of 784 pixels and the label per
# image; see assets/MNIST_NOTICE.txt), split once with a fixed permutation
# into 4,000 train / 1,000 test.
OFFLINE_MNIST_FILE = os.path.join(
    os.path.dirname(__file__), "assets", "mnist_5k.csv.gz"
)
OFFLINE_SPLITS = {
    "train": slice(0, 4000),
    "test": slice(4000, 5000),
    "all": slice(None),
}
_DOWNLOAD_HOST = ("storage.googleapis.com", 443)
# Examples in a streamed TFDS split's shuffle buffer (encoded: CelebA's
# JPEGs take about 150 MB), mixed after its files are read in a new order.
STREAM_SHUFFLE_BUFFER = 10_000


def load_images(
    data="mnist",
    split="train",
    batch_size=256,
    labels=False,
    source="auto",
    shuffle=True,
    seed=0,
    image_size=None,
    channels=None,
    resize="crop",
    xflip=False,
    image_key=None,
    label_key=None,
    data_dir=None,
    stream=False,
    return_info=False,
):
    """Loads images as global batches in [-1, 1], for `GAN.fit`.

    On the TensorFlow backend it returns a `tf.data.Dataset`; on JAX a
    `keras_tpugan.EpochBatches` (a `keras.utils.PyDataset`), so that JAX
    training needs no TensorFlow: both yield the same batches for the same
    seed and epoch.

    The images are read once and held in memory as they came (uint8 for
    files, TFDS and uint8 arrays: a quarter of float32's memory); each
    batch is gathered and scaled to float32 [-1, 1] as it is read. Every
    epoch is one permutation of the whole dataset, a function of `seed`
    and the epoch alone (see `set_epoch`), so a resumed run sees the
    batches of an uninterrupted one, and the batch is the same whatever
    the replica or process count.

    Args:
        data: A TFDS dataset name (`"mnist"`, `"cifar10"`, `"celeb_a"`,
            ...), a folder of images (flat, or one subfolder per class;
            searched recursively; png, jpg, webp, bmp), a numpy array of
            images `(n, h, w)` or `(n, h, w, c)`, a tuple `(images,
            labels)`, or a `tf.data.Dataset` of images or `(image, label)`
            pairs (batched or not). uint8 data and data with values above
            1 are read as 0-255 pixels, other data with no negative values
            as [0, 1], the rest as [-1, 1].
        split: The TFDS split, or a slice of one (`"train[:10%]"`); for
            the offline MNIST subset `"train"` (4,000 images), `"test"`
            (1,000), `"all"` or a slice of one (`offline_mnist`). Folders,
            arrays and datasets have no splits: `"train"` only.
        batch_size: The GLOBAL batch size (over all replicas).
        labels: If True the dataset yields `(images, labels)`: the class
            subfolders of a folder, TFDS's label feature, the given labels.
        source: For a dataset name: `"tfds"`, `"offline"` (the MNIST subset),
            or `"auto"`: TFDS when its data is on disk or can be downloaded,
            else, for MNIST, the offline subset. The source used is logged.
        shuffle: A new permutation of the whole dataset every epoch; False:
            the stored order (folders: sorted paths).
        seed: Seed of the permutation and of `xflip`.
        image_size: An int (square) or `(height, width)` to bring every
            image to (required for folders; default: the data's own size).
        channels: 1 (grey) or 3 (RGB) to convert to; None: as the data
            (for folders: 1 if every image is grey, else 3).
        resize: How an image of another aspect ratio is brought to
            `image_size`: `"crop"` (the largest centred window, then
            resize; the default), `"pad"` (black borders) or `"squash"`.
        xflip: Mirror each image left-right with probability 1/2, drawn
            from (seed, epoch, position in the epoch), as StyleGAN's
            `--mirror`: replica parity and exact resume still hold.
        image_key: The TFDS feature that holds the image (default:
            `"image"`, else the dataset's only image feature).
        label_key: The TFDS feature that holds the label (default:
            `"label"` when the dataset has it).
        data_dir: TFDS data directory.
        stream: Read the data batch by batch instead of holding every
            image in memory. A folder: each batch's files are decoded as
            it is read, in the same order as held. A TFDS name (TensorFlow
            backend): the split's files are read in an order drawn from
            `(seed, epoch)` through a shuffle buffer of
            `STREAM_SHUFFLE_BUFFER` examples seeded alike (with
            `shuffle=False`, in TFDS's read order). Other data raises a
            `ValueError` with it.
        return_info: If True, also return a dict with `source`, `name`,
            `num_examples`, `image_shape`, `num_classes`, `class_names`,
            `memory_bytes` (the images held in memory: 0 when streamed) and
            `streamed`.

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
    if stream and isinstance(data, str) and not os.path.isdir(data):
        ds, info = _streamed_tfds(
            data,
            split=split,
            source=source,
            data_dir=data_dir,
            batch_size=batch_size,
            labels=labels,
            shuffle=shuffle,
            seed=seed,
            xflip=xflip,
            size=image_files.check_size(image_size),
            channels=image_files.check_channels(channels),
            resize=image_files.check_resize(resize),
            image_key=image_key,
            label_key=label_key,
        )
        _NORMALIZED.add(ds)
        return (ds, info) if return_info else ds
    images, class_ids, info = read_images(
        data,
        split=split,
        source=source,
        image_size=image_size,
        channels=channels,
        resize=resize,
        image_key=image_key,
        label_key=label_key,
        data_dir=data_dir,
        stream=stream,
    )
    _check_labels(labels, class_ids is not None, info)
    n = len(images)
    _check_batch_size(batch_size, n, info)
    if info["streamed"]:
        logger.warning(
            "streaming %d images of shape %s from the files under %r: each "
            "batch's files are decoded as it is read (%.1f MB of uint8 pixels "
            "not held in memory).",
            n,
            info["image_shape"],
            info["name"],
            n * np.prod(info["image_shape"]) / 1e6,
        )
    else:
        logger.info(
            "%d images of shape %s in memory: %.1f MB (%s).",
            n,
            info["image_shape"],
            images.nbytes / 1e6,
            images.dtype,
        )
    ds = _epoch_batches(
        images,
        np.zeros(n, "int32") if class_ids is None else class_ids,
        batch_size=batch_size,
        shuffle=shuffle,
        seed=seed,
        xflip=xflip,
        labels=labels,
    )
    _NORMALIZED.add(ds)
    return (ds, info) if return_info else ds


def _check_labels(labels, labelled, info):
    if labels and not labelled:
        raise ValueError(
            f"Expected labelled data with labels=True. Received: {info['name']!r} "
            f"({info['source']}), which has no labels. "
            + (
                "Put each class's images in a subfolder of its own, or train "
                "without labels (conditional=False)."
                if info["source"] == "folder"
                else "Name its label feature with `label_key`, or train "
                "without labels (conditional=False)."
            )
        )


def _check_batch_size(batch_size, n, info):
    if n < batch_size:
        raise ValueError(
            f"Expected batch_size <= the {n} images of {info['name']!r} "
            f"({info['source']}). Received: batch_size={batch_size}; with "
            "drop_remainder=True the dataset would yield nothing. Use a "
            "smaller batch size."
        )


def read_images(
    data="mnist",
    split="train",
    source="auto",
    image_size=None,
    channels=None,
    resize="crop",
    image_key=None,
    label_key=None,
    data_dir=None,
    stream=False,
):
    """Reads images into memory as `load_images` does, without batching.

    Args:
        data, split, source, image_size, channels, resize, image_key,
        label_key, data_dir, stream: As for `load_images`.

    Returns:
        `(images, labels, info)`: uint8 pixels (float32 in [-1, 1] for float
        arrays) `(n, h, w, c)` (with `stream=True`, an
        `image_files.FolderImages` that reads them on demand), int32 class
        ids or None, and the info dict.

    Example:

    >>> images, labels, info = read_images("mnist", source="offline")
    >>> images.shape, images.dtype
    ((4000, 28, 28, 1), dtype('uint8'))
    """
    size = image_files.check_size(image_size)
    image_files.check_channels(channels)
    image_files.check_resize(resize)
    folder = isinstance(data, str) and os.path.isdir(data)
    if split != "train" and (folder or not isinstance(data, str)):
        raise ValueError(
            "Expected split='train' for data with no splits (a folder, "
            f"arrays or a dataset). Received: split={split!r} with "
            f"{_describe(data)}. Keep split='train', or pass only the part of "
            "the data to train on."
        )
    if stream and not folder:
        if isinstance(data, str):  # a TFDS name: streamed as batches only
            raise ValueError(
                "Expected a folder of images with read_images(stream=True): "
                "a TFDS split streams as batches, from load_images(..., "
                f"stream=True). Received: {_describe(data)}. Use load_images, "
                "or stream=False (the images held in memory as uint8)."
            )
        raise ValueError(
            "Expected a folder of images or a TFDS dataset name with "
            "stream=True: only files are streamed. Received: "
            f"{_describe(data)}. Use stream=False (the images held in memory "
            "as uint8), or write the images to a folder."
        )
    if is_dataset(data):
        images, class_ids, info = _from_dataset(data)
    elif folder:
        if stream:
            images = image_files.FolderImages(
                data, size, channels=channels, resize=resize
            )
            class_ids, names = images.labels, images.class_names
        else:
            images, class_ids, names = image_files.read_folder(
                data, size, channels=channels, resize=resize
            )
        info = _info("folder", data, class_ids, names)
        logger.info(
            "training data = the image folder %r%s.",
            data,
            ", streamed" if stream else "",
        )
    elif isinstance(data, str):
        images, class_ids, info = _from_name(
            data, split, source, data_dir, size, resize, image_key, label_key
        )
    else:
        images, class_ids, info = _from_arrays(data)
    if not stream:
        if size is not None and images.shape[1:3] != size:
            images = np.stack([image_files.fit_image(x, size, resize) for x in images])
        images = image_files.convert_channels(images, channels)
    info.update(
        num_examples=len(images),
        image_shape=tuple(int(d) for d in images.shape[1:]),
        memory_bytes=int(images.nbytes),
        streamed=bool(stream),
    )
    return images, class_ids, info


def _describe(data):
    """A short description of `data` for error messages."""
    if isinstance(data, str) and os.path.isdir(data):
        return f"the folder {data!r}"
    if isinstance(data, str):
        return f"{data!r} (a dataset name, or no such folder)"
    if is_dataset(data):
        return "a tf.data.Dataset"
    return f"a {type(data).__name__}"


def _info(source, name, class_ids, class_names=None, num_classes=None):
    if class_ids is not None and num_classes is None:
        num_classes = len(class_names) if class_names else int(class_ids.max()) + 1
    return {
        "source": source,
        "name": name,
        "num_examples": None,
        "image_shape": None,
        "num_classes": num_classes,
        "class_names": None if class_names is None else list(class_names),
        "memory_bytes": None,
    }


def _epoch_batches(images, class_ids, batch_size, shuffle, seed, xflip, labels):
    """Global batches of one permutation per epoch, gathered from memory
    (or, for a streamed folder, decoded from the batch's files).

    On TensorFlow a `tf.data.Dataset`; on JAX an `EpochBatches`, which needs
    no TensorFlow. Both read the order of `epoch_order` (same seed and
    epoch, same batches).
    """
    if keras.backend.backend() == "jax":
        return EpochBatches(
            images,
            class_ids if labels else None,
            batch_size=batch_size,
            shuffle=shuffle,
            seed=seed,
            xflip=xflip,
        )
    n = len(images)
    steps = n // batch_size
    if isinstance(images, image_files.FolderImages):
        image_shape = images.shape[1:]

        def read(order):  # the batch's files, decoded as it is read
            pixels = tf.numpy_function(images.__getitem__, [order], tf.uint8)
            return tf.ensure_shape(pixels, [batch_size, *image_shape])

    else:
        stored = tf.constant(images)

        def read(order):
            return tf.gather(stored, order)

    class_ids = tf.constant(class_ids, "int32")

    epoch = _epoch_variable()

    def one_epoch(_):
        # Read when a pass over the data starts: the order of epoch e is a
        # function of (seed, e) alone, in any process: `epoch_order`'s, in
        # TensorFlow ops (no Python in the pipeline).
        e = epoch.read_value()
        if shuffle:
            keys = tf.cast(_tf_epoch_keys(n, seed, e, 0), tf.int64)
            order = tf.argsort(keys, stable=True)
        else:
            order = tf.range(n)
        flips = _tf_epoch_flips(n, seed, e, xflip)
        used = steps * batch_size
        return tf.data.Dataset.from_tensor_slices(
            (
                tf.reshape(order[:used], [steps, batch_size]),
                tf.reshape(flips[:used], [steps, batch_size]),
            )
        )

    def gather(order, flips):
        return _finished_batch(read(order), tf.gather(class_ids, order), flips, labels)

    ds = tf.data.Dataset.range(1).flat_map(_plain(one_epoch))
    ds = ds.map(_plain(gather), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    ds = ds.apply(tf.data.experimental.assert_cardinality(steps))
    return ds.prefetch(tf.data.AUTOTUNE)


def _plain(fn):
    """`fn` for `tf.data` to trace as it is written, without AutoGraph.

    The pipeline's functions branch and loop on Python values only, so
    AutoGraph's rewrite of them (and of everything they call) would change
    nothing but the time to build the pipeline; a branch on a tensor would
    raise when traced.
    """
    return tf.autograph.experimental.do_not_convert(fn)


def _tf_epoch_keys(n, seed, epoch, stream):
    """`epoch_batches.epoch_keys` in TensorFlow ops (`epoch` a tensor).

    The hash is `keyed_dropout.hash_uint32` (`keras.ops`: TensorFlow ops on
    this backend), the one `KeyedDropout` draws its masks with.
    """
    key = tf.constant(0, tf.uint32)
    for part in (
        tf.constant(int(seed) % 2**32, tf.uint32),
        tf.cast(epoch % 2**32, tf.uint32),
        tf.constant(stream, tf.uint32),
    ):
        key = hash_uint32(tf.bitwise.bitwise_xor(key, part))
    positions = tf.cast(tf.range(n), tf.uint32)
    return hash_uint32(tf.bitwise.bitwise_xor(hash_uint32(positions), key))


def _tf_epoch_flips(n, seed, epoch, xflip):
    """Which of the epoch's `n` positions `xflip` mirrors (`epoch` a tensor):
    the top bit of their keys of stream 1, as `EpochBatches` draws them."""
    if not xflip:
        return tf.zeros([n], "bool")
    return tf.bitwise.right_shift(_tf_epoch_keys(n, seed, epoch, 1), 31) == 1


def _finished_batch(pixels, class_ids, flips, labels):
    """A stored batch scaled to [-1, 1], its flipped images mirrored, with
    its class ids when `labels`."""
    batch = _scaled_batch(pixels)
    batch = tf.where(flips[:, None, None, None], tf.reverse(batch, [2]), batch)
    return (batch, class_ids) if labels else batch


def _scaled_batch(batch):
    """A stored batch (uint8 pixels, or float32 already in [-1, 1]) in [-1, 1]."""
    if batch.dtype == tf.uint8:
        return tf.cast(batch, "float32") / 127.5 - 1.0
    return tf.cast(batch, "float32")


def to_unit(images):
    """Stored images (as `read_images` returns them) as float32 in [-1, 1].

    Args:
        images: uint8 pixels, or float images already in [-1, 1].

    Returns:
        A float32 numpy array of the same shape.
    """
    return scaled(images)


def is_normalized(dataset):
    """Whether `dataset` is one `load_images` returned, unchanged.

    Its images are in [-1, 1] and its labels class ids, so `GAN.fit` need
    not look at its first batch. (A `.map()` makes a new dataset, which
    `fit` checks.)

    Args:
        dataset: A `tf.data.Dataset` or an `EpochBatches`.

    Returns:
        A bool.
    """
    # (An EpochBatches, or one repeated: `EpochBatches.repeated()`.)
    return underlying(dataset) is not None or dataset in _NORMALIZED


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
    _EPOCH[0] = int(epoch)
    if _epoch_variable.cache_info().currsize:  # a tf.data pipeline reads it
        _epoch_variable().assign(_EPOCH[0])


def current_epoch():
    """The epoch that keys the shuffle order now (see `set_epoch`).

    Returns:
        An int.
    """
    return _EPOCH[0]


@functools.cache
def _epoch_variable():
    # The epoch inside tf.data pipelines: one variable per process, created
    # by the first pipeline (creating it at import would start TensorFlow
    # before a caller can split the CPU into logical devices), then kept
    # equal to `current_epoch()` by `set_epoch`. Datasets derived from a
    # `load_images` dataset with `.map()` keep following it.
    with tf.init_scope():
        return tf.Variable(_EPOCH[0], dtype="int64", trainable=False, name="data_epoch")


def offline_mnist(split="all"):
    """The offline MNIST subset as numpy arrays.

    Args:
        split: `"train"` (4,000 images), `"test"` (1,000) or `"all"`
            (5,000), or a slice of one as TFDS writes it: `"train[:1024]"`,
            `"test[-100:]"`, `"train[:10%]"`, `"train[10%:20%]"`
            (percentages of the split, rounded to the closest image).

    Returns:
        `(images, labels)`: uint8 `(n, 28, 28, 1)` and int32 `(n,)`.

    Example:

    >>> images, labels = offline_mnist("train[:1024]")
    >>> images.shape
    (1024, 28, 28, 1)
    """
    x, y = _offline_mnist_arrays()
    part = _offline_rows(split, len(y))
    if not len(part):
        raise ValueError(
            "Expected a split of the offline MNIST subset with at least one "
            f"image. Received: split={split!r} (no image). Widen the slice."
        )
    return x[part].copy(), y[part].copy()


def _offline_rows(split, count):
    """The rows of the offline subset a split name, or a TFDS-style slice of
    one, selects (TFDS's own parser needs TensorFlow; this needs nothing)."""
    match = re.fullmatch(r"(\w+)(?:\[(-?\d+%?)?:(-?\d+%?)?\])?", str(split))
    if match is None or match[1] not in OFFLINE_SPLITS:
        raise ValueError(
            f"Expected split in {tuple(OFFLINE_SPLITS)} for the offline MNIST "
            "subset, or a slice of one such as 'train[:1024]' or "
            f"'train[:10%]'. Received: split={split!r}."
        )
    rows = np.arange(count)[OFFLINE_SPLITS[match[1]]]

    def bound(text):
        if text is None:
            return None
        if text.endswith("%"):
            return round(int(text[:-1]) * len(rows) / 100)
        return int(text)

    return rows[bound(match[2]) : bound(match[3])]


@functools.cache
def _offline_mnist_arrays():
    # `np.loadtxt` reads the file as uint8 in under 0.1 s (a float parse such
    # as `np.genfromtxt`'s takes 2-4 s on a 2-core CPU); once a process.
    table = np.loadtxt(OFFLINE_MNIST_FILE, delimiter=",", dtype=np.uint8)
    order = np.random.RandomState(0).permutation(len(table))
    table = table[order]
    x = table[:, :-1].reshape(-1, 28, 28, 1)
    y = table[:, -1].astype("int32")
    x.flags.writeable = y.flags.writeable = False
    return x, y


def _resolved_source(name, source, data_dir):
    """`source` checked, and `"auto"` resolved to `"tfds"` (its data on disk
    or downloadable) or `"offline"`."""
    if source not in SOURCES:
        raise ValueError(
            f"Expected `source` in {SOURCES}. Received: source={source!r}."
        )
    _check_dataset_name(name)
    if source == "auto":
        return "tfds" if _tfds_available(name, data_dir) else "offline"
    return source


# A TFDS name: the builder's (lowercase), then maybe a config and a version,
# as in "cifar10", "celeb_a", "cifar10_corrupted/brightness_1:1.0.0"; or a
# community dataset in its namespace, as in "huggingface:mnist". (TFDS parses
# names in `tensorflow_datasets.core.naming`, but the check must also run
# where TFDS is not installed: a JAX install.)
_DATASET_NAME = re.compile(r"[a-z][\w-]*:\S+|[a-z][a-z0-9_]*(/[\w.-]+)?(:[\d*.]+)?")
_ARCHIVES = (".zip", ".tar", ".tar.gz", ".tgz", ".7z", ".rar")


def _check_dataset_name(name):
    """Refuses a string that is neither a folder nor a TFDS name (a file, an
    archive, a path that does not exist) before TFDS is asked for it."""
    if _DATASET_NAME.fullmatch(name):
        return
    if os.path.isfile(name):
        fix = (
            "Unpack the archive into a folder and pass the folder"
            if name.lower().endswith(_ARCHIVES)
            else "Pass the folder that holds the images"
        )
        received = f"{name!r}, a file"
    else:
        fix = "Check the path, or pass a TFDS name such as 'cifar10'"
        received = f"{name!r}, which is no folder and no TFDS name"
    raise ValueError(
        "Expected a folder of images or a TFDS dataset name (lowercase, such "
        f"as 'cifar10' or 'celeb_a'). Received: {received}. {fix}."
    )


def _from_name(name, split, source, data_dir, size, resize, image_key, label_key):
    resolved = _resolved_source(name, source, data_dir)
    if resolved == "offline":
        if name != "mnist" and source == "auto":
            raise ValueError(
                f"TFDS has no data for {name!r} in {data_dir or 'its data dir'} "
                "and cannot download it (no network, or no such dataset). "
                "Download it on a machine with internet (`tfds build "
                f"{name}`), or pass a folder or arrays."
            )
        if name != "mnist":
            raise ValueError(
                "The offline subset holds MNIST only. Received: "
                f"data={name!r} with source='offline'."
            )
        x, y = offline_mnist(split)
        logger.warning(
            "training data = the OFFLINE MNIST subset (in the package, "
            "%d real digits, split %r), not TFDS's full 60,000.",
            len(x),
            split,
        )
        return x, y, _info("offline", "mnist", y, num_classes=10)
    return _from_tfds(name, split, data_dir, size, resize, image_key, label_key)


def _tfds():
    """`tensorflow_datasets`, or a one-line ImportError saying how to install it."""
    try:
        import tensorflow_datasets as tfds
    except ImportError as e:
        raise ImportError(
            f"Reading TFDS datasets needs tensorflow-datasets and TensorFlow "
            f"({e}). Install them: `pip install 'keras-tpugan[cpu]'` (with "
            "JAX: `[cpu,jax]`), or pass a folder of images or numpy arrays."
        ) from e
    return tfds


def _from_tfds(name, split, data_dir, size, resize, image_key, label_key):
    """A TFDS split in memory: its image feature (uint8) and label, if any."""
    tfds = _tfds()

    ds, tfds_info = tfds.load(name, split=split, data_dir=data_dir, with_info=True)
    features = tfds_info.features
    image_key, label_key, num_classes = _tfds_keys(
        tfds, name, features, image_key, label_key
    )
    logger.info(
        "training data = TFDS %r split %r (image %r, label %r).",
        name,
        split,
        image_key,
        label_key,
    )
    shape = features[image_key].shape
    fixed = None not in shape
    if not fixed and size is None:
        raise ValueError(
            f"Expected image_size for TFDS {name!r}: its images have no fixed "
            f"size ({shape}). Received: image_size=None."
        )

    def pick(example):
        label = example[label_key] if label_key else tf.constant(0, "int64")
        return example[image_key], tf.cast(label, "int32")

    ds = ds.map(_plain(pick), num_parallel_calls=tf.data.AUTOTUNE)
    images, class_ids = [], []
    # Same-size images come in blocks; others one by one, fitted as read.
    for x, y in tfds.as_numpy(ds.batch(1024) if fixed else ds):
        x = x if fixed else image_files.fit_image(x, size, resize)[None]
        if fixed and size is not None and x.shape[1:3] != size:
            x = np.stack([image_files.fit_image(i, size, resize) for i in x])
        images.append(x)
        class_ids.append(np.reshape(y, -1))
    images = np.concatenate(images).astype("uint8", copy=False)
    class_ids = np.concatenate(class_ids) if label_key else None
    return images, class_ids, _info("tfds", name, class_ids, num_classes=num_classes)


def _streamed_tfds(
    name,
    split,
    source,
    data_dir,
    batch_size,
    labels,
    shuffle,
    seed,
    xflip,
    size,
    channels,
    resize,
    image_key,
    label_key,
):
    """A TFDS split read from its files batch by batch (`stream=True`).

    Every epoch reads the split's files in an order drawn from (seed,
    epoch), interleaved, through a shuffle buffer seeded from (seed,
    epoch), so the order is a function of the two alone (exact resume) and
    the global batch the same for any replica or process count. Records
    are decoded after the buffer (it holds encoded examples), each brought
    to `size` and `channels` as `read_images` brings a held one.
    """
    if keras.backend.backend() != "tensorflow":
        raise ValueError(
            "Expected the TensorFlow backend to stream a TFDS dataset (its "
            "files are read with tf.data). Received: stream=True for "
            f"{name!r} on the {keras.backend.backend()} backend. Use "
            "stream=False (the images held in memory as uint8), or write the "
            "images to a folder, which streams on any backend."
        )
    if _resolved_source(name, source, data_dir) == "offline":
        raise ValueError(
            f"Expected a TFDS dataset on disk to stream. Received: {name!r} "
            f"with source={source!r}, which TFDS has not prepared in "
            f"{data_dir or 'its data dir'} and cannot download here. Prepare "
            f"it on a machine with internet (`tfds build {name}`), or use "
            "stream=False (the offline MNIST subset is 4,000 images)."
        )
    tfds = _tfds()
    builder = tfds.builder(name, data_dir=data_dir)
    if not builder.is_prepared():
        builder.download_and_prepare()
    file_format = builder.info.file_format
    if file_format is not None and file_format.value != "tfrecord":
        raise ValueError(
            f"Expected TFDS {name!r} stored as tfrecord files to stream. "
            f"Received: {file_format.value} files in {builder.data_dir}. "
            "Use stream=False, or prepare it as tfrecord (`tfds build "
            f"{name} --file_format=tfrecord`)."
        )
    features = builder.info.features
    image_key, label_key, num_classes = _tfds_keys(
        tfds, name, features, image_key, label_key
    )
    _check_labels(labels, label_key is not None, {"name": name, "source": "tfds"})
    stored = features[image_key].shape
    fixed = None not in stored[:2]
    if not fixed and size is None:
        raise ValueError(
            f"Expected image_size for TFDS {name!r}: its images have no fixed "
            f"size ({stored}). Received: image_size=None."
        )
    if stored[-1] is None and channels is None:
        raise ValueError(
            f"Expected `channels` for TFDS {name!r}: its images have no fixed "
            f"channel count ({stored}). Received: channels=None."
        )
    have = stored[-1] or channels
    out_channels = image_files.convert_channels(np.zeros((1, have), "uint8"), channels)
    image_shape = (*(size or stored[:2]), out_channels.shape[-1])
    instructions = builder.info.splits[split].file_instructions
    n = sum(i.take for i in instructions)
    info = {
        **_info("tfds", name, None, num_classes=num_classes),
        "num_examples": n,
        "image_shape": tuple(int(d) for d in image_shape),
        "memory_bytes": 0,
        "streamed": True,
    }
    _check_batch_size(batch_size, n, info)
    steps = n // batch_size
    files = tf.constant([i.filename for i in instructions])
    skips = tf.constant([i.skip for i in instructions], "int64")
    takes = tf.constant([i.take for i in instructions], "int64")
    buffer = min(n, STREAM_SHUFFLE_BUFFER)
    epoch = _epoch_variable()

    def fitted(image):  # as read_images fits a held image
        if size is not None and (not fixed or image.shape[:2] != size):
            image = image_files.fit_image(image, size, resize)
        return image_files.convert_channels(image, channels)

    def decode(record):
        example = features.deserialize_example(record)
        image = example[image_key]
        if tuple(image.shape) != image_shape:  # (unknown sizes: None)
            image = tf.numpy_function(fitted, [image], tf.uint8)
        image = tf.ensure_shape(image, image_shape)
        label = example[label_key] if label_key else tf.constant(0, "int64")
        return image, tf.cast(label, "int32")

    def one_epoch(_):
        # Read when a pass starts, as `_epoch_batches` reads it.
        e = epoch.read_value()
        order = tf.range(len(instructions))
        if shuffle:
            order = tf.argsort(
                tf.cast(_tf_epoch_keys(len(instructions), seed, e, 2), tf.int64),
                stable=True,
            )
        shards = tf.data.Dataset.from_tensor_slices(
            tuple(tf.gather(x, order) for x in (files, skips, takes))
        )
        records = shards.interleave(
            lambda f, skip, take: tf.data.TFRecordDataset(f).skip(skip).take(take),
            # Unshuffled: TFDS's own read order (16 files at a time, 16
            # records from each), as `stream=False` reads the split.
            cycle_length=min(len(instructions), 16),
            block_length=1 if shuffle else 16,
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
        if shuffle:
            # The buffer's seed from (seed, epoch) alone: TensorFlow's global
            # seed would otherwise enter it.
            tf.compat.v1.get_default_graph().seed = 1
            key = tf.cast(_tf_epoch_keys(1, seed, e, 3)[0], tf.int64)
            records = records.shuffle(buffer, seed=key)
        used = steps * batch_size
        examples = records.take(used).map(
            _plain(decode), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
        )
        flips = _tf_epoch_flips(n, seed, e, xflip)
        return tf.data.Dataset.zip(
            examples, tf.data.Dataset.from_tensor_slices(flips[:used])
        )

    def scaled(examples, flips):
        return _finished_batch(*examples, flips, labels)

    ds = tf.data.Dataset.range(1).flat_map(_plain(one_epoch))
    ds = ds.batch(batch_size, drop_remainder=True)
    ds = ds.map(_plain(scaled), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    ds = ds.apply(tf.data.experimental.assert_cardinality(steps))
    logger.warning(
        "streaming %d images of TFDS %r split %r from its %d file(s), %s "
        "(%.1f MB of uint8 pixels not held in memory).",
        n,
        name,
        split,
        len(instructions),
        f"each epoch in a new file order through a shuffle buffer of {buffer} examples"
        if shuffle
        else "in their stored order",
        n * np.prod(image_shape) / 1e6,
    )
    return ds.prefetch(tf.data.AUTOTUNE), info


def _tfds_keys(tfds, name, features, image_key, label_key):
    """The image and label features to read: `(image_key, label_key,
    num_classes)`, the defaults filled in and checked."""
    ClassLabel, Image = tfds.features.ClassLabel, tfds.features.Image
    images_found = [k for k, f in features.items() if isinstance(f, Image)]
    if image_key is None:
        image_key = "image" if "image" in images_found else None
        if image_key is None and len(images_found) == 1:
            image_key = images_found[0]
    if image_key not in images_found:
        raise ValueError(
            f"Expected `image_key` to name an image feature of TFDS {name!r}: "
            f"one of {images_found}. Received: image_key={image_key!r}."
        )
    if (
        label_key is None
        and "label" in features
        and isinstance(features["label"], ClassLabel)
    ):
        label_key = "label"
    num_classes = None
    if label_key is not None:
        if label_key not in features or not isinstance(features[label_key], ClassLabel):
            labels_found = [k for k, f in features.items() if isinstance(f, ClassLabel)]
            raise ValueError(
                f"Expected `label_key` to name a class-label feature of TFDS "
                f"{name!r}: one of {labels_found}. Received: label_key={label_key!r}."
            )
        num_classes = features[label_key].num_classes
    return image_key, label_key, num_classes


def _tfds_available(name, data_dir):
    try:
        tfds = _tfds()
    except ImportError as e:
        logger.info("%s", e)
        return False

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
    if labels is not None:
        labels = np.asarray(labels)
        if labels.ndim > 1 and not (labels.ndim == 2 and labels.shape[1] == 1):
            raise ValueError(
                "Expected integer class ids, one per image (shape (n,)). "
                f"Received: labels of shape {labels.shape} (one-hot? use "
                "`labels.argmax(-1)`)."
            )
        labels = labels.astype("int32").reshape(-1)
        if len(labels) != len(images):
            raise ValueError(
                f"Expected one label per image ({len(images)}). Received: "
                f"{len(labels)} labels."
            )
    return _stored(images), labels, _info("numpy", "arrays", labels)


def _from_dataset(dataset):
    """A user's `tf.data.Dataset` (batched or not) read into memory."""
    spec = dataset.element_spec
    parts = spec if isinstance(spec, tuple) else (spec,)
    if (
        isinstance(spec, dict)
        or len(parts) > 2
        or any(not isinstance(p, tf.TensorSpec) for p in parts)
    ):
        raise ValueError(
            "Expected a tf.data.Dataset of images or (images, labels). "
            f"Received: element_spec {spec}. Map it to one of those first, "
            "for example `ds.map(lambda e: (e['image'], e['label']))`."
        )
    if parts[0].shape.rank == 4:
        dataset = dataset.unbatch()
    elif parts[0].shape.rank not in (2, 3):
        raise ValueError(
            "Expected images of shape (h, w), (h, w, c) or batches of them. "
            f"Received: element_spec {spec}."
        )
    blocks = [b for b in dataset.batch(1024).as_numpy_iterator()]
    if not blocks:
        raise ValueError("Expected a dataset that yields images. Received: none.")
    if len(parts) == 2:
        images = np.concatenate([b[0] for b in blocks])
        labels = np.concatenate([b[1] for b in blocks])
    else:
        images, labels = np.concatenate(blocks), None
    images, labels, info = _from_arrays((images, labels) if len(parts) == 2 else images)
    info.update(source="dataset", name="tf.data")
    return images, labels, info


def _stored(images):
    """Images as held in memory: uint8 pixels, or float32 in [-1, 1]."""
    if images.dtype == np.uint8:
        return images
    if images.max() > 1.0:
        if (
            images.min() >= 0.0
            and images.max() <= 255.0
            and np.all(images == np.round(images))
        ):
            return images.astype("uint8")
        return images.astype("float32") / 127.5 - 1.0
    images = images.astype("float32")
    if images.min() >= 0.0:
        return images * 2.0 - 1.0
    return images
