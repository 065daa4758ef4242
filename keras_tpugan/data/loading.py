"""Image datasets for GAN training: TFDS, the offline MNIST subset, numpy, folders.

`load_images` returns global batches of float32 images in [-1, 1] (and
int32 labels when asked), a new permutation of the whole dataset every
epoch, with a fixed global batch (as replicas need): a `tf.data.Dataset` on
the TensorFlow backend, a `keras_tpugan.EpochBatches` (no TensorFlow
needed) on JAX. Reading TFDS or a user's `tf.data.Dataset` needs TensorFlow.
"""

import logging
import weakref

import numpy as np

from keras_tpugan.data import image_files
from keras_tpugan.data.checks import check_batch_size, check_labels, describe, info_dict
from keras_tpugan.data.epoch_batches import scaled, underlying
from keras_tpugan.data.image_source import ImageSource
from keras_tpugan.data.sources import from_arrays, from_dataset, from_name
from keras_tpugan.data.tf_batches import tf_epoch_batches
from keras_tpugan.data.tfds import streamed_tfds

logger = logging.getLogger("keras_tpugan")
# The datasets `load_images` made (weakly held).
_NORMALIZED = weakref.WeakSet()


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
        data: An `ImageSource` (then none of the image options below:
            `split` to `stream`), or: a TFDS dataset name (`"mnist"`,
            `"cifar10"`, `"celeb_a"`, ...), a folder of images (flat, or
            one subfolder per class; searched recursively; png, jpg, webp,
            bmp), a numpy array of
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
    image_source = ImageSource.of(
        data,
        stream=stream,
        split=split,
        source=source,
        image_size=image_size,
        channels=channels,
        resize=resize,
        image_key=image_key,
        label_key=label_key,
        data_dir=data_dir,
    )
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, (int, np.integer))
        or batch_size < 1
    ):
        raise ValueError(
            "Expected a positive integer `batch_size`. Received: "
            f"batch_size={batch_size!r}."
        )
    if image_source.stream_tfds:
        ds, info = streamed_tfds(image_source, batch_size, labels, shuffle, seed, xflip)
        _NORMALIZED.add(ds)
        return (ds, info) if return_info else ds
    images, class_ids, info = read_images(image_source)
    check_labels(labels, class_ids is not None, info)
    n = len(images)
    check_batch_size(batch_size, n, info)
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
    ds = tf_epoch_batches(
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


def read_images(data="mnist", **image_options):
    """Reads images into memory as `load_images` does, without batching.

    Args:
        data: A `data.ImageSource`, or the data (as for `load_images`).
        **image_options: With raw data, `load_images`' image options
            (`split`, `source`, `image_size`, `channels`, `resize`,
            `image_key`, `label_key`, `data_dir`, `stream`): the fields of
            `ImageSource.of`.

    Returns:
        `(images, labels, info)`: uint8 pixels (float32 in [-1, 1] for float
        arrays) `(n, h, w, c)` (for a streamed folder, an
        `image_files.FolderImages` that reads them on demand), int32 class
        ids or None, and the info dict.

    Example:

    >>> images, labels, info = read_images("mnist", source="offline")
    >>> images.shape, images.dtype
    ((4000, 28, 28, 1), dtype('uint8'))
    """
    image_source = ImageSource.of(data, **image_options)
    if image_source.stream_tfds:
        raise ValueError(
            "Expected a folder of images with read_images(stream=True): "
            "a TFDS split streams as batches, from load_images(..., "
            f"stream=True). Received: {describe(image_source.data)}. Use "
            "load_images, or stream=False (the images held in memory as uint8)."
        )
    kind, data = image_source.kind, image_source.data
    size, channels = image_source.image_size, image_source.channels
    if kind == "dataset":
        images, class_ids, info = from_dataset(data)
    elif kind == "folder":
        if image_source.stream_files:
            images = image_files.FolderImages(image_source)
            class_ids, names = images.labels, images.class_names
        else:
            images, class_ids, names = image_files.read_folder(image_source)
        info = info_dict("folder", data, class_ids, names)
        logger.info(
            "training data = the image folder %r%s.",
            data,
            ", streamed" if image_source.stream_files else "",
        )
    elif kind == "name":
        images, class_ids, info = from_name(image_source)
    else:
        images, class_ids, info = from_arrays(data)
    if not image_source.stream_files:
        if size is not None and images.shape[1:3] != size:
            images = np.stack(
                [image_files.fit_image(x, size, image_source.resize) for x in images]
            )
        images = image_files.convert_channels(images, channels)
    info.update(
        num_examples=len(images),
        image_shape=tuple(int(d) for d in images.shape[1:]),
        memory_bytes=int(images.nbytes),
        streamed=image_source.streamed,
    )
    return images, class_ids, info


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
