"""Choosing a strategy (TensorFlow) or distribution (JAX).

On the TensorFlow backend the GAN is built and compiled under a
`tf.distribute.Strategy`; on the JAX backend under a
`keras.distribution.DataParallel`. `get_strategy` returns the right one for
the backend Keras runs on, and both are used the same way:
`with strategy.scope(): ...` around building and compiling the GAN.
"""

import contextlib
import logging
import os
import sys

import keras

from keras_tpugan.distribute.cluster import (
    cluster_processes,
    communication_options,
    multi_worker_strategy,
    positive_seconds,
    slurm_tasks,
    start_jax_processes,
)
from keras_tpugan.distribute.tpu import tpu_strategy, warn_unused_tpu
from keras_tpugan.tf_import import tf

logger = logging.getLogger("keras_tpugan")

KINDS = ("auto", "tpu", "gpu", "cpu", "multiworker")


def get_strategy(
    kind="auto",
    tpu=None,
    num_replicas=None,
    collective="auto",
    bytes_per_pack=0,
    collective_timeout_seconds=None,
    start_timeout_seconds=300,
    heartbeat_timeout_seconds=30,
):
    """Returns the strategy to build, compile and fit under, per backend.

    On TensorFlow, a `tf.distribute.Strategy`: TPUStrategy,
    MirroredStrategy, MultiWorkerMirroredStrategy, or for one device the
    default strategy (`tf.distribute.get_strategy()`, the one a plain
    `keras.Model` trains under; `strategy_name` calls it
    `"DefaultStrategy"`), or OneDeviceStrategy for a device TensorFlow
    would not pick by itself. On
    JAX, a `keras.distribution.DataParallel` over the devices of that kind
    (every TPU core or GPU; for `"multiworker"`, every device of every host
    after `keras.distribution.initialize()`). Either is used as
    `with strategy.scope():`, and `num_replicas(strategy)` counts its
    replicas.

    Args:
        kind: `"auto"` picks the multi-process strategy when the
            environment describes a cluster of several processes
            (`cluster_processes() > 1`: `TF_CONFIG` on TensorFlow, the
            `KERAS_DISTRIBUTION_*` variables on JAX, as
            `keras-tpugan launch` sets them), else a TPU when one is
            reachable, else every local GPU (`MirroredStrategy`), else the
            CPU; when a TPU is attached (`attached_tpu()`) but the backend
            cannot use it (TensorFlow without TPU support, JAX without its
            TPU build), it warns (`RuntimeWarning` and the log) before it
            falls back. `"tpu"`, `"gpu"`,
            `"cpu"` and `"multiworker"` (`MultiWorkerMirroredStrategy`,
            configured by the `TF_CONFIG` environment variable) ask for one
            explicitly and fail if it is not there.
        tpu: TPU name or address for `TPUClusterResolver` (`None` finds the
            local TPU VM or the Colab TPU). TensorFlow only: JAX finds its
            TPU cores itself.
        num_replicas: Use the first `num_replicas` of this process's
            GPUs or CPU devices (or on JAX its TPU cores; `None`: all of
            them), for `"gpu"`, `"cpu"` and what `"auto"` picks. Several
            logical CPU devices give a multi-replica strategy on one CPU,
            which is how the tests check replica parity. Refused (a
            `ValueError`) with several processes, and with a TPU on
            TensorFlow, where every process trains on all its devices.
        collective: For several processes on TensorFlow, the all-reduce
            across them: `"auto"` (TensorFlow picks), `"ring"` (gRPC ring
            all-reduce, any device) or `"nccl"` (NVIDIA's, GPUs only). On
            JAX only `"auto"`: XLA chooses the collective itself (over the
            ICI links within a TPU slice).
        bytes_per_pack: For several processes on TensorFlow, gradients are
            packed into all-reduces of about this many bytes (0: TensorFlow
            decides; its `CommunicationOptions.bytes_per_pack`). On JAX
            only 0.
        collective_timeout_seconds: For several processes on TensorFlow, an
            all-reduce that has not finished after this long fails (None:
            no limit). On JAX only None.
        start_timeout_seconds: For several processes, how long a process
            waits at start for all the others (an unreachable address
            fails after this long).
        heartbeat_timeout_seconds: For several processes, how long a
            process may go silent before the others declare it lost and
            stop with an error.

    Returns:
        A `tf.distribute.Strategy` (TensorFlow backend) or a
        `keras.distribution.DataParallel` (JAX backend).

    Example:

    >>> import keras_tpugan as ktg
    >>> strategy = ktg.distribute.get_strategy("cpu")
    >>> ktg.distribute.num_replicas(strategy)
    1
    """
    if kind not in KINDS:
        raise ValueError(
            f"Expected `kind` to be one of {KINDS}. Received: kind={kind!r}."
        )
    if kind == "auto" and cluster_processes() > 1:
        kind = "multiworker"
    if kind == "multiworker":
        _check_all_devices(num_replicas, "several processes")
    cluster = dict(
        start_timeout_seconds=positive_seconds(
            "start_timeout_seconds", start_timeout_seconds
        ),
        heartbeat_timeout_seconds=positive_seconds(
            "heartbeat_timeout_seconds", heartbeat_timeout_seconds
        ),
    )
    communication = communication_options(
        collective, bytes_per_pack, collective_timeout_seconds
    )
    if keras.backend.backend() == "jax":
        return _jax_distribution(kind, num_replicas, **cluster)
    if kind in ("auto", "tpu"):
        strategy, error = tpu_strategy(tpu, required=kind == "tpu")
        if strategy is not None:
            _check_all_devices(num_replicas, "a TPU on TensorFlow")
            return strategy
        if kind == "auto":
            warn_unused_tpu(f"TensorFlow cannot reach it ({error})", stacklevel=3)
    if kind == "multiworker":
        if "TF_CONFIG" not in os.environ and slurm_tasks() > 1:
            resolver = tf.distribute.cluster_resolver.SlurmClusterResolver()
        else:
            if "TF_CONFIG" not in os.environ:
                logger.warning(
                    "kind='multiworker' without TF_CONFIG or a Slurm job of "
                    "several tasks runs as a single worker."
                )
            resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        return multi_worker_strategy(resolver, communication, **cluster)
    if kind in ("auto", "gpu"):
        gpus = tf.config.list_logical_devices("GPU")
        if gpus:
            devices = _pick(gpus, num_replicas, "GPU")
            if len(devices) == 1:
                return _one_device(devices[0], default=devices[0] == gpus[0].name)
            return tf.distribute.MirroredStrategy(devices)
        if kind == "gpu":
            raise ValueError(
                "Expected at least one GPU for kind='gpu'; TensorFlow sees none. "
                "Install a CUDA build of TensorFlow (`pip install "
                "'tensorflow[and-cuda]'`) or use kind='auto' or 'cpu'."
            )
    cpus = tf.config.list_logical_devices("CPU")
    devices = _pick(cpus, num_replicas, "CPU")
    if len(devices) == 1:
        first = devices[0] == cpus[0].name and not tf.config.list_logical_devices("GPU")
        return _one_device(devices[0], default=first)
    return tf.distribute.MirroredStrategy(
        devices, cross_device_ops=tf.distribute.ReductionToOneDevice()
    )


