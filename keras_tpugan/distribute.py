"""Choosing a strategy (TensorFlow) or distribution (JAX); batch checks.

On the TensorFlow backend the GAN is built and compiled under a
`tf.distribute.Strategy`; on the JAX backend under a
`keras.distribution.DataParallel`. `get_strategy` returns the right one for
the backend Keras runs on, and both are used the same way:
`with strategy.scope(): ...` around building and compiling the GAN.
"""

import atexit
import contextlib
import functools
import glob
import hashlib
import json
import logging
import os
import sys
import threading
import time
import warnings

import keras
import numpy as np

from keras_tpugan.tf_import import tf

logger = logging.getLogger("keras_tpugan")

KINDS = ("auto", "tpu", "gpu", "cpu", "multiworker")
# All-reduce implementations across processes (TensorFlow's
# `tf.distribute.experimental.CommunicationImplementation`).
COLLECTIVES = ("auto", "ring", "nccl")


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
        start_timeout_seconds=_positive_seconds(
            "start_timeout_seconds", start_timeout_seconds
        ),
        heartbeat_timeout_seconds=_positive_seconds(
            "heartbeat_timeout_seconds", heartbeat_timeout_seconds
        ),
    )
    communication = _communication_options(
        collective, bytes_per_pack, collective_timeout_seconds
    )
    if keras.backend.backend() == "jax":
        return _jax_distribution(kind, num_replicas, **cluster)
    if kind in ("auto", "tpu"):
        strategy, error = _tpu_strategy(tpu, required=kind == "tpu")
        if strategy is not None:
            _check_all_devices(num_replicas, "a TPU on TensorFlow")
            return strategy
        if kind == "auto":
            _warn_unused_tpu(f"TensorFlow cannot reach it ({error})", stacklevel=3)
    if kind == "multiworker":
        if "TF_CONFIG" not in os.environ and _slurm_tasks() > 1:
            resolver = tf.distribute.cluster_resolver.SlurmClusterResolver()
        else:
            if "TF_CONFIG" not in os.environ:
                logger.warning(
                    "kind='multiworker' without TF_CONFIG or a Slurm job of "
                    "several tasks runs as a single worker."
                )
            resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        return _multi_worker_strategy(resolver, communication, **cluster)
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


def _positive_seconds(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"Expected {name} > 0 (seconds). Received: {name}={value!r}.")
    return value


def _communication_options(collective, bytes_per_pack, timeout_seconds):
    """TensorFlow's `CommunicationOptions`; refuses what JAX cannot honour."""
    if collective not in COLLECTIVES:
        raise ValueError(
            f"Expected `collective` in {COLLECTIVES}. Received: "
            f"collective={collective!r}."
        )
    if (
        isinstance(bytes_per_pack, bool)
        or not isinstance(bytes_per_pack, int)
        or bytes_per_pack < 0
    ):
        raise ValueError(
            "Expected an integer `bytes_per_pack` >= 0 (0: TensorFlow decides). "
            f"Received: bytes_per_pack={bytes_per_pack!r}."
        )
    if timeout_seconds is not None:
        _positive_seconds("collective_timeout_seconds", timeout_seconds)
    if keras.backend.backend() == "jax":
        if (collective, bytes_per_pack, timeout_seconds) != ("auto", 0, None):
            raise ValueError(
                "Expected collective='auto', bytes_per_pack=0 and "
                "collective_timeout_seconds=None on JAX, where XLA places and "
                "packs the all-reduce itself. Received: "
                f"collective={collective!r}, bytes_per_pack={bytes_per_pack}, "
                f"collective_timeout_seconds={timeout_seconds}. Use the "
                "TensorFlow backend to choose them."
            )
        return None
    implementation = tf.distribute.experimental.CommunicationImplementation
    return tf.distribute.experimental.CommunicationOptions(
        bytes_per_pack=bytes_per_pack,
        timeout_seconds=timeout_seconds,
        implementation={
            "auto": implementation.AUTO,
            "ring": implementation.RING,
            "nccl": implementation.NCCL,
        }[collective],
    )


