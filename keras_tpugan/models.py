"""Generator and discriminator builders: the reference DCGAN, and a ResNet.

Both use `Conv2DTranspose`/strided `Conv2D` only (no `UpSampling2D`, whose
gradients do not compile under XLA), keep their last layer in float32 under
mixed precision, and draw nothing random of their own: the discriminator's
optional dropout is `KeyedDropout`, whose masks the GAN keys by its seed,
the step and the example, so a training step depends only on those.
"""

import math

import keras
from keras import layers

from keras_tpugan.keyed_dropout import KeyedDropout
from keras_tpugan.spectral_normalization import StatelessSpectralNormalization

# The networks `TrainConfig.architecture` names.
ARCHITECTURES = ("dcgan", "resnet")
NORMS = ("layer", "batch", "none")
# The discriminator's: also spectral normalization of every weight layer.
D_NORMS = ("none", "layer", "batch", "spectral")


@keras.saving.register_keras_serializable(package="keras_tpugan")
class GlobalBatchNormalization(layers.BatchNormalization):
    """BatchNormalization over the GLOBAL batch, on either backend.

    Small per-replica batches still normalize with the global batch's
    statistics, so results do not depend on the replica count. On
    TensorFlow it is `BatchNormalization(synchronized=True)` (an all-reduce
    of the moments across replicas); on JAX the jitted step sees the global
    batch sharded over the devices, so plain batch moments already are
    global (and Keras refuses `synchronized=True` there). Its saved config
    leaves `synchronized` out, so a model saved on one backend loads on the
    other.

    Args:
        **kwargs: `keras.layers.BatchNormalization` arguments other than
            `synchronized`.

    Example:

    >>> layer = GlobalBatchNormalization()
    >>> layer.synchronized == (keras.backend.backend() == "tensorflow")
    True
    """

    def __init__(self, **kwargs):
        kwargs.pop("synchronized", None)
        super().__init__(synchronized=keras.backend.backend() == "tensorflow", **kwargs)

    def get_config(self):
        config = super().get_config()
        config.pop("synchronized", None)
        return config


def _base_side(side):
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
    _, k = _base_side(image_shape[0])
    return 64 * 2 ** (k - 1)


def _check(image_shape, width, norm, num_classes, norms=NORMS):
    if len(image_shape) != 3 or image_shape[0] != image_shape[1]:
        raise ValueError(
            "Expected `image_shape` (height, width, channels) with height == "
            f"width. Received: image_shape={image_shape}."
        )
    base, k = _base_side(image_shape[0])
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


def _norm(norm, affine=True):
    """The `norm` layer; `affine=False`: without its learned scale and shift."""
    if norm == "batch":
        return GlobalBatchNormalization(center=affine, scale=affine)
    if norm == "layer":
        # Per-example statistics: independent of the batch and the replicas.
        return layers.LayerNormalization(axis=(-3, -2, -1), center=affine, scale=affine)
    return layers.Identity()


def dcgan_generator(
    latent_dim=128,
    image_shape=(28, 28, 1),
    width=None,
    num_classes=None,
    norm="layer",
    name="generator",
):
    """Builds a DCGAN generator: latents (and labels) to images in [-1, 1].

    Args:
        latent_dim: Size of the latent vector.
        image_shape: `(side, side, channels)`; side 28 (7x7 base), 32 or 64
            (4x4 base), or any 7 or 4 times a power of two.
        width: Filters of the widest (first) layer; each stride-2
            transposed convolution halves it. `None`: sized for the
            resolution by `default_width` (128 at 28x28, 256 at 32x32, 512
            at 64x64, the reference DCGAN's plan).
        num_classes: If set, a class-conditional generator with inputs
            `[latents, labels]` (labels: int, shape `(batch,)`).
        norm: `"layer"` (per-example LayerNormalization, the default),
            `"batch"` (BatchNormalization, synchronized across replicas) or
            `"none"`.
        name: Model name.

    Returns:
        A functional `keras.Model`.

    Example:

    >>> g = dcgan_generator(latent_dim=16, width=8)
    >>> g.output_shape
    (None, 28, 28, 1)
    """
    base, k, width = _check(image_shape, width, norm, num_classes)
    z = keras.Input((latent_dim,), name="latents")
    inputs, h = [z], z
    if num_classes is not None:
        y = keras.Input((), dtype="int32", name="labels")
        inputs.append(y)
        h = layers.Concatenate()([z, layers.Embedding(num_classes, latent_dim)(y)])
    h = layers.Dense(base * base * width, use_bias=norm == "none")(h)
    h = layers.Reshape((base, base, width))(h)
    h = layers.ReLU()(_norm(norm)(h))
    for i in range(1, k):
        h = layers.Conv2DTranspose(
            width // 2**i, 4, strides=2, padding="same", use_bias=norm == "none"
        )(h)
        h = layers.ReLU()(_norm(norm)(h))
    h = layers.Conv2DTranspose(image_shape[-1], 4, strides=2, padding="same")(h)
    images = layers.Activation("tanh", dtype="float32", name="images")(h)
    return keras.Model(inputs if num_classes else z, images, name=name)


