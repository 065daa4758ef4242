"""Gradient penalties on the discriminator, computed per example in float32."""

import tensorflow as tf

PENALTIES = ("wgan-gp", "r1")
DEFAULT_WEIGHTS = {"wgan-gp": 10.0, "r1": 10.0}


def check(name):
    """Validates a penalty name (`None` means no penalty).

    Args:
        name: `None`, `"wgan-gp"` or `"r1"`.

    Returns:
        The name.
    """
    if name is not None and name not in PENALTIES:
        raise ValueError(
            f"Expected `gradient_penalty` to be one of {PENALTIES} or None. "
            f"Received: gradient_penalty={name!r}."
        )
    return name


def _input_gradient_sq_norm(critic, images):
    images = tf.cast(images, "float32")
    with tf.GradientTape() as tape:
        tape.watch(images)
        total = tf.reduce_sum(tf.cast(critic(images), "float32"))
    grads = tape.gradient(total, images)
    return tf.reduce_sum(tf.square(grads), axis=list(range(1, grads.shape.rank)))


def wgan_gp(critic, real, fake, alpha):
    """WGAN-GP (Gulrajani et al., 2017): `(||grad D(x_hat)|| - 1)^2`.

    `x_hat` lies on the line between a real and a generated image, at a
    position `alpha` drawn per example by the GAN's seeded noise.

    Args:
        critic: Callable from images to logits.
        real: Real images.
        fake: Generated images (gradients stopped).
        alpha: Per-example interpolation weights, shape `(batch,)`.

    Returns:
        Per-example penalties, shape `(batch,)`, float32.
    """
    real = tf.cast(real, "float32")
    fake = tf.cast(fake, "float32")
    alpha = tf.reshape(alpha, [-1] + [1] * (real.shape.rank - 1))
    mixed = real + alpha * (fake - real)
    norm = tf.sqrt(_input_gradient_sq_norm(critic, mixed) + 1e-12)
    return tf.square(norm - 1.0)


def r1(critic, real):
    """R1 (Mescheder et al., 2018): `||grad D(x)||^2 / 2` on real images.

    Args:
        critic: Callable from images to logits.
        real: Real images.

    Returns:
        Per-example penalties, shape `(batch,)`, float32.
    """
    return 0.5 * _input_gradient_sq_norm(critic, real)