def _multi_worker_strategy(
    resolver, communication, start_timeout_seconds, heartbeat_timeout_seconds
):
    """A MultiWorkerMirroredStrategy that waits a bounded time for its peers.

    The strategy's first all-reduce waits for every worker with no limit
    by default (a wrong address hangs for ever). The limit is the class
    attribute `_check_health_initial_timeout` (TensorFlow 2.21, no public
    API), set for the construction only.
    """
    from tensorflow.python.distribute import collective_all_reduce_strategy

    _configure_tf_coordination(
        resolver, start_timeout_seconds, heartbeat_timeout_seconds
    )
    extended = collective_all_reduce_strategy.CollectiveAllReduceExtended
    default = extended._check_health_initial_timeout
    extended._check_health_initial_timeout = start_timeout_seconds
    try:
        return tf.distribute.MultiWorkerMirroredStrategy(
            cluster_resolver=resolver, communication_options=communication
        )
    except (RuntimeError, tf.errors.DeadlineExceededError) as e:
        # The registration barrier times out first; the first all-reduce's
        # wait after it.
        if isinstance(e, RuntimeError) and "Timeout waiting" not in str(e):
            raise
        workers = resolver.cluster_spec().as_dict()
        raise ValueError(
            f"Expected every process of the cluster {workers} to start within "
            f"start_timeout_seconds={start_timeout_seconds}. Received: no answer "
            "from at least one of them. Check that every process was started "
            "with the same cluster and that the addresses are reachable."
        ) from e
    finally:
        extended._check_health_initial_timeout = default


def _configure_tf_coordination(
    resolver, start_timeout_seconds, heartbeat_timeout_seconds
):
    """Bounds how long TensorFlow's processes wait for each other.

    MultiWorkerMirroredStrategy starts TensorFlow's coordination service
    with no limit on the wait for the other tasks (a wrong address hangs
    for ever), and no public API sets one. The strategy keeps a service
    configured before it is made, so this configures it as the strategy
    would (TensorFlow 2.21's `CollectiveAllReduceExtended`), with the two
    time-outs.
    """
    from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
    from tensorflow.python.distribute import multi_worker_util
    from tensorflow.python.eager import context

    spec = resolver.cluster_spec()
    if (
        not spec.jobs
        or resolver.task_type not in ("chief", "worker")
        or context.context().coordination_service is not None
    ):
        return
    spec = multi_worker_util.normalize_cluster_spec(spec)
    context.context().configure_coordination_service(
        service_type="standalone",
        service_leader=multi_worker_util.coordination_leader(spec),
        coordinated_jobs=[
            coordination_config_pb2.CoordinatedJob(
                name=job, num_tasks=spec.num_tasks(job)
            )
            for job in ("chief", "worker")
            if job in spec.jobs
        ],
        cluster_register_timeout_in_ms=int(start_timeout_seconds * 1000),
        heartbeat_timeout_in_ms=int(heartbeat_timeout_seconds * 1000),
    )
    # Registration waits for every task, so the time-out bounds the start.
    context.context().coordination_service.cluster_register_with_barrier = True


def cluster_processes():
    """How many processes the environment says the run has (1 if it says none).

    TensorFlow reads `TF_CONFIG` (its cluster's tasks, evaluators left out);
    JAX, through `keras.distribution.initialize()`,
    `KERAS_DISTRIBUTION_NUM_PROCESSES` or the addresses in
    `KERAS_DISTRIBUTION_JOB_ADDRESSES`. Without those, a Slurm job's
    `SLURM_NTASKS` (TensorFlow's `SlurmClusterResolver` and
    `jax.distributed.initialize()` read the rest of the job themselves).

    Returns:
        An int.

    Example:

    >>> import keras_tpugan as ktg
    >>> ktg.distribute.cluster_processes()  # no cluster variables set
    1
    """
    if keras.backend.backend() == "jax":
        count = os.environ.get("KERAS_DISTRIBUTION_NUM_PROCESSES")
        if count:
            return int(count)
        addresses = os.environ.get("KERAS_DISTRIBUTION_JOB_ADDRESSES", "")
        if addresses:
            return len([a for a in addresses.split(",") if a])
        return _slurm_tasks()
    if "TF_CONFIG" not in os.environ:
        return _slurm_tasks()
    try:
        cluster = json.loads(os.environ["TF_CONFIG"]).get("cluster", {})
    except json.JSONDecodeError as e:
        raise ValueError(
            'Expected TF_CONFIG to be JSON such as {"cluster": {"worker": '
            '["host1:port", "host2:port"]}, "task": {"type": "worker", '
            f'"index": 0}}}}. Received: TF_CONFIG={os.environ["TF_CONFIG"]!r} '
            f"({e})."
        ) from e
    return _training_tasks(cluster)