def dcgan_discriminator(
    image_shape=(28, 28, 1),
    width=None,
    num_classes=None,
    norm="none",
    dropout=0.0,
    name="discriminator",
):
    """Builds a DCGAN discriminator: images (and labels) to one logit each.

    Args:
        image_shape: `(side, side, channels)`, as for `dcgan_generator`.
        width: Filters of the widest (last) convolution. `None`: sized for
            the resolution by `default_width`.
        num_classes: If set, a projection discriminator (Miyato & Koyama,
            2018) with inputs `[images, labels]`.
        norm: `"none"` (the default), `"layer"`, `"batch"` (synchronized;
            not with WGAN-GP) or `"spectral"`: every convolution and the
            logit layer wrapped in Keras's `SpectralNormalization` (as
            `StatelessSpectralNormalization`, which also normalizes in
            inference)
            (Miyato et al., 2018), which bounds the discriminator's
            Lipschitz constant (one power iteration per call; its vector
            depends on the weights alone, so it is the same on every
            replica).
        dropout: If above 0, a `KeyedDropout` of this rate after every
            activation (as in the TensorFlow DCGAN tutorial's 0.3), which
            keeps the discriminator from memorizing a small dataset.
        name: Model name.

    Returns:
        A functional `keras.Model` whose float32 output has shape `(batch, 1)`.

    Example:

    >>> d = dcgan_discriminator(width=8)
    >>> d.output_shape
    (None, 1)
    """
    _, k, width = _check(image_shape, width, norm, num_classes, norms=D_NORMS)
    spectral = norm == "spectral"
    if not isinstance(dropout, int | float) or not 0.0 <= dropout < 1.0:
        raise ValueError(
            "Expected `dropout` in [0, 1) (the fraction of features dropped; "
            f"0 turns it off). Received: dropout={dropout!r}."
        )

    def weighted(layer):
        return StatelessSpectralNormalization(layer) if spectral else layer

    x = keras.Input(image_shape, name="images")
    h = x
    for i in reversed(range(k)):
        conv = layers.Conv2D(width // 2**i, 4, strides=2, padding="same")
        h = weighted(conv)(h)
        if i < k - 1 and not spectral:
            h = _norm(norm)(h)
        h = layers.LeakyReLU(0.2)(h)
        if dropout > 0:
            h = KeyedDropout(dropout)(h)
    h = layers.Flatten()(h)
    if spectral:
        logits = StatelessSpectralNormalization(
            layers.Dense(1, dtype="float32"), dtype="float32", name="logits"
        )(h)
    else:
        logits = layers.Dense(1, dtype="float32", name="logits")(h)
    if num_classes is None:
        return keras.Model(x, logits, name=name)
    y = keras.Input((), dtype="int32", name="labels")
    embedding = layers.Embedding(num_classes, h.shape[-1], dtype="float32")(y)
    projection = layers.Dot(axes=1, dtype="float32")([embedding, h])
    logits = layers.Add(dtype="float32", name="projected_logits")([logits, projection])
    return keras.Model([x, y], logits, name=name)


def _upsample(x):
    """Nearest-neighbour 2x upsampling from concatenations and reshapes.

    (`UpSampling2D`'s gradient does not compile under XLA on TensorFlow;
    these layers' do, on both backends.)
    """
    height, width, channels = x.shape[1:]
    x = layers.Concatenate(axis=-1)([x, x])  # each pixel twice along the row
    x = layers.Reshape((height, 2 * width, channels))(x)
    x = layers.Concatenate(axis=2)([x, x])  # each row twice
    return layers.Reshape((2 * height, 2 * width, channels))(x)


def _conditional_norm(h, norm, labels, num_classes):
    """`norm`, then a per-class scale and shift (conditional batch norm).

    Without labels, the norm's own learned scale and shift.
    """
    if labels is None:
        return _norm(norm)(h)
    channels = h.shape[-1]
    h = _norm(norm, affine=False)(h)
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
    base, k, width = _check(image_shape, width, norm, num_classes)
    z = keras.Input((latent_dim,), name="latents")
    labels = None
    if num_classes is not None:
        labels = keras.Input((), dtype="int32", name="labels")
    channels = _block_channels(width, k + 1)
    h = layers.Dense(base * base * width)(z)
    h = layers.Reshape((base, base, width))(h)
    for filters in channels[1:]:
        shortcut = layers.Conv2D(filters, 1)(_upsample(h))
        h = layers.ReLU()(_conditional_norm(h, norm, labels, num_classes))
        h = layers.Conv2D(filters, 3, padding="same")(_upsample(h))
        h = layers.ReLU()(_conditional_norm(h, norm, labels, num_classes))
        h = layers.Conv2D(filters, 3, padding="same")(h)
        h = layers.Add()([h, shortcut])
    h = layers.ReLU()(_norm(norm)(h))
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
    base, k, width = _check(image_shape, width, "none", num_classes)

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
