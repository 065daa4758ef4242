"""TPUs: the TPU strategy, and noticing a TPU that a run does not use."""

import glob
import logging
import os
import warnings

import keras

from keras_tpugan.tf_import import tf

logger = logging.getLogger("keras_tpugan")


def tpu_strategy(tpu, required):
    """A `TPUStrategy` and None, or None and why there is none."""
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, tf.errors.NotFoundError) as e:
        if required:
            raise ValueError(
                "Expected a reachable TPU for kind='tpu', but none was found "
                f"({e}). On a TPU VM install `tensorflow-tpu` (2.19 or 2.20); "
                "in Colab pick a TPU runtime; otherwise use kind='auto'."
            ) from e
        return None, f"{type(e).__name__}: {e}".strip().splitlines()[0]
    return tf.distribute.TPUStrategy(resolver), None


# Where TPU VMs and Colab TPU runtimes show an attached TPU: its device files
# (/dev/accel* up to v4, /dev/vfio/<n> from v5) and their images' variables.
_TPU_DEVICE_PATTERNS = ("/dev/accel[0-9]*", "/dev/vfio/[0-9]*")
_TPU_VARIABLES = ("TPU_ACCELERATOR_TYPE", "TPU_NAME", "COLAB_TPU_ADDR")


def attached_tpu():
    """Says whether a TPU is attached to this machine, without asking a framework.

    It reads what TPU VMs and Colab TPU runtimes expose: the TPU's device
    files (`/dev/accel*`, or `/dev/vfio/<n>` on newer TPUs) and the
    variables their images set (`TPU_ACCELERATOR_TYPE`, `TPU_NAME`,
    `COLAB_TPU_ADDR`). `get_strategy("auto")` uses it to warn when it falls
    back to the CPU on a machine that has a TPU.

    Returns:
        What was seen (a device file or `NAME=value`), or None.

    Example:

    >>> import keras_tpugan as ktg
    >>> seen = ktg.distribute.attached_tpu()  # None on a machine without one
    """
    for pattern in _TPU_DEVICE_PATTERNS:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    for name in _TPU_VARIABLES:
        if os.environ.get(name):
            return f"{name}={os.environ[name]}"
    return None


def warn_unused_tpu(reason, stacklevel):
    """Warns, loudly, when a TPU is attached but the backend cannot use it."""
    seen = attached_tpu()
    if seen is None:
        return
    backend = keras.backend.backend()
    fix = (
        "use the JAX backend (KERAS_BACKEND=jax with `pip install 'jax[tpu]'`; "
        "today's Colab TPU runtimes), or install `tensorflow-tpu` 2.19/2.20"
        if backend == "tensorflow"
        else "install JAX's TPU build (`pip install 'jax[tpu]'`)"
    )
    message = (
        f"A TPU is attached ({seen}), but {reason}: get_strategy('auto') falls "
        f"back to the {'GPU or ' if backend == 'tensorflow' else ''}CPU, much "
        f"slower. To train on the TPU, {fix}."
    )
    logger.warning(message)
    warnings.warn(message, RuntimeWarning, stacklevel=stacklevel)
