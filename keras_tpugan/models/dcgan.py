"""The reference DCGAN: `dcgan_generator` and `dcgan_discriminator`."""

import keras
from keras import layers

from keras_tpugan.keyed_dropout import KeyedDropout
from keras_tpugan.models.settings import D_NORMS, check_settings, norm_layer
from keras_tpugan.spectral_normalization import StatelessSpectralNormalization


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
    base, k, width = check_settings(image_shape, width, norm, num_classes)
    z = keras.Input((latent_dim,), name="latents")
    inputs, h = [z], z
    if num_classes is not None:
        y = keras.Input((), dtype="int32", name="labels")
        inputs.append(y)
        h = layers.Concatenate()([z, layers.Embedding(num_classes, latent_dim)(y)])
    h = layers.Dense(base * base * width, use_bias=norm == "none")(h)
    h = layers.Reshape((base, base, width))(h)
    h = layers.ReLU()(norm_layer(norm)(h))
    for i in range(1, k):
        h = layers.Conv2DTranspose(
            width // 2**i, 4, strides=2, padding="same", use_bias=norm == "none"
        )(h)
        h = layers.ReLU()(norm_layer(norm)(h))
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
    _, k, width = check_settings(image_shape, width, norm, num_classes, norms=D_NORMS)
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
            h = norm_layer(norm)(h)
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
