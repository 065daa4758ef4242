"""Gradient penalties on the discriminator, computed per example in float32."""

import keras
from keras import ops

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


def _input_gradient(fn, x):
    # keras.ops has no gradient op: each backend's own autodiff, nested
    # inside the trainer's gradient of the discriminator loss.
    if keras.backend.backend() == "jax":
        import jax

        return jax.grad(fn)(x)
    import tensorflow as tf

    with tf.GradientTape() as tape:
        tape.watch(x)
        total = fn(x)
    return tape.gradient(total, x)


def _input_gradient_sq_norm(critic, images):
    images = ops.cast(images, "float32")
    grads = _input_gradient(lambda x: ops.sum(ops.cast(critic(x), "float32")), images)
    return ops.sum(ops.square(grads), axis=tuple(range(1, len(grads.shape))))


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
    real = ops.cast(real, "float32")
    fake = ops.cast(fake, "float32")
    alpha = ops.cast(
        ops.reshape(alpha, (-1,) + (1,) * (len(real.shape) - 1)), "float32"
    )
    mixed = real + alpha * (fake - real)
    norm = ops.sqrt(_input_gradient_sq_norm(critic, mixed) + 1e-12)
    return ops.square(norm - 1.0)


def r1(critic, real):
    """R1 (Mescheder et al., 2018): `||grad D(x)||^2 / 2` on real images.

    Args:
        critic: Callable from images to logits.
        real: Real images.

    Returns:
        Per-example penalties, shape `(batch,)`, float32.
    """
    return 0.5 * _input_gradient_sq_norm(critic, real)