def _check_all_devices(num_replicas, where):
    if num_replicas is not None:
        raise ValueError(
            f"Expected num_replicas=None with {where}: every process trains "
            f"on all of its devices. Received: num_replicas={num_replicas}. "
            "Leave num_replicas unset, or choose GPUs or CPU devices with "
            "kind='gpu' or kind='cpu' in one process."
        )


def _one_device(device, default):
    """The default strategy when `device` is where TensorFlow puts ops anyway.

    One device needs no distribution: under the default strategy `fit` feeds
    the batches straight from the `tf.data` iterator and calls `train_step`
    directly, while a OneDeviceStrategy adds a distributed iterator and a
    `strategy.run` to every step (docs/design/notes.md). Inside
    another strategy's scope, or for a device TensorFlow would not pick,
    a OneDeviceStrategy keeps the placement explicit.
    """
    if default and not tf.distribute.has_strategy():
        return tf.distribute.get_strategy()
    return tf.distribute.OneDeviceStrategy(device)


def strategy_name(strategy):
    """A strategy's class name; `"DefaultStrategy"` for TensorFlow's default.

    Args:
        strategy: A `tf.distribute.Strategy` or a
            `keras.distribution.Distribution`.

    Returns:
        A string, as `summary.json` and the logs write it.

    Example:

    >>> import keras_tpugan as ktg
    >>> ktg.distribute.strategy_name(ktg.distribute.get_strategy("cpu"))
    'DefaultStrategy'
    """
    if keras.backend.backend() == "tensorflow" and isinstance(
        strategy, tf.distribute.MultiWorkerMirroredStrategy
    ):
        return "MultiWorkerMirroredStrategy"  # its class is named for its ops
    name = type(strategy).__name__
    return "DefaultStrategy" if name == "_DefaultDistributionStrategy" else name


