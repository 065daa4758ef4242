"""The images `read_images` reads, by kind of source: a TFDS name or the
offline subset (`from_name`), numpy arrays (`from_arrays`), or a user's
`tf.data.Dataset` (`from_dataset`), each as uint8 pixels, class ids and an
info dict."""

import logging

import numpy as np

from keras_tpugan.data.checks import info_dict
from keras_tpugan.data.mnist import offline_mnist
from keras_tpugan.data.tfds import from_tfds, resolved_source
from keras_tpugan.tf_import import tf

logger = logging.getLogger("keras_tpugan")


def from_name(image_source):
    """The images of a dataset name: TFDS's, or the offline MNIST subset."""
    name, split, source = image_source.data, image_source.split, image_source.source
    resolved = resolved_source(name, source, image_source.data_dir)
    if resolved == "offline":
        if name != "mnist" and source == "auto":
            raise ValueError(
                f"TFDS has no data for {name!r} in "
                f"{image_source.data_dir or 'its data dir'} "
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
        return x, y, info_dict("offline", "mnist", y, num_classes=10)
    return from_tfds(image_source)


def from_arrays(data):
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
    return stored_pixels(images), labels, info_dict("numpy", "arrays", labels)


def from_dataset(dataset):
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
    images, labels, info = from_arrays((images, labels) if len(parts) == 2 else images)
    info.update(source="dataset", name="tf.data")
    return images, labels, info


def stored_pixels(images):
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
