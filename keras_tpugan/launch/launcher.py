"""`keras-tpugan launch`: N processes of one command on this host.

For trying a multi-process run on one machine, and for the tests: each
process gets the environment the backends' own cluster discovery reads,
for a cluster of N processes on localhost with ports picked free:

- TensorFlow: `TF_CONFIG` (`{"cluster": {"worker": [...]}, "task": ...}`),
  which `tf.distribute.MultiWorkerMirroredStrategy` reads;
- JAX: `KERAS_DISTRIBUTION_JOB_ADDRESSES`, `KERAS_DISTRIBUTION_NUM_PROCESSES`
  and `KERAS_DISTRIBUTION_PROCESS_ID`, which `keras.distribution.initialize()`
  reads (it starts `jax.distributed`).

Both are set, so the command may run either backend; `get_strategy("auto")`
picks the multi-process strategy when it finds them. The output of every
process is streamed with its rank in front, and the launch fails when any
process does, naming the rank and how it ended. On real clusters the same
variables come from the cluster (see the recipes in
docs/guides/distributed.md); this launcher is not needed there.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

# keras-tpugan's commands: `launch -- train ...` runs `keras-tpugan train ...`.
COMMANDS = ("train", "sweep", "tune", "sample", "bench")


def free_ports(count):
    """`count` TCP ports on localhost that were free when asked.

    Args:
        count: How many.

    Returns:
        A list of ints, all different.
    """
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:  # held open together, so that they differ
            s.bind(("localhost", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def process_env(rank, processes, worker_ports, coordinator_port, base=None):
    """The environment of process `rank` of a localhost cluster.

    Args:
        rank: This process's index, from 0 (the chief).
        processes: The number of processes.
        worker_ports: One port per process, for TensorFlow's workers.
        coordinator_port: The port of JAX's coordinator (process 0).
        base: The environment to start from (default: `os.environ`).

    Returns:
        A dict: `base` with `TF_CONFIG`, the `KERAS_DISTRIBUTION_*`
        variables and `KERAS_TPUGAN_RANK` set.

    Example:

    >>> env = process_env(1, 2, [5000, 5001], 5002, base={})
    >>> json.loads(env["TF_CONFIG"])["task"]
    {'type': 'worker', 'index': 1}
    """
    env = dict(os.environ if base is None else base)
    workers = [f"localhost:{port}" for port in worker_ports]
    env["TF_CONFIG"] = json.dumps(
        {"cluster": {"worker": workers}, "task": {"type": "worker", "index": rank}}
    )
    env["KERAS_DISTRIBUTION_JOB_ADDRESSES"] = f"localhost:{coordinator_port}"
    env["KERAS_DISTRIBUTION_NUM_PROCESSES"] = str(processes)
    env["KERAS_DISTRIBUTION_PROCESS_ID"] = str(rank)
    env["KERAS_TPUGAN_RANK"] = str(rank)
    return env


def core_shares(processes, cores=None, per_process=None):
    """Splits the cores this process may use into equal shares, one per process.

    Args:
        processes: The number of processes.
        cores: The cores to split (default: this process's CPU affinity).
        per_process: Cores in each share (default: all the cores split
            evenly). A weak-scaling study holds it fixed over its process
            counts.

    Returns:
        A list of `processes` sets of core ids, or None when there are fewer
        cores than processes (then nothing is pinned).
    """
    cores = sorted(cores if cores is not None else os.sched_getaffinity(0))
    share = per_process or len(cores) // max(processes, 1)
    if share < 1 or len(cores) < processes * share:
        return None
    return [set(cores[i * share : (i + 1) * share]) for i in range(processes)]


def launch(
    command,
    processes,
    grace_seconds=60.0,
    pin_cores=True,
    printer=print,
    cores_per_process=None,
):
    """Runs `command` as `processes` processes of one cluster on this host.

    Args:
        command: The command: a keras-tpugan command and its arguments
            (`["train", "--preset", "smoke"]`), a Python script (`x.py ...`)
            or any program.
        processes: How many processes (at least 1).
        grace_seconds: After a process fails, how long the others may take
            to end by themselves (their collectives time out) before the
            launcher kills them.
        pin_cores: Give each process an equal share of the cores (the
            weak-scaling set-up), when there are enough.
        printer: Called with each line: the processes' output, each line
            prefixed with `[rank N]`, then the launcher's summary.
        cores_per_process: With `pin_cores`, the cores of each share
            (default: all the cores split evenly).

    Returns:
        The exit status: 0 when every process exited 0, else 1.

    Example:

    ```python
    from keras_tpugan.launch import launcher

    launcher.launch(["train", "--preset", "smoke", "--out", "runs/x"], 2)
    ```
    """
    if not isinstance(processes, int) or processes < 1:
        raise ValueError(
            f"Expected processes >= 1. Received: processes={processes!r}. Use "
            "--processes 2 or more for a multi-process run."
        )
    if not command:
        raise ValueError(
            "Expected a command after `--`. Received: none. For example: "
            "keras-tpugan launch --processes 2 -- train --preset smoke"
        )
    argv = _argv(command)
    *worker_ports, coordinator_port = free_ports(processes + 1)
    shares = None
    if pin_cores:
        shares = core_shares(processes, per_process=cores_per_process)
    lock = threading.Lock()
    children, readers = [], []
    try:
        for rank in range(processes):
            child = subprocess.Popen(
                argv,
                env=process_env(rank, processes, worker_ports, coordinator_port),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                preexec_fn=_pinner(shares[rank]) if shares else None,
            )
            children.append(child)
            reader = threading.Thread(
                target=_stream, args=(child, rank, printer, lock), daemon=True
            )
            reader.start()
            readers.append(reader)
        killed, first = _wait(children, grace_seconds)
    finally:
        for child in children:  # always reaped, whatever happened
            if child.poll() is None:
                child.kill()
            child.wait()
        for reader in readers:
            reader.join(timeout=5)
    endings = [_ending(c.returncode, r in killed) for r, c in enumerate(children)]
    with lock:
        printer(
            f"keras-tpugan launch: {processes} process(es): "
            + "; ".join(f"rank {r} {e}" for r, e in enumerate(endings))
        )
        if first is not None:
            printer(f"keras-tpugan launch: failed: rank {first} {endings[first]} first")
    return 0 if first is None else 1


def _argv(command):
    if command[0] in COMMANDS:
        return [sys.executable, "-m", "keras_tpugan.cli", *command]
    if command[0].endswith(".py"):
        return [sys.executable, *command]
    return list(command)


def _pinner(cores):
    def pin():
        os.sched_setaffinity(0, cores)

    return pin


def _stream(child, rank, printer, lock):
    for line in child.stdout:
        with lock:
            printer(f"[rank {rank}] {line.rstrip()}")


def _wait(children, grace_seconds):
    """Waits for every child; after a failure, kills what outlives the grace.

    Returns `(killed, first)`: the ranks the launcher killed, and the rank
    that failed first (None when none failed).
    """
    first, failed_at = None, None
    while any(c.poll() is None for c in children):
        if first is None:
            first = _first_failed(children)
            failed_at = None if first is None else time.monotonic()
        if first is not None and time.monotonic() - failed_at > grace_seconds:
            killed = {r for r, c in enumerate(children) if c.poll() is None}
            for rank in killed:
                children[rank].kill()
            for child in children:
                child.wait()
            return killed, first
        time.sleep(0.1)
    if first is None:  # every child ended between two polls
        first = _first_failed(children)
    return set(), first


def _first_failed(children):
    """The rank that failed first among those ended since the last poll:
    one killed by a signal before one that exited with a status (a process
    that loses a peer exits within a fraction of a second, often before
    the next poll), else the lowest; None when none failed."""
    failed = [r for r, c in enumerate(children) if c.poll()]
    signalled = [r for r in failed if children[r].returncode < 0]
    return (signalled or failed or [None])[0]


def _ending(returncode, killed_by_launcher):
    if killed_by_launcher:
        return "was killed by the launcher (still running after another rank failed)"
    if returncode == 0:
        return "exited 0"
    if returncode < 0:
        return f"was killed by {signal.Signals(-returncode).name}"
    return f"exited with status {returncode}"
