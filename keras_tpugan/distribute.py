"""Choosing a `tf.distribute` strategy and checking batches against it."""

import logging
import os

import tensorflow as tf

logger = logging.getLogger("keras_tpugan")

KINDS = ("auto", "tpu", "gpu", "cpu", "multiworker")


def get_strategy(kind="auto", tpu=None, num_replicas=None):
    """Returns the `tf.distribute.Strategy` to build, compile and fit under.

    Args:
        kind: `"auto"` picks a TPU when one is reachable, else every local
            GPU (`MirroredStrategy`), else the CPU. `"tpu"`, `"gpu"`,
            `"cpu"` and `"multiworker"` (`MultiWorkerMirroredStrategy`,
            configured by the `TF_CONFIG` environment variable) ask for one
            explicitly and fail if it is not there.
        tpu: TPU name or address for `TPUClusterResolver` (`None` finds the
            local TPU VM or the Colab TPU).
        num_replicas: For `"gpu"` and `"cpu"`: use the first
            `num_replicas` devices (`None`: all of them). Several logical
            CPU devices give a multi-replica strategy on one CPU, which is
            how the tests check replica parity.

    Returns:
        A `tf.distribute.Strategy`.

    Example:

    >>> import keras_tpugan as ktg
    >>> strategy = ktg.distribute.get_strategy("cpu")
    >>> strategy.num_replicas_in_sync
    1
    """
    if kind not in KINDS:
        raise ValueError(
            f"Expected `kind` to be one of {KINDS}. Received: kind={kind!r}."
        )
    if kind in ("auto", "tpu"):
        strategy = _tpu_strategy(tpu, required=kind == "tpu")
        if strategy is not None:
            return strategy
    if kind == "multiworker":
        if "TF_CONFIG" not in os.environ:
            logger.warning(
                "kind='multiworker' without TF_CONFIG runs as a single worker."
            )
        return tf.distribute.MultiWorkerMirroredStrategy()
    if kind in ("auto", "gpu"):
        gpus = tf.config.list_logical_devices("GPU")
        if gpus:
            return tf.distribute.MirroredStrategy(_pick(gpus, num_replicas, "GPU"))
        if kind == "gpu":
            raise ValueError(
                "Expected at least one GPU for kind='gpu'; TensorFlow sees none. "
                "Install a CUDA build of TensorFlow (`pip install "
                "'tensorflow[and-cuda]'`) or use kind='auto' or 'cpu'."
            )
    cpus = tf.config.list_logical_devices("CPU")
    devices = _pick(cpus, num_replicas, "CPU")
    if len(devices) == 1:
        return tf.distribute.OneDeviceStrategy(devices[0])
    return tf.distribute.MirroredStrategy(
        devices, cross_device_ops=tf.distribute.ReductionToOneDevice()
    )


def _pick(devices, num_replicas, kind):
    names = [d.name for d in devices]
    if num_replicas is None:
        return names
    if not 1 <= num_replicas <= len(names):
        raise ValueError(
            f"Expected `num_replicas` between 1 and the {len(names)} {kind} "
            f"device(s) TensorFlow sees. Received: num_replicas={num_replicas}."
        )
    return names[:num_replicas]


def _tpu_strategy(tpu, required):
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
        return None
    return tf.distribute.TPUStrategy(resolver)


def check_global_batch(global_batch_size, strategy=None):
    """Checks that a global batch splits evenly over the replicas.

    Args:
        global_batch_size: The number of examples per training step, over
            all replicas.
        strategy: The strategy (default: the current one).

    Returns:
        The per-replica batch size.

    Example:

    >>> import keras_tpugan as ktg
    >>> ktg.distribute.check_global_batch(64)
    64
    """
    strategy = strategy or tf.distribute.get_strategy()
    replicas = strategy.num_replicas_in_sync
    if global_batch_size < 1 or global_batch_size % replicas:
        raise ValueError(
            f"Expected a global batch size divisible by the {replicas} "
            f"replica(s) of {type(strategy).__name__}. Received: global batch "
            f"size {global_batch_size}. Use a multiple of {replicas}, for "
            f"example {max(replicas, global_batch_size // replicas * replicas)}."
        )
    return global_batch_size // replicas


def is_chief(strategy=None):
    """Returns True on the worker that should write files (logs, images).

    Args:
        strategy: The strategy (default: the current one).

    Returns:
        A bool: False only on the non-chief workers of a multi-worker run.
    """
    strategy = strategy or tf.distribute.get_strategy()
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return True
    resolver = strategy.cluster_resolver
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type is None or task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return task_type == "worker" and task_id == 0 and not has_chief