def _training_tasks(cluster):
    """Tasks of a cluster dict that train (evaluators do not), at least 1."""
    return max(1, sum(len(v) for k, v in cluster.items() if k != "evaluator"))


def _slurm_tasks():
    if "SLURM_JOB_ID" not in os.environ:
        return 1
    return int(os.environ.get("SLURM_NTASKS", "1"))


def process_count(strategy=None):
    """How many processes train together under `strategy`.

    Args:
        strategy: The strategy (default: the current one). On JAX, the
            processes of `jax.distributed` (1 when it was not started).

    Returns:
        An int: 1 unless several processes share the run.
    """
    if keras.backend.backend() == "jax":
        import jax

        return jax.process_count()
    strategy = strategy or tf.distribute.get_strategy()
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return 1
    return _training_tasks(strategy.cluster_resolver.cluster_spec().as_dict())


def check_same_settings(settings, strategy=None):
    """Refuses a multi-process run whose processes were given different settings.

    Each process hashes its settings and the hashes are gathered from every
    process on the backend's own collectives (`strategy.gather`;
    `multihost_utils.process_allgather` on JAX); they must all agree. A run
    of one process returns at once.

    Args:
        settings: A JSON-serializable dict (a `TrainConfig.to_dict()`).
        strategy: The strategy (default: the current one).

    Returns:
        None.

    Raises:
        ValueError: When the processes' settings differ.

    Example:

    >>> import keras_tpugan as ktg
    >>> ktg.distribute.check_same_settings({"batch_size": 64})  # one process
    """
    if process_count(strategy) == 1:
        return
    text = json.dumps(settings, sort_keys=True, default=str)
    digest = int(hashlib.sha256(text.encode()).hexdigest()[:7], 16)  # < 2**31
    low, high = _min_max_over_processes(digest, strategy)
    if low != high:
        raise ValueError(
            "Expected every process of the run to have the same settings. "
            f"Received: different settings on different processes (this "
            f"process's settings hash to {digest:07x}; others differ). Start "
            "every process with the same command and preset (batch size, seed, "
            "...); only the cluster variables may differ."
        )


def chief_values(values, strategy=None):
    """The chief's (process 0's) values of a dict of floats, in every process.

    A figure each process computes for itself (a quality score, from its
    own copy of the generator and of the metric classifier) can differ in
    its last bits between processes, and a decision taken on it (stop at a
    target, keep the best epoch) must be the same in all of them, or the
    processes part ways and wait on each other for ever. Every process
    takes the chief's numbers, bit for bit (gathered on the backend's own
    collectives, as `check_same_settings`). A run of one process returns
    its own values at once.

    Args:
        values: A dict of names to floats; every process passes the same
            names.
        strategy: The strategy (default: the current one).

    Returns:
        A dict with the same names and the chief's values, as floats.

    Example:

    >>> import keras_tpugan as ktg
    >>> ktg.distribute.chief_values({"fcd": 12.5})  # one process
    {'fcd': 12.5}
    """
    values = {name: float(value) for name, value in values.items()}
    if process_count(strategy) == 1:
        return values
    names = sorted(values)
    # Each float64 as two int32s: the collectives carry them exactly (JAX
    # without x64 would round float64 to float32).
    bits = np.array([values[name] for name in names], "float64").view("int32")
    chief = np.ascontiguousarray(_gathered(bits, strategy)[0]).view("float64")
    return dict(zip(names, map(float, chief), strict=True))


def _min_max_over_processes(value, strategy):
    values = _gathered(np.array([value], "int32"), strategy)
    return int(values.min()), int(values.max())


