"""Seeded latents and class labels for generated images, on either backend.

A leaf module: `GAN.generate`, `SampleGrid` and `sample` draw their latents
here, so a seed gives the same images everywhere.
"""

import numpy as np


def seeded_latents(num, latent_dim, seed):
    """Latents for `generate` and the sample grids, the same on every backend.

    Drawn on the host with numpy's `default_rng` (PCG64), so a seed gives
    the same latents, and the same images from a generator, on TensorFlow
    and on JAX, with or without TensorFlow installed.

    Args:
        num: Number of latents.
        latent_dim: Size of each.
        seed: An int, or a pair of ints.

    Returns:
        A float32 numpy array of shape `(num, latent_dim)`.
    """
    seed = [int(seed), 0] if np.ndim(seed) == 0 else [int(s) for s in seed]
    rng = np.random.default_rng(seed)
    return rng.standard_normal((num, latent_dim), dtype=np.float32)


def class_labels(labels, num, num_classes):
    """Checks (or makes) the class labels of `num` generated images.

    Args:
        labels: Labels of shape `(num,)`, or None: `0, 1, ...,
            num_classes - 1, 0, 1, ...` for a conditional model.
        num: Number of images.
        num_classes: Classes of the model, None when unconditional.

    Returns:
        An int32 numpy array of shape `(num,)`, or None when unconditional.
    """
    if num_classes is None:
        if labels is not None:
            raise ValueError(
                "Received `labels` but the model is not class-conditional "
                "(num_classes=None). Drop the labels."
            )
        return None
    if labels is None:
        return (np.arange(num) % num_classes).astype("int32")
    labels = np.asarray(labels).reshape(-1)
    if labels.shape[0] != num or labels.min() < 0 or labels.max() >= num_classes:
        raise ValueError(
            f"Expected {num} labels in [0, {num_classes}). Received: "
            f"{labels.shape[0]} labels in [{labels.min()}, {labels.max()}]."
        )
    return labels.astype("int32")
