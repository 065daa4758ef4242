"""TFDS datasets: names, sources (`"auto"`, `"tfds"`, `"offline"`), reading
in memory or streamed, and whether TFDS has or can download a dataset."""

import logging
import os
import re
import socket

import keras
import numpy as np

from keras_tpugan.data import image_files
from keras_tpugan.data.checks import check_batch_size, check_labels, info_dict
from keras_tpugan.data.epochs import epoch_variable
from keras_tpugan.data.tf_batches import (
    finished_batch,
    tf_epoch_flips,
    tf_epoch_keys,
    without_autograph,
    without_autotune,
)
from keras_tpugan.tf_import import tf

logger = logging.getLogger("keras_tpugan")

_DOWNLOAD_HOST = ("storage.googleapis.com", 443)
# Examples in a streamed TFDS split's shuffle buffer (encoded: CelebA's
# JPEGs take about 150 MB), mixed after its files are read in a new order.
STREAM_SHUFFLE_BUFFER = 10_000


def resolved_source(name, source, data_dir):
    """`source` (one of `SOURCES`, as an `ImageSource` checks it), `"auto"`
    resolved to `"tfds"` (its data on disk or downloadable) or `"offline"`."""
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


def from_tfds(image_source):
    """A TFDS split in memory: its image feature (uint8) and label, if any."""
    name, split, data_dir = image_source.data, image_source.split, image_source.data_dir
    size, resize = image_source.image_size, image_source.resize
    image_key, label_key = image_source.image_key, image_source.label_key
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

    ds = ds.map(without_autograph(pick), num_parallel_calls=tf.data.AUTOTUNE)
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
    return (
        images,
        class_ids,
        info_dict("tfds", name, class_ids, num_classes=num_classes),
    )


def streamed_tfds(image_source, batch_size, labels, shuffle, seed, xflip):
    """A TFDS split read from its files batch by batch (`stream=True`).

    Every epoch reads the split's files in an order drawn from (seed,
    epoch), interleaved, through a shuffle buffer seeded from (seed,
    epoch), so the order is a function of the two alone (exact resume) and
    the global batch the same for any replica or process count. Records
    are decoded after the buffer (it holds encoded examples), each brought
    to `size` and `channels` as `read_images` brings a held one.

    Args:
        image_source: An `ImageSource` with `stream_tfds=True`.
        batch_size, labels, shuffle, seed, xflip: As for `load_images`.
    """
    name, split, source = image_source.data, image_source.split, image_source.source
    data_dir, size = image_source.data_dir, image_source.image_size
    channels, resize = image_source.channels, image_source.resize
    image_key, label_key = image_source.image_key, image_source.label_key
    if keras.backend.backend() != "tensorflow":
        raise ValueError(
            "Expected the TensorFlow backend to stream a TFDS dataset (its "
            "files are read with tf.data). Received: stream=True for "
            f"{name!r} on the {keras.backend.backend()} backend. Use "
            "stream=False (the images held in memory as uint8), or write the "
            "images to a folder, which streams on any backend."
        )
    if resolved_source(name, source, data_dir) == "offline":
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
    check_labels(labels, label_key is not None, {"name": name, "source": "tfds"})
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
        **info_dict("tfds", name, None, num_classes=num_classes),
        "num_examples": n,
        "image_shape": tuple(int(d) for d in image_shape),
        "memory_bytes": 0,
        "streamed": True,
    }
    check_batch_size(batch_size, n, info)
    steps = n // batch_size
    files = tf.constant([i.filename for i in instructions])
    skips = tf.constant([i.skip for i in instructions], "int64")
    takes = tf.constant([i.take for i in instructions], "int64")
    buffer = min(n, STREAM_SHUFFLE_BUFFER)
    epoch = epoch_variable()

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
        # Read when a pass starts, as `tf_epoch_batches` reads it.
        e = epoch.read_value()
        order = tf.range(len(instructions))
        if shuffle:
            order = tf.argsort(
                tf.cast(tf_epoch_keys(len(instructions), seed, e, 2), tf.int64),
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
            key = tf.cast(tf_epoch_keys(1, seed, e, 3)[0], tf.int64)
            records = records.shuffle(buffer, seed=key)
        used = steps * batch_size
        examples = records.take(used).map(
            without_autograph(decode),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
        flips = tf_epoch_flips(n, seed, e, xflip)
        return tf.data.Dataset.zip(
            examples, tf.data.Dataset.from_tensor_slices(flips[:used])
        )

    def scaled(examples, flips):
        return finished_batch(*examples, flips, labels)

    ds = tf.data.Dataset.range(1).flat_map(without_autograph(one_epoch))
    ds = ds.batch(batch_size, drop_remainder=True)
    ds = ds.map(
        without_autograph(scaled),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
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
    return without_autotune(ds.prefetch(tf.data.AUTOTUNE)), info


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