def _gathered(row, strategy):
    """Every process's int32 `row`, stacked in process order (the chief's
    first; on TensorFlow one row per replica), on the backend's collectives."""
    if keras.backend.backend() == "jax":
        from jax.experimental import multihost_utils

        rows = multihost_utils.process_allgather(row[None])
    else:
        strategy = strategy or tf.distribute.get_strategy()
        local = strategy.run(lambda: tf.constant(row[None], tf.int32))
        rows = strategy.gather(local, axis=0).numpy()
    return np.asarray(rows).reshape(-1, row.size)


def shard_over_processes(dataset, strategy=None):
    """Gives each process of a run its own part of every global batch.

    The dataset yields GLOBAL batches, the same in every process (a
    `load_images` dataset shuffles by seed and epoch alone). Process `p` of
    `n` keeps rows `p * b / n` to `(p + 1) * b / n` of each batch of `b`, so
    every example is read by exactly one process per epoch and global step
    `k` trains on the same examples, in the same order over the replicas,
    as on one process.

    On TensorFlow, with several processes (MultiWorkerMirroredStrategy),
    it returns `strategy.distribute_datasets_from_function`, which `fit`
    takes as it is: the split is stated here, not left to tf.data's
    auto-sharding (which finds no files to shard in an in-memory dataset
    and falls back to rewriting the pipeline). On JAX, Keras's
    `DataParallel.distribute_dataset` makes the same split (`rebatch` to
    the process's batch, then `shard` by process), and `fit` calls it
    itself: the JAX dataset is returned as it is. With one process, the
    dataset is returned as it is.

    Args:
        dataset: A `tf.data.Dataset` of global batches of a fixed size
            (`drop_remainder=True`), of images or `(images, labels)`.
        strategy: The strategy (default: the current one).

    Returns:
        A `tf.distribute.DistributedDataset` for several TensorFlow
        processes, else `dataset`.

    Raises:
        ValueError: When the batch size is not fixed, or does not split
            over the processes and their replicas.

    Example:

    ```python
    ds = ktg.data.load_images("mnist", source="offline", batch_size=64)
    ds = ktg.distribute.shard_over_processes(ds, strategy)
    ```
    """
    if keras.backend.backend() == "jax":
        return dataset
    processes = process_count(strategy)
    if processes == 1:
        return dataset
    strategy = strategy or tf.distribute.get_strategy()
    batch = tf.nest.flatten(dataset.element_spec)[0].shape[0]
    if batch is None:
        raise ValueError(
            "Expected a dataset of fixed-size global batches to split over "
            f"{processes} processes. Received: batches of unknown size. Batch "
            "it with `drop_remainder=True`."
        )
    # The replicas are the processes times their (equal) local replicas, so a
    # batch that splits over the replicas splits over the processes.
    check_global_batch(batch, strategy)

    def process_part(context):
        size = batch // context.num_input_pipelines
        start = context.input_pipeline_id * size

        def rows(*element):
            part = tf.nest.map_structure(lambda t: t[start : start + size], element)
            return part if len(part) > 1 else part[0]

        # The process's rows, in per-replica batches for its local replicas.
        part = dataset.map(rows)
        per_replica = context.get_per_replica_batch_size(batch)
        return part.rebatch(per_replica) if per_replica != size else part

    return _deleting_iterators_aside(
        strategy.distribute_datasets_from_function(process_part)
    )


@contextlib.contextmanager
def sharded_by_the_data(*datasets):
    """Lets `EpochBatches` through Keras's multi-process JAX distribution.

    With several JAX processes, Keras shards a `tf.data.Dataset` over them
    itself and refuses other data unless `auto_shard_dataset` is off. An
    `EpochBatches` (what `load_images` returns on JAX) already yields each
    process's own rows of every global batch (as does any data whose
    `process_rows` attribute is True), so inside this context the
    distribution in force does not shard; it is restored after. Elsewhere
    (TensorFlow, one process, other data) it does nothing.

    Args:
        *datasets: The data of a `fit` or `evaluate` (None entries ignored).

    Yields:
        None.
    """
    datasets = [d[0] if isinstance(d, tuple) else d for d in datasets if d is not None]
    distribution = keras.distribution.distribution()
    if (
        keras.backend.backend() != "jax"
        or distribution is None
        or process_count() == 1
        or not any(_process_rows(d) for d in datasets)
    ):
        yield
        return
    if not all(_process_rows(d) for d in datasets):
        raise ValueError(
            "Expected the training and validation data of a run of several JAX "
            "processes both from `keras_tpugan.data.load_images` (each process "
            "reads its own rows). Received: "
            f"{[type(d).__name__ for d in datasets]}. Load both with load_images."
        )
    before = distribution.auto_shard_dataset
    distribution.auto_shard_dataset = False
    try:
        yield
    finally:
        distribution.auto_shard_dataset = before


