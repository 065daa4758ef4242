"""Reference DCGAN generator and discriminator builders.

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


def _check(image_shape, width, norm, num_classes, norms=NORMS):
    if len(image_shape) != 3 or image_shape[0] != image_shape[1]:
        raise ValueError(
            "Expected `image_shape` (height, width, channels) with height == "
            f"width. Received: image_shape={image_shape}."
        )
    base, k = _base_side(image_shape[0])
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
    return base, k


def _norm(norm):
    if norm == "batch":
        return GlobalBatchNormalization()
    if norm == "layer":
        # Per-example statistics: independent of the batch and the replicas.
        return layers.LayerNormalization(axis=(-3, -2, -1))
    return layers.Identity()


def dcgan_generator(
    latent_dim=128,
    image_shape=(28, 28, 1),
    width=128,
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
            transposed convolution halves it.
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
    base, k = _check(image_shape, width, norm, num_classes)
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
    width=128,
    num_classes=None,
    norm="none",
    dropout=0.0,
    name="discriminator",
):
    """Builds a DCGAN discriminator: images (and labels) to one logit each.

    Args:
        image_shape: `(side, side, channels)`, as for `dcgan_generator`.
        width: Filters of the widest (last) convolution.
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
    _, k = _check(image_shape, width, norm, num_classes, norms=D_NORMS)
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
