"""The real images `QualityMetrics.for_data` scores against, and the
classifier of their classes it scores with (FID, on unlabelled data, needs
the images only)."""

import dataclasses
import hashlib
import os

import numpy as np

from keras_tpugan import data as data_lib
from keras_tpugan import metrics
from keras_tpugan.whole_files import replaced_whole


class UnlabelledDataError(ValueError):
    """Data without labels, or with one class: no classifier to score with."""


def reference_arguments(image_source, seed, max_images, fid, on_unlabelled):
    """What `QualityMetrics.for_data` scores `image_source` against.

    Args:
        image_source: A `data.ImageSource`.
        seed: Seed of the subset read and of the classifier.
        max_images: The most images read.
        fid: Whether FID was asked for (`features="inception"`).
        on_unlabelled: As for `QualityMetrics.for_data`.

    Returns:
        `(arguments, record)`: the `QualityMetrics` arguments (none for the
        shipped MNIST classifier; the classifier and the images for other
        labelled data; the images and `features="inception"` for FID) and
        the classifier's record (None without one of the data's own); or
        None for unlabelled data with `on_unlabelled="none"`.

    Raises:
        UnlabelledDataError: Unlabelled data with `on_unlabelled="raise"`.
    """
    if uses_mnist_classifier(image_source) and not fid:
        return {}, None
    subset = read_subset(image_source, seed, max_images)
    if not fid:
        try:
            model, record, real, held_out = labelled_reference(
                image_source, seed, max_images, subset=subset
            )
        except UnlabelledDataError:
            if on_unlabelled == "none":
                return None
            if on_unlabelled == "raise":
                raise
        else:
            return {
                "classifier": model,
                "real_images": real,
                "held_out_images": held_out,
            }, record
    real, held_out = split_reference(subset[0], seed)
    return {
        "features": "inception",
        "real_images": real,
        "held_out_images": held_out,
    }, None


def uses_mnist_classifier(data, image_size=None, channels=None):
    """`QualityMetrics.uses_mnist_classifier`: MNIST read at 28x28x1."""
    if isinstance(data, data_lib.ImageSource):
        data, image_size, channels = data.data, data.image_size, data.channels
    if isinstance(image_size, int):
        image_size = (image_size, image_size)
    size = None if image_size is None else tuple(image_size)
    return (
        isinstance(data, str)
        and data == "mnist"
        and size in (None, (28, 28))
        and channels in (None, 1)
    )


def labelled_reference(image_source, seed, max_images, subset=None):
    """A classifier of the data's classes and the images to compare with.

    At most `max_images` images are read into memory: a subset drawn from
    `seed` (a streamed folder decodes only those; a streamed TFDS split
    reads its first ones). The classifier (`metrics.data_classifier`,
    cached) holds out a tenth, the floor's images; up to 10,000 of the rest
    are the reference.

    Args:
        image_source: A `data.ImageSource`.
        seed: Seed of the subset, the classifier's split and training.
        max_images: The most images read.
        subset: `read_subset(image_source, seed, max_images)`, when it has
            been read already.

    Returns:
        `(classifier, record, real_images, held_out_images)`, the images
        in [-1, 1].

    Raises:
        UnlabelledDataError: The data has no labels, or one class.
    """
    images, labels, info = subset or read_subset(image_source, seed, max_images)
    if labels is None or len(np.unique(labels)) < 2:
        shape = "x".join(map(str, images.shape[1:]))
        raise UnlabelledDataError(
            "Expected labelled images of at least 2 classes, to train the "
            "classifier FCD, the classifier score and KID are measured "
            f"with. Received: {info['name']!r} ({shape} images, "
            f"{'no labels' if labels is None else 'one class'}). Give a "
            "folder one subfolder per class, or name the TFDS label feature "
            "(label_key), or score FID (on_unlabelled='fid')."
        )
    model, record = metrics.data_classifier(images, labels, seed=seed)
    real, held_out = split_reference(images, seed)
    record = {**record, "real_images": len(real), "held_out_images": len(held_out)}
    return model, record, real, held_out


def split_reference(images, seed):
    """The images FID compares with, and the held-out tenth for its floor.

    The split `labelled_reference` makes (`metrics.held_out_indices`), for
    data scored without a classifier: up to 10,000 images of the rest are
    the reference.

    Args:
        images: The subset read (`read_subset`), uint8 or in [-1, 1].
        seed: Seed of the split.

    Returns:
        `(real_images, held_out_images)`, in [-1, 1].
    """
    test = metrics.held_out_indices(len(images), seed)
    reference = np.setdiff1d(np.arange(len(images)), test)[:10_000]
    return data_lib.to_unit(images[reference]), data_lib.to_unit(images[test])


def read_subset(image_source, seed, max_images):
    """`(images, labels, info)`: at most `max_images` images of the training
    split, drawn from `seed` (`labels` None without labels)."""
    # The training split (a streamed TFDS split: its first images only),
    # held in memory; a streamed folder decodes the subset only.
    images, labels, info = data_lib.read_images(
        dataclasses.replace(
            image_source,
            split=f"train[:{max_images}]" if image_source.stream_tfds else "train",
            stream_tfds=False,
        )
    )
    subset = np.arange(len(images))
    if len(images) > max_images:
        rng = np.random.default_rng(seed)
        subset = np.sort(rng.choice(len(images), max_images, replace=False))
    if len(subset) < len(images) or image_source.stream_files:
        images = images[subset]  # a streamed folder decodes these only
        labels = None if labels is None else labels[subset]
    return images, labels, info


def fid_reference_features(network, real_images, held_out_images=None):
    """The real images' FID features and floor, cached across runs.

    Computing them is most of a first FID score's cost on a CPU (about 16
    images a second here), and every run on the same data needs the same:
    they are kept in `metrics.cache_dir()/fid_features/`, keyed by the
    images' bytes and the weights' checksum, and read back when whole.

    Args:
        network: A `metrics.FIDInception`.
        real_images: The images compared with, in [-1, 1].
        held_out_images: Held-out real images for the floor, or None.

    Returns:
        `(real_features, floor)`: float64 `(n, 2048)` and
        `{"fid_real_floor": FID of the held-out images, or NaN}`.
    """
    real = np.asarray(real_images, "float32")
    digest = hashlib.sha256(metrics.FID_WEIGHTS_SHA256.encode())
    digest.update(f"{real.shape}".encode())
    digest.update(real.tobytes())
    if held_out_images is not None:
        held = np.asarray(held_out_images, "float32")
        digest.update(f"{held.shape}".encode())
        digest.update(held.tobytes())
    folder = os.path.join(metrics.cache_dir(), "fid_features")
    path = os.path.join(folder, f"{digest.hexdigest()[:32]}.npz")
    try:
        with np.load(path) as stored:
            return (
                stored["real_features"].astype("float64"),
                {"fid_real_floor": float(stored["fid_real_floor"])},
            )
    except (OSError, ValueError, KeyError):
        pass  # not cached yet, or damaged: computed again
    features = network.features(real)
    floor = float("nan")
    if held_out_images is not None:
        floor = metrics.frechet_distance(features, network.features(held))
    try:
        os.makedirs(folder, exist_ok=True)
        with replaced_whole(path) as partial:
            with open(partial, "wb") as file:
                np.savez(
                    file,
                    real_features=features.astype("float32"),
                    fid_real_floor=floor,
                )
    except OSError:
        pass  # a cache that cannot be written: computed again next time
    return features, {"fid_real_floor": floor}