def _process_rows(data):
    # `EpochBatches` (and its `repeated()`) and bench's batches say so.
    return getattr(data, "process_rows", False)


# The iterators of multi-process datasets, until nothing else holds them.
_ITERATORS = []
_ITERATORS_LOCK = threading.Lock()


def _deleting_iterators_aside(distributed):
    """The multi-process dataset, its iterators deleted on a thread of their own.

    Deleting an iterator of a `MultiWorkerMirroredStrategy` dataset waits
    about 1 to 2 s (CPU processes, TensorFlow 2.21), idle: 0.01 s of CPU in
    1.7 s of wall time, and mostly 0.01 s in all when the next fit's steps
    run beside it. Keras drops an epoch's iterator at the end of each epoch and
    of each `fit`, on the training loop's thread, and the other processes
    wait for this one at their next step. No option of tf.data or of the
    strategy removes the wait (`experimental_fetch_to_device=False`,
    `experimental_per_replica_buffer_size=0`, autotuning off were tried), so
    the iterators are kept here until only this module holds them, then
    deleted on another thread (`release_unused_iterators`).
    """
    # The strategy builds the dataset's object, so its class is extended in
    # place (Keras recognizes a distributed dataset by its TensorFlow class).
    distributed.__class__ = _class_deleting_iterators_aside(type(distributed))
    _EXIT_BARRIERS["needed"] = True
    return distributed


@functools.cache
def _class_deleting_iterators_aside(base):
    def __iter__(self):
        release_unused_iterators()
        iterator = base.__iter__(self)
        with _ITERATORS_LOCK:
            _ITERATORS.append(iterator)
        return iterator

    # One base only: a mixin makes the object's layout differ from base's.
    return type(base.__name__, (base,), {"__iter__": __iter__})


def release_unused_iterators():
    """Deletes, on a thread of its own, multi-process iterators nobody holds.

    `GAN.fit` and `GAN.evaluate` call it when they end, and each new
    iterator of a `shard_over_processes` dataset calls it when it starts:
    the iterators Keras has dropped since are deleted beside the training
    loop instead of inside it (see `_deleting_iterators_aside`). At exit the
    process deletes the iterators left and waits for the deletions, at most
    `EXIT_WAIT_SECONDS`: after a lost peer a deletion may never return, and
    the process must still end (the threads are daemons for that).

    Returns:
        The `threading.Thread` deleting them, started, or `None` when no
        iterator was unused.

    Example:

    ```python
    ktg.distribute.release_unused_iterators()
    ```
    """
    with _ITERATORS_LOCK:
        # Held only by the list and by getrefcount's own argument.
        unused = [it for it in _ITERATORS if sys.getrefcount(it) <= 3]
        _ITERATORS[:] = [it for it in _ITERATORS if all(it is not u for u in unused)]
    if not unused:
        return None
    return _delete_aside(unused)


def _delete_aside(iterators):
    """Clears the list on a daemon thread, kept for the exit wait.

    The list must hold the iterators' last references, so that they are
    deleted there.
    """
    thread = threading.Thread(
        target=iterators.clear, name="keras_tpugan-iterator-deletion", daemon=True
    )
    thread.start()
    _DELETIONS[:] = [t for t in _DELETIONS if t.is_alive()] + [thread]
    return thread


# How long a process waits at exit for its iterators' deletions (each takes
# 1-2 s with live peers; with a lost peer one may wait for ever).
EXIT_WAIT_SECONDS = 10.0
_DELETIONS = []


