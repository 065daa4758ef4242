"""Dtype policy set-up: `auto`, `mixed_bfloat16`, `mixed_float16` or `float32`.

The module imports Keras only when a function runs: the command line reads
its choices before it imports Keras.
"""

import logging

logger = logging.getLogger("keras_tpugan")

POLICIES = ("auto", "mixed_bfloat16", "mixed_float16", "float32")
# The types the gradients may cross the replicas in (`GAN.compile`'s
# `all_reduce_dtype`): bfloat16 halves the bytes.
ALL_REDUCE_DTYPES = ("float32", "bfloat16")


def configure(policy="mixed_bfloat16", strategy=None):
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
            of TPUs and recent GPUs), `"mixed_float16"`, `"float32"` or
            `"auto"`: mixed_bfloat16 where the hardware computes in
            bfloat16 natively, float32 elsewhere (see `resolve`); the
            choice and its reason are logged.
        strategy: For `"auto"`, the strategy (or JAX distribution) whose
            devices decide (default: this process's devices).

    Returns:
        The `keras.DTypePolicy` now in force.

    Example:

    >>> import keras_tpugan as ktg
    >>> ktg.precision.configure("float32").name
    'float32'
    """
    import keras

    if policy not in POLICIES:
        raise ValueError(
            f"Expected `policy` to be one of {POLICIES}. Received: "
            f"policy={policy!r}. Pass one of these names."
        )
    if policy == "auto":
        policy, reason = resolve(strategy)
        logger.info("precision auto = %s: %s.", policy, reason)
    keras.mixed_precision.set_global_policy(policy)
    return keras.mixed_precision.global_policy()


def resolve(strategy=None):
    """The policy `"auto"` stands for on these devices, and why.

    mixed_bfloat16 on TPUs, on GPUs of compute capability 8.0 or more
    (Ampere on) and on CPUs with AMX bfloat16 units (`amx_bf16`); float32
    elsewhere: a CPU without them emulates bfloat16 (its `avx512_bf16`
    converts and takes dot products only), which made the demo's step
    slower than in float32; with AMX it ran 1.19x float32
    (docs/results/throughput-and-peers.md).

    Args:
        strategy: A `tf.distribute.Strategy` or `keras.distribution`
            whose devices decide (default: this process's devices).

    Returns:
        `(policy_name, reason)`.

    Example:

    >>> policy, reason = resolve()
    >>> policy in ("mixed_bfloat16", "float32")
    True
    """

    platform, capability = _accelerator(strategy)
    if platform == "tpu":
        return "mixed_bfloat16", "TPU (bfloat16 is its native type)"
    if platform == "gpu":
        if capability is not None and capability >= (8, 0):
            return "mixed_bfloat16", f"GPU of compute capability {capability}"
        return "float32", f"GPU of compute capability {capability}, before 8.0"
    if _cpu_has_amx_bf16():
        return "mixed_bfloat16", "CPU with AMX bfloat16 units"
    return "float32", "CPU without AMX bfloat16 units (bfloat16 is emulated)"


def _accelerator(strategy):
    """`(platform, compute capability or None)` of the devices that train."""
    import keras

    if keras.backend.backend() == "jax":
        import jax

        if strategy is not None and hasattr(strategy, "device_mesh"):
            device = strategy.device_mesh.devices.flat[0]
        else:
            device = jax.devices()[0]
        capability = getattr(device, "compute_capability", None)
        if capability:
            capability = tuple(int(x) for x in str(capability).split(".")[:2])
        return device.platform, capability or None
    import tensorflow as tf

    if isinstance(strategy, tf.distribute.TPUStrategy):
        return "tpu", None
    try:
        names = list(strategy.extended.worker_devices)
    except (AttributeError, RuntimeError):  # None, or the default strategy,
        # which has no device list: the devices TensorFlow sees
        names = [d.name for d in tf.config.list_logical_devices()]
    if any("TPU:" in n for n in names):
        return "tpu", None
    if any("GPU:" in n for n in names):
        gpus = tf.config.list_physical_devices("GPU")
        details = tf.config.experimental.get_device_details(gpus[0]) if gpus else {}
        return "gpu", details.get("compute_capability")
    return "cpu", None


def _cpu_has_amx_bf16():
    try:
        with open("/proc/cpuinfo") as f:
            return any(
                line.startswith("flags") and "amx_bf16" in line.split() for line in f
            )
    except OSError:  # not Linux: no way to tell, assume not
        return False


def needs_loss_scaling(policy=None):
    """Returns True when `policy` (default: the global one) computes in float16.

    Args:
        policy: A `keras.DTypePolicy`, a policy name, or None for the
            global policy.

    Returns:
        A bool.
    """
    import keras

    if policy is None:
        policy = keras.mixed_precision.global_policy()
    if isinstance(policy, str):
        policy = keras.DTypePolicy(policy)
    return policy.compute_dtype == "float16"
