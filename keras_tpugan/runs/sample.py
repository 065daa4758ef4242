"""Sampling a saved generator (or GAN) into an image grid."""

import os

import keras

from keras_tpugan import images as images_lib
from keras_tpugan.gan import GAN
from keras_tpugan.latents import class_labels, seeded_latents
from keras_tpugan.runs.snapshots import latest_snapshot


def load_generator(path):
    """Loads a generator from a run directory or a `.keras` file.

    Args:
        path: A run directory (its latest snapshot
            `snapshots/gan_epoch_NNNN.keras`, else its `generator.keras`),
            or a `.keras` file of a generator or of a whole
            `keras_tpugan.GAN`.

    Returns:
        A `keras.Model` (a generator) or a `keras_tpugan.GAN`.
    """
    given = os.fspath(path)
    folder = os.path.isdir(given)
    path = latest_model(given) if folder else given
    if not (path.endswith(".keras") and os.path.isfile(path)):
        what = (
            "a folder with neither (not a run of `keras-tpugan train`, or a run "
            "stopped before its first snapshot: see --snapshot-every)"
            if folder
            else "which is neither"
        )
        raise ValueError(
            "Expected a .keras file or a run directory holding "
            "snapshots/gan_epoch_*.keras or generator.keras. "
            f"Received: {given!r}, {what}."
        )
    import keras_tpugan  # noqa: F401 - registers the GAN for deserialization

    return keras.saving.load_model(path, safe_mode=True)


def latest_model(run_dir):
    """The file `load_generator` reads in a run directory.

    Args:
        run_dir: A `keras-tpugan train` run directory.

    Returns:
        The path of its latest whole-GAN snapshot, else of its
        `generator.keras` (which may not exist).
    """
    latest = latest_snapshot(os.path.join(run_dir, "snapshots"))
    if latest is not None:
        return latest[0]
    return os.path.join(run_dir, "generator.keras")


def generate(model, num=64, labels=None, seed=0):
    """Generates images from a generator or a GAN.

    Args:
        model: A generator `keras.Model` or a `keras_tpugan.GAN`.
        num: Number of images.
        labels: Class labels for a conditional model (default: each class
            in turn).
        seed: Seed of the latents.

    Returns:
        `(images, num_classes)`: float32 images in [-1, 1] and the number of
        classes (None for an unconditional model).
    """
    if isinstance(model, GAN):
        return model.generate(num, labels=labels, seed=seed), model.num_classes
    latents = seeded_latents(num, model.inputs[0].shape[-1], seed)
    num_classes = num_classes_of(model)
    labels = class_labels(labels, num, num_classes)
    inputs = latents if labels is None else [latents, labels]
    out = keras.ops.convert_to_numpy(model(inputs, training=False))
    return out.astype("float32"), num_classes


def num_classes_of(model):
    """The number of classes of a conditional generator or GAN, else None."""
    if isinstance(model, GAN):
        return model.num_classes
    if len(model.inputs) != 2:
        return None
    embeddings = [
        layer for layer in model.layers if isinstance(layer, keras.layers.Embedding)
    ]
    return embeddings[0].input_dim if embeddings else None


def sample_grid(model, out, num=64, labels=None, seed=0, scale=2):
    """Writes a grid of generated images as a PNG.

    Args:
        model: A path (see `load_generator`), a generator or a GAN.
        out: Output PNG path.
        num: Number of images (for a conditional model without labels,
            rounded up to one full row per class).
        labels: Class labels for a conditional model.
        seed: Seed of the latents.
        scale: Integer upscaling of the pixels.

    Returns:
        The output path.

    Example:

    ```python
    sample_grid("runs/demo", "grid.png", num=64)
    ```
    """
    if isinstance(model, (str, os.PathLike)):
        model = load_generator(model)
    num_classes = num_classes_of(model)
    rows, cols, layout_labels = images_lib.grid_layout(
        num, None if labels is not None else num_classes
    )
    if layout_labels is not None:  # one row per class
        labels, num = layout_labels, len(layout_labels)
    images, _ = generate(model, num, labels, seed)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    return images_lib.save_grid(images, out, rows=rows, cols=cols, scale=scale)