def finish_deletions(seconds=None):
    """Deletes the multi-process iterators left and waits for the deletions.

    A deletion still running when Python finalizes would abort the process
    (its thread, inside TensorFlow with the GIL released, is ended by the
    interpreter where it cannot unwind: "terminate called after throwing an
    instance of ..."). The process therefore waits here for the deletions
    before it ends: at exit (registered with `atexit`) and, with its exit
    status, when `keras-tpugan` ends (`end_process`).

    Args:
        seconds: How long to wait, at most (default: `EXIT_WAIT_SECONDS`).
            After a lost peer a deletion may never return.

    Returns:
        `True` when no deletion is still running.

    Example:

    ```python
    ktg.distribute.finish_deletions(seconds=10.0)
    ```
    """
    with _ITERATORS_LOCK:
        left = list(_ITERATORS)
        _ITERATORS.clear()
    if left:
        _delete_aside(left)
    seconds = EXIT_WAIT_SECONDS if seconds is None else seconds
    deadline = time.monotonic() + seconds
    for thread in _DELETIONS:
        thread.join(max(0.0, deadline - time.monotonic()))
    if _EXIT_BARRIERS["needed"]:
        _wait_for_peers(seconds)
    return not any(thread.is_alive() for thread in _DELETIONS)


# Whether this process has multi-process iterators, and the exit barriers
# it has passed (every process passes the same ones, in the same order).
_EXIT_BARRIERS = {"needed": False, "count": 0}


def _wait_for_peers(seconds):
    """Waits, at most `seconds`, until every process is here too.

    A process should not leave while a peer still deletes: seen with two
    CPU processes, one deleted its last four iterators in 3 s and exited
    while the other's deletion was still running 10 s later. (A deletion
    can outlast the wait even so; `end_process` then leaves without
    finalizing.)
    TensorFlow's coordination service, which `MultiWorkerMirroredStrategy`
    starts, has the barrier; its only Python entry is the eager context's
    (`tf.distribute` exposes none). A lost peer fails the barrier, or it
    times out: either way the process goes on ending.
    """
    from tensorflow.python.eager import context

    _EXIT_BARRIERS["count"] += 1
    try:
        context.context().wait_at_barrier(
            f"keras_tpugan_exit_{_EXIT_BARRIERS['count']}", int(seconds * 1000)
        )
    except Exception as e:  # a lost peer, a time-out: the exit goes on
        logger.info("exit barrier not passed: %s", e)


def end_process(status):
    """Ends the process with `status` if finalizing it would abort it.

    When a multi-process iterator's deletion is still running after
    `finish_deletions`' wait, the process leaves at once with `status`
    (`os._exit`, after flushing its output) instead of finalizing into an
    abort. Otherwise it returns and the process ends as usual.

    At exit it runs by itself (`atexit`), with status 1 after an uncaught
    exception and 0 otherwise: a script of several processes that ends
    with `sys.exit(n)` calls `end_process(n)` first to keep its status.

    Args:
        status: The exit status to end with (an int).
    """
    if finish_deletions():
        return
    print(
        f"keras-tpugan: an iterator's deletion did not end within "
        f"{EXIT_WAIT_SECONDS:g} s (a peer gone?); exiting with status {status} "
        "without finalizing",
        file=sys.stderr,
    )
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


@atexit.register
def _end_at_exit():
    # Python does not tell an exit handler its exit status. An uncaught
    # exception has been printed (and left in sys.last_value): status 1, as
    # Python's own. Otherwise the script ended (status 0), or called
    # sys.exit(n), which keras-tpugan's own commands pass on through
    # end_process themselves.
    end_process(1 if getattr(sys, "last_value", None) is not None else 0)


