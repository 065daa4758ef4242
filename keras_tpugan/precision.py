"""Dtype policy set-up: `mixed_bfloat16`, `mixed_float16` or `float32`."""

import keras

POLICIES = ("mixed_bfloat16", "mixed_float16", "float32")


def configure(policy="mixed_bfloat16"):
    """Sets Keras's global dtype policy for the layers built afterwards.

    Under both mixed policies the variables stay float32 and the layers
    compute in the 16-bit type. The GAN computes discriminator logits,
    losses and penalties in float32 whatever the policy, and under
    `mixed_float16` it wraps both of its optimizers in
    `keras.optimizers.LossScaleOptimizer` (dynamic loss scaling);
    bfloat16 needs no loss scaling.

    Call it before building the generator and the discriminator.

    Args:
        policy: One of `"mixed_bfloat16"` (the default; the native type
            of TPUs and recent GPUs), `"mixed_float16"` or `"float32"`.

    Returns:
        The `keras.DTypePolicy` now in force.

    Example:

    >>> import keras_tpugan as ktg
    >>> ktg.precision.configure("float32").name
    'float32'
    """
    if policy not in POLICIES:
        raise ValueError(
            f"Expected `policy` to be one of {POLICIES}. Received: "
            f"policy={policy!r}. Pass one of these names."
        )
    keras.mixed_precision.set_global_policy(policy)
    return keras.mixed_precision.global_policy()


def needs_loss_scaling(policy=None):
    """Returns True when `policy` (default: the global one) computes in float16.

    Args:
        policy: A `keras.DTypePolicy`, a policy name, or None for the
            global policy.

    Returns:
        A bool.
    """
    if policy is None:
        policy = keras.mixed_precision.global_policy()
    if isinstance(policy, str):
        policy = keras.DTypePolicy(policy)
    return policy.compute_dtype == "float16"
