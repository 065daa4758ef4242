"""Adversarial losses, as Keras-style serializable objects, and `get(name)`.

Each loss returns PER-EXAMPLE values (shape `(batch,)`, float32); the GAN
sums them and divides by the global batch, so that the gradients summed over
the replicas are those of the true mean.
"""

import keras
from keras import ops


def flat_logits(logits):
    """Logits of shape `(batch, 1)` (or `(batch,)`) as float32 `(batch,)`."""
    logits = ops.cast(logits, "float32")
    return ops.reshape(logits, (ops.shape(logits)[0], -1))[:, 0]


class AdversarialLoss:
    """Base class: a discriminator loss and a generator loss on logits.

    Subclasses implement `discriminator_loss(real_logits, fake_logits)` and
    `generator_loss(fake_logits)`, each returning per-example float32 values.

    Args:
        name: Optional name (defaults to the registered short name).
    """

    short_name = None

    def __init__(self, name=None):
        self.name = name or self.short_name

    def discriminator_loss(self, real_logits, fake_logits):
        """Per-example discriminator loss.

        Args:
            real_logits: Discriminator logits on real images, `(batch, 1)`.
            fake_logits: Discriminator logits on generated images.

        Returns:
            A float32 tensor of shape `(batch,)`.
        """
        raise NotImplementedError

    def generator_loss(self, fake_logits):
        """Per-example generator loss.

        Args:
            fake_logits: Discriminator logits on generated images.

        Returns:
            A float32 tensor of shape `(batch,)`.
        """
        raise NotImplementedError

    def get_config(self):
        return {"name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


@keras.saving.register_keras_serializable(package="keras_tpugan")
class NonSaturatingLoss(AdversarialLoss):
    """The non-saturating GAN loss (Goodfellow et al., 2014).

    `D: softplus(-D(x)) + softplus(D(G(z)))`, `G: softplus(-D(G(z)))`.

    Args:
        label_smoothing: One-sided label smoothing of the real targets
            (0 disables it; 0.1 is common).
        name: Optional name.

    Example:

    >>> loss = NonSaturatingLoss()
    >>> float(loss.generator_loss(keras.ops.zeros((2, 1)))[0])  # log(2)
    0.6931...
    """

    short_name = "non_saturating"

    def __init__(self, label_smoothing=0.0, name=None):
        super().__init__(name=name)
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(
                "Expected `label_smoothing` in [0, 1). Received: "
                f"label_smoothing={label_smoothing}."
            )
        self.label_smoothing = float(label_smoothing)

    def discriminator_loss(self, real_logits, fake_logits):
        real, fake = flat_logits(real_logits), flat_logits(fake_logits)
        s = self.label_smoothing
        real_term = (1.0 - s) * ops.softplus(-real) + s * ops.softplus(real)
        return real_term + ops.softplus(fake)

    def generator_loss(self, fake_logits):
        return ops.softplus(-flat_logits(fake_logits))

    def get_config(self):
        return {**super().get_config(), "label_smoothing": self.label_smoothing}


@keras.saving.register_keras_serializable(package="keras_tpugan")
class HingeLoss(AdversarialLoss):
    """The hinge GAN loss (Lim & Ye, 2017; used by SAGAN and BigGAN).

    `D: relu(1 - D(x)) + relu(1 + D(G(z)))`, `G: -D(G(z))`.

    Args:
        name: Optional name.
    """

    short_name = "hinge"

    def discriminator_loss(self, real_logits, fake_logits):
        return ops.relu(1.0 - flat_logits(real_logits)) + ops.relu(
            1.0 + flat_logits(fake_logits)
        )

    def generator_loss(self, fake_logits):
        return -flat_logits(fake_logits)


@keras.saving.register_keras_serializable(package="keras_tpugan")
class WassersteinLoss(AdversarialLoss):
    """The Wasserstein GAN loss (Arjovsky et al., 2017).

    `D: D(G(z)) - D(x)`, `G: -D(G(z))`. Pair it with
    `gradient_penalty="wgan-gp"` and `discriminator_steps=5`.

    Args:
        name: Optional name.
    """

    short_name = "wasserstein"

    def discriminator_loss(self, real_logits, fake_logits):
        return flat_logits(fake_logits) - flat_logits(real_logits)

    def generator_loss(self, fake_logits):
        return -flat_logits(fake_logits)


@keras.saving.register_keras_serializable(package="keras_tpugan")
class LeastSquaresLoss(AdversarialLoss):
    """The least-squares GAN loss (Mao et al., 2017).

    `D: ((D(x) - 1)^2 + D(G(z))^2) / 2`, `G: (D(G(z)) - 1)^2 / 2`.

    Args:
        name: Optional name.
    """

    short_name = "least_squares"

    def discriminator_loss(self, real_logits, fake_logits):
        return 0.5 * (
            ops.square(flat_logits(real_logits) - 1.0)
            + ops.square(flat_logits(fake_logits))
        )

    def generator_loss(self, fake_logits):
        return 0.5 * ops.square(flat_logits(fake_logits) - 1.0)


LOSSES = {
    cls.short_name: cls
    for cls in (NonSaturatingLoss, HingeLoss, WassersteinLoss, LeastSquaresLoss)
}


def get(identifier):
    """Resolves a loss name, config dict or instance to an `AdversarialLoss`.

    Args:
        identifier: One of `"non_saturating"`, `"hinge"`, `"wasserstein"`,
            `"least_squares"`, a dict from `keras.saving.serialize_keras_object`,
            or an `AdversarialLoss` instance (returned as is).

    Returns:
        An `AdversarialLoss`.

    Example:

    >>> get("hinge").name
    'hinge'
    """
    if isinstance(identifier, AdversarialLoss):
        return identifier
    if isinstance(identifier, dict):
        return keras.saving.deserialize_keras_object(identifier)
    if isinstance(identifier, str) and identifier in LOSSES:
        return LOSSES[identifier]()
    raise ValueError(
        f"Expected `loss` to be one of {sorted(LOSSES)} or an "
        f"`AdversarialLoss` instance. Received: loss={identifier!r}. "
        "A Keras loss as the keras-io and TensorFlow DCGANs use it: "
        "`BinaryCrossentropy(from_logits=True)` is 'non_saturating' (the "
        "generator maximizes log D(G(z))), `Hinge` is 'hinge', "
        "`MeanSquaredError` on logits is 'least_squares'; a WGAN critic's "
        "mean difference is 'wasserstein'."
    )