def _one_device(device, default):
    """The default strategy when `device` is where TensorFlow puts ops anyway.

    One device needs no distribution: under the default strategy `fit` feeds
    the batches straight from the `tf.data` iterator and calls `train_step`
    directly, while a OneDeviceStrategy adds a distributed iterator and a
    `strategy.run` to every step (measured on a 2-core CPU: 5 to 11% of the
    images/s at batch 16 to 128, `keras-tpugan bench --peers`). Inside
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
        _start_jax_processes(start_timeout_seconds, heartbeat_timeout_seconds)
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
        _warn_unused_tpu("this JAX has no TPU support", stacklevel=4)
    names = _pick(devices, num_replicas, devices[0].platform.upper())
    return keras.distribution.DataParallel(devices=names)


def _start_jax_processes(start_timeout_seconds, heartbeat_timeout_seconds):
    """`jax.distributed.initialize` from Keras's variables, with time-outs.

    `keras.distribution.initialize()` reads the same variables but passes
    no time-outs: JAX's defaults wait 300 s for the other processes and
    declare a lost one after 100 s of silence, which a process blocked in
    JAX's shutdown barrier waits out. Without the variables, JAX detects
    the cluster itself (Cloud TPU pods, Slurm).
    """
    import jax

    if jax.distributed.is_initialized():
        return
    addresses = os.environ.get("KERAS_DISTRIBUTION_JOB_ADDRESSES") or None
    count = os.environ.get("KERAS_DISTRIBUTION_NUM_PROCESSES")
    index = os.environ.get("KERAS_DISTRIBUTION_PROCESS_ID")
    coordinator = addresses.split(",")[0] if addresses else None
    if coordinator and index and int(index) > 0:
        # JAX's client aborts the process (SIGABRT, no Python error) when the
        # coordinator never answers: wait for its port here instead.
        _wait_for_address(coordinator, start_timeout_seconds)
    jax.distributed.initialize(
        coordinator_address=coordinator,
        num_processes=int(count) if count else None,
        process_id=int(index) if index else None,
        initialization_timeout=int(start_timeout_seconds),
        heartbeat_timeout_seconds=int(heartbeat_timeout_seconds),
        shutdown_timeout_seconds=int(heartbeat_timeout_seconds),
    )


def _wait_for_address(address, timeout_seconds):
    """Waits until something listens at `host:port`; a ValueError after the time-out."""
    import socket
    import time

    host, _, port = address.rpartition(":")
    deadline = time.monotonic() + timeout_seconds
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=2).close()
            return
        except OSError as e:
            if time.monotonic() > deadline:
                raise ValueError(
                    f"Expected the coordinator (process 0) at {address} to "
                    f"answer within start_timeout_seconds={timeout_seconds}. "
                    f"Received: {e}. Check KERAS_DISTRIBUTION_JOB_ADDRESSES "
                    "(its first address is the coordinator's) and that process "
                    "0 was started."
                ) from e
            time.sleep(0.5)


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


def _tpu_strategy(tpu, required):
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


def _warn_unused_tpu(reason, stacklevel):
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
    replicas = num_replicas(strategy)
    if global_batch_size < 1 or global_batch_size % replicas:
        kind = "the current strategy" if strategy is None else strategy_name(strategy)
        raise ValueError(
            f"Expected a global batch size divisible by the {replicas} "
            f"replica(s) of {kind}. Received: global batch "
            f"size {global_batch_size}. Use a multiple of {replicas}, for "
            f"example {max(replicas, global_batch_size // replicas * replicas)}."
        )
    return global_batch_size // replicas


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


def is_chief(strategy=None):
    """Returns True on the worker that should write files (logs, images).

    Args:
        strategy: The strategy (default: the current one).

    Returns:
        A bool: False only on the non-chief workers of a multi-worker run.
    """
    if keras.backend.backend() == "tensorflow":
        strategy = strategy or tf.distribute.get_strategy()
        if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
            task_type = strategy.cluster_resolver.task_type
            if task_type not in (None, "chief", "worker"):
                return False
    return process_index(strategy) == 0


def process_index(strategy=None):
    """This process's index among the processes of a run (the chief's is 0).

    Args:
        strategy: The strategy (default: the current one). On JAX, the
            index of `jax.distributed`.

    Returns:
        An int: 0 for the chief and for a run of one process; the workers
        after it (a TensorFlow cluster with a "chief" task numbers its
        workers from 1).
    """
    if keras.backend.backend() == "jax":
        import jax

        return jax.process_index()
    strategy = strategy or tf.distribute.get_strategy()
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return 0
    resolver = strategy.cluster_resolver
    if resolver.task_type in (None, "chief"):
        return 0
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_id + int(has_chief)
