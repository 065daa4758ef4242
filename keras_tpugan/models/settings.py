"""What both architectures share: the settings they take, checked, the
default width, and the normalization layer a setting names."""

import math

from keras import layers

from keras_tpugan.models.global_batch_normalization import GlobalBatchNormalization

# The networks `TrainConfig.architecture` names.
ARCHITECTURES = ("dcgan", "resnet")
NORMS = ("layer", "batch", "none")
# The discriminator's: also spectral normalization of every weight layer.
D_NORMS = ("none", "layer", "batch", "spectral")


def base_side(side):
    for base in (7, 4):
        if side % base == 0:
            k = math.log2(side // base)
            if k >= 1 and k == int(k):
                return base, int(k)
    raise ValueError(
        "Expected square images whose side is 7 or 4 times a power of two "
        f"(28, 32, 64, ...). Received: side {side}. Resize the images or "
        "write your own generator."
    )


def default_width(image_shape):
    """The widest layer's filters for a resolution: 64 x 2^(stride-2 layers - 1).

    The reference DCGAN's channel plan (Radford et al., 2016: 512, 256,
    128, 64 filters at 64x64, about 3.6M generator parameters), kept at
    64 filters in the layer next to the images at every resolution: 128
    at 28x28 (2 stride-2 layers), 256 at 32x32, 512 at 64x64, 1024 at
    128x128.

    Args:
        image_shape: `(side, side, channels)`.

    Returns:
        An int.

    Example:

    >>> default_width((64, 64, 3))
    512
    """
    _, k = base_side(image_shape[0])
    return 64 * 2 ** (k - 1)


def check_settings(image_shape, width, norm, num_classes, norms=NORMS):
    if len(image_shape) != 3 or image_shape[0] != image_shape[1]:
        raise ValueError(
            "Expected `image_shape` (height, width, channels) with height == "
            f"width. Received: image_shape={image_shape}."
        )
    base, k = base_side(image_shape[0])
    if width is None:
        width = default_width(image_shape)
    if width < 2**k or width % 2**k:
        raise ValueError(
            f"Expected `width` to be a positive multiple of {2**k} for "
            f"{image_shape[0]}x{image_shape[0]} images ({k} stride-2 layers "
            f"halve it). Received: width={width}."
        )
    if norm not in norms:
        raise ValueError(f"Expected `norm` in {norms}. Received: norm={norm!r}.")
    if num_classes is not None and num_classes < 2:
        raise ValueError(
            f"Expected `num_classes` >= 2 or None. Received: num_classes={num_classes}."
        )
    return base, k, width


def norm_layer(norm, affine=True):
    """The `norm` layer; `affine=False`: without its learned scale and shift."""
    if norm == "batch":
        return GlobalBatchNormalization(center=affine, scale=affine)
    if norm == "layer":
        # Per-example statistics: independent of the batch and the replicas.
        return layers.LayerNormalization(axis=(-3, -2, -1), center=affine, scale=affine)
    return layers.Identity()