def split_host_devices(count):
    """Makes `count` CPU devices for replicas on a machine without accelerators.

    For JAX it adds `--xla_force_host_platform_device_count` to `XLA_FLAGS`
    (read when JAX first uses its CPU platform); for TensorFlow, when it
    sees no GPU, it splits the CPU into `count` logical devices (possible
    only before TensorFlow starts using its devices). A split already
    there is kept when it has enough devices.

    Args:
        count: Devices wanted.

    Returns:
        None.

    Example:

    ```python
    import keras_tpugan as ktg

    ktg.distribute.split_host_devices(4)  # first thing in the process
    strategy = ktg.distribute.get_strategy("cpu", num_replicas=4)
    ```
    """
    if count <= 1:
        return
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        flag = f"--xla_force_host_platform_device_count={count}"
        os.environ["XLA_FLAGS"] = f"{flags} {flag}".strip()
    if keras.backend.backend() == "jax":
        return
    if tf.config.list_physical_devices("GPU"):
        return
    cpu = tf.config.list_physical_devices("CPU")[0]
    configured = tf.config.get_logical_device_configuration(cpu) or []
    if len(configured) >= count:
        return
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * count
        )
    except RuntimeError as e:  # TensorFlow already started
        if len(tf.config.list_logical_devices("CPU")) < count:
            raise ValueError(
                f"Expected to split the CPU into {count} devices before "
                f"TensorFlow starts. Received: a TensorFlow already running "
                f"({e}). Call split_host_devices first in the process."
            ) from e


def _jax_distribution(
    kind, num_replicas, start_timeout_seconds, heartbeat_timeout_seconds
):
    import jax

    if kind == "multiworker":
        start_jax_processes(start_timeout_seconds, heartbeat_timeout_seconds)
        return keras.distribution.DataParallel(devices=jax.devices())
    platforms = {"auto": None, "tpu": "tpu", "gpu": "gpu", "cpu": "cpu"}
    try:
        devices = jax.devices(platforms[kind])
    except RuntimeError as e:
        raise ValueError(
            f"Expected a JAX {kind.upper()} device for kind={kind!r}, but JAX "
            f"found none ({e}). Install the matching jax build (`pip install "
            "'jax[tpu]'` on a TPU VM, `'jax[cuda12]'` for GPUs) or use "
            "kind='auto'."
        ) from e
    if kind == "auto" and devices[0].platform == "cpu":
        warn_unused_tpu("this JAX has no TPU support", stacklevel=4)
    names = _pick(devices, num_replicas, devices[0].platform.upper())
    return keras.distribution.DataParallel(devices=names)


def _framework():
    return "JAX" if keras.backend.backend() == "jax" else "TensorFlow"


def num_replicas(strategy=None):
    """The number of replicas a global batch is split over.

    Args:
        strategy: A `tf.distribute.Strategy`, a
            `keras.distribution.Distribution`, or None: the one in force.

    Returns:
        An int.

    Example:

    >>> import keras_tpugan as ktg
    >>> ktg.distribute.num_replicas(ktg.distribute.get_strategy("cpu"))
    1
    """
    if strategy is None:
        strategy = keras.distribution.distribution()
        if strategy is None and keras.backend.backend() == "tensorflow":
            strategy = tf.distribute.get_strategy()
    if strategy is None:
        return 1
    if hasattr(strategy, "device_mesh"):  # a keras.distribution
        mesh = strategy.device_mesh
        return mesh.shape[mesh.axis_names.index(strategy.batch_dim_name)]
    return strategy.num_replicas_in_sync


def scope(strategy):
    """`strategy.scope()`, or a scope that does nothing for None.

    Args:
        strategy: A `tf.distribute.Strategy`, a
            `keras.distribution.Distribution`, or None.

    Returns:
        A context manager.
    """
    return contextlib.nullcontext() if strategy is None else strategy.scope()


def _pick(devices, num_replicas, kind):
    names = [
        d if isinstance(d, str) or hasattr(d, "platform") else d.name for d in devices
    ]
    if num_replicas is None:
        return names
    if not 1 <= num_replicas <= len(names):
        raise ValueError(
            f"Expected `num_replicas` between 1 and the {len(names)} {kind} "
            f"device(s) {_framework()} sees. Received: "
            f"num_replicas={num_replicas}."
        )
    return names[:num_replicas]


def is_out_of_memory(error):
    """Whether `error` says the device ran out of memory, on either backend.

    Args:
        error: An exception.

    Returns:
        A bool.
    """
    tf_errors = getattr(sys.modules.get("tensorflow"), "errors", None)
    tf_error = tf_errors is not None and isinstance(
        error, tf_errors.ResourceExhaustedError
    )
    return tf_error or (
        "RESOURCE_EXHAUSTED" in str(error)  # XLA's status, as JAX raises it
    )
