"""The ResNet architecture: `resnet_generator` and `resnet_discriminator`."""

import keras
from keras import layers

from keras_tpugan.models.settings import check_settings, norm_layer
from keras_tpugan.spectral_normalization import StatelessSpectralNormalization


def upsample(x):
    """Nearest-neighbour 2x upsampling from concatenations and reshapes.

    (`UpSampling2D`'s gradient does not compile under XLA on TensorFlow;
    these layers' do, on both backends.)
    """
    height, width, channels = x.shape[1:]
    x = layers.Concatenate(axis=-1)([x, x])  # each pixel twice along the row
    x = layers.Reshape((height, 2 * width, channels))(x)
    x = layers.Concatenate(axis=2)([x, x])  # each row twice
    return layers.Reshape((2 * height, 2 * width, channels))(x)


def _conditionalnorm_layer(h, norm, labels, num_classes):
    """`norm`, then a per-class scale and shift (conditional batch norm).

    Without labels, the norm's own learned scale and shift.
    """
    if labels is None:
        return norm_layer(norm)(h)
    channels = h.shape[-1]
    h = norm_layer(norm, affine=False)(h)
    gamma = layers.Embedding(num_classes, channels, embeddings_initializer="ones")
    beta = layers.Embedding(num_classes, channels, embeddings_initializer="zeros")
    scale = layers.Reshape((1, 1, channels))(gamma(labels))
    shift = layers.Reshape((1, 1, channels))(beta(labels))
    return layers.Add()([layers.Multiply()([h, scale]), shift])


def _block_channels(width, k):
    """Filters of k resolution steps: width halved at each, 64 at the least."""
    return [max(width // 2**i, min(width, 64)) for i in range(k)]


def resnet_generator(
    latent_dim=128,
    image_shape=(32, 32, 3),
    width=None,
    num_classes=None,
    norm="batch",
    name="generator",
):
    """Builds a ResNet generator (SNGAN/BigGAN style): latents to images in [-1, 1].

    A dense layer to a 4x4 (or 7x7) map of `width` filters, then one
    residual block per doubling of the side: norm, ReLU, nearest-neighbour
    upsampling, 3x3 convolution, norm, ReLU, 3x3 convolution, plus the
    upsampled input through a 1x1 convolution. Each block halves the
    filters (64 at the least); a last norm, ReLU and 3x3 convolution give
    the image, through tanh in float32.

    Args:
        latent_dim: Size of the latent vector.
        image_shape: `(side, side, channels)`; 32, 64, 128 or any 4 or 7
            times a power of two.
        width: Filters of the first map. `None`: sized for the resolution
            (`default_width`: 256 at 32x32, 512 at 64x64, 1024 at 128x128).
        num_classes: If set, a class-conditional generator with inputs
            `[latents, labels]` (labels: int, shape `(batch,)`): every norm
            takes its scale and shift from the class (conditional batch
            norm, as in BigGAN).
        norm: `"batch"` (the default: BatchNormalization over the global
            batch, `GlobalBatchNormalization`), `"layer"` (per example) or
            `"none"`.
        name: Model name.

    Returns:
        A functional `keras.Model`.

    Example:

    >>> g = resnet_generator(latent_dim=16, image_shape=(32, 32, 3), width=16)
    >>> g.output_shape
    (None, 32, 32, 3)
    """
    base, k, width = check_settings(image_shape, width, norm, num_classes)
    z = keras.Input((latent_dim,), name="latents")
    labels = None
    if num_classes is not None:
        labels = keras.Input((), dtype="int32", name="labels")
    channels = _block_channels(width, k + 1)
    h = layers.Dense(base * base * width)(z)
    h = layers.Reshape((base, base, width))(h)
    for filters in channels[1:]:
        shortcut = layers.Conv2D(filters, 1)(upsample(h))
        h = layers.ReLU()(_conditionalnorm_layer(h, norm, labels, num_classes))
        h = layers.Conv2D(filters, 3, padding="same")(upsample(h))
        h = layers.ReLU()(_conditionalnorm_layer(h, norm, labels, num_classes))
        h = layers.Conv2D(filters, 3, padding="same")(h)
        h = layers.Add()([h, shortcut])
    h = layers.ReLU()(norm_layer(norm)(h))
    h = layers.Conv2D(image_shape[-1], 3, padding="same")(h)
    images = layers.Activation("tanh", dtype="float32", name="images")(h)
    inputs = [z, labels] if num_classes is not None else z
    return keras.Model(inputs, images, name=name)


def resnet_discriminator(
    image_shape=(32, 32, 3),
    width=None,
    num_classes=None,
    name="discriminator",
):
    """Builds a ResNet discriminator with spectral norm: images to one logit each.

    One residual block per halving of the side (3x3 convolutions, 2x2
    average pooling, a 1x1 convolution on the shortcut; the first block
    without the leading ReLU, as in SNGAN), then one block at the base
    side, ReLU, the sum over positions and a dense logit. Every
    convolution and the logit layer are spectrally normalized
    (`StatelessSpectralNormalization`, Miyato et al., 2018). The filters
    double at each block up to `width`.

    Args:
        image_shape: `(side, side, channels)`, as for `resnet_generator`.
        width: Filters of the last blocks. `None`: sized for the resolution
            (`default_width`).
        num_classes: If set, a projection discriminator (Miyato & Koyama,
            2018) with inputs `[images, labels]`.
        name: Model name.

    Returns:
        A functional `keras.Model` whose float32 output has shape `(batch, 1)`.

    Example:

    >>> d = resnet_discriminator(image_shape=(32, 32, 3), width=16)
    >>> d.output_shape
    (None, 1)
    """
    base, k, width = check_settings(image_shape, width, "none", num_classes)

    def conv(filters, size):
        return StatelessSpectralNormalization(
            layers.Conv2D(filters, size, padding="same")
        )

    x = keras.Input(image_shape, name="images")
    h = x
    for i, filters in enumerate(reversed(_block_channels(width, k))):
        shortcut = conv(filters, 1)(layers.AveragePooling2D(2)(h))
        if i > 0:
            h = layers.ReLU()(h)
        h = layers.ReLU()(conv(filters, 3)(h))
        h = layers.AveragePooling2D(2)(conv(filters, 3)(h))
        h = layers.Add()([h, shortcut])
    # One block at the base side (identity shortcut: same filters).
    residual = conv(width, 3)(layers.ReLU()(h))
    residual = conv(width, 3)(layers.ReLU()(residual))
    h = layers.ReLU()(layers.Add()([h, residual]))
    # The sum over positions (SNGAN's), as a mean times their number.
    h = layers.GlobalAveragePooling2D()(h)
    h = layers.Rescaling(float(base * base))(h)
    logits = StatelessSpectralNormalization(
        layers.Dense(1, dtype="float32"), dtype="float32", name="logits"
    )(h)
    if num_classes is None:
        return keras.Model(x, logits, name=name)
    y = keras.Input((), dtype="int32", name="labels")
    embedding = layers.Embedding(num_classes, width, dtype="float32")(y)
    projection = layers.Dot(axes=1, dtype="float32")([embedding, h])
    logits = layers.Add(dtype="float32", name="projected_logits")([logits, projection])
    return keras.Model([x, y], logits, name=name)
