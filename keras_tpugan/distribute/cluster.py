"""Several processes: the cluster, the process count and the process index.

Reads the cluster a run is part of (`TF_CONFIG`, SLURM, JAX's coordinator
variables), builds TensorFlow's multi-worker strategy and starts JAX's
processes, and answers what every process asks: how many processes, which
one this is, and whether it is the chief (`agreement` checks that all were
given the same settings).
"""

import atexit
import json
import os
import time

import keras

from keras_tpugan import internals
from keras_tpugan.distribute.lost import leave_at_exit_after_lost_process
from keras_tpugan.tf_import import tf

# All-reduce implementations across processes (TensorFlow's
# `tf.distribute.experimental.CommunicationImplementation`).
COLLECTIVES = ("auto", "ring", "nccl")


def positive_seconds(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"Expected {name} > 0 (seconds). Received: {name}={value!r}.")
    return value


def communication_options(collective, bytes_per_pack, timeout_seconds):
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
        positive_seconds("collective_timeout_seconds", timeout_seconds)
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


def multi_worker_strategy(
    resolver, communication, start_timeout_seconds, heartbeat_timeout_seconds
):
    """A MultiWorkerMirroredStrategy that waits a bounded time for its peers.

    TensorFlow's processes wait for each other with no limit by default (a
    wrong address hangs for ever); the limits are set through its
    coordination service (`internals.configure_multi_worker_start`).

    A process makes one: asked again with the same cluster and settings, it
    returns the strategy it made. TensorFlow starts a process's collective
    runtime once, and a second strategy numbers its collective groups from
    the start again while its peers may still be using the first one's (a
    peer then fails with "group ... not found").

    Raises:
        ValueError: if this process already made one with another cluster,
            collective or heartbeat time-out.
    """
    settings = _strategy_settings(resolver, communication, heartbeat_timeout_seconds)
    if _MADE:
        if _MADE["settings"] != settings:
            raise ValueError(
                "Expected the settings of the multi-worker strategy this "
                f"process already made: {_MADE['settings']}. Received: "
                f"{settings}. TensorFlow starts a process's collectives once: "
                "pass the same cluster and collective settings, or start a new "
                "process."
            )
        return _MADE["strategy"]
    start = internals.configure_multi_worker_start(
        resolver, start_timeout_seconds, heartbeat_timeout_seconds
    )
    try:
        with start:
            strategy = tf.distribute.MultiWorkerMirroredStrategy(
                cluster_resolver=resolver, communication_options=communication
            )
        _leave_in_one_line_if_a_process_is_lost()
        _MADE.update(settings=settings, strategy=strategy)
        return strategy
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


# The multi-worker strategy this process made, and the settings it was made
# with (`multi_worker_strategy`).
_MADE = {}


def _strategy_settings(resolver, communication, heartbeat_timeout_seconds):
    """What a multi-worker strategy is made with, as a readable dict."""
    if communication is None:
        collective = ("AUTO", 0, None)
    else:
        collective = (
            communication.implementation.name,
            communication.bytes_per_pack,
            communication.timeout_seconds,
        )
    return dict(
        cluster=resolver.cluster_spec().as_dict(),
        task=(resolver.task_type, resolver.task_id),
        collective=collective,
        heartbeat_timeout_seconds=heartbeat_timeout_seconds,
    )


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
        return slurm_tasks()
    if "TF_CONFIG" not in os.environ:
        return slurm_tasks()
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


def slurm_tasks():
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


def start_jax_processes(start_timeout_seconds, heartbeat_timeout_seconds):
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
    _leave_in_one_line_if_a_process_is_lost()


_EXIT = {"registered": False}


def _leave_in_one_line_if_a_process_is_lost():
    """Registers `leave_at_exit_after_lost_process` with `atexit` (once):
    registered after the backend's own exit handlers, it runs before them."""
    if not _EXIT["registered"]:
        _EXIT["registered"] = True
        atexit.register(leave_at_exit_after_lost_process)


def _wait_for_address(address, timeout_seconds):
    """Waits until something listens at `host:port`; a ValueError after the time-out."""
    import socket

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
