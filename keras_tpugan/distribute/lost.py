"""A process of the run lost: telling it from other errors, and leaving in
one line instead of a backend's abort.

When a process of a multi-process run dies, the others learn it from a
collective that fails (JAX's Gloo all-reduce on CPUs: "Connection reset by
peer"; TensorFlow's: "The following tasks are unhealthy (stopped sending
heartbeats)") or from the coordination service's heartbeat time-out. The
run cannot go on without the lost process. Ending the survivor as Python
does then costs time and words: JAX's own exit handler shuts its
distributed client down, which aborts the process (SIGABRT, about thirty
lines of C++ stack) when a peer is gone, and TensorFlow's exit waits for
iterator deletions that can no longer end. `lost_process` reads the
error; `leave_after_lost_process` prints one line naming the lost process
and leaves at once with status 1 (`os._exit`, after flushing the output).
"""

import json
import os
import re
import sys

import keras

# Words of a collective or of the coordination service when a peer is gone.
_LOST_WORDS = (
    "stopped sending heartbeats",
    "heartbeat timeout",
    "Collective ops is aborted",
    "Gloo",
    "Connection reset by peer",
)
_TF_TASK = re.compile(r"/job:(\w+)/replica:\d+/task:(\d+)")
_JAX_TASK = re.compile(r"Task (\d+) heartbeat timeout")


def lost_process(error):
    """The process a multi-process run lost, as words, or None.

    Args:
        error: An exception (its causes are read too).

    Returns:
        None unless `error` says that a peer process is gone. Otherwise a
        phrase such as `"process 1 of 2"`: the index the backend names in
        its error (TensorFlow's `task:N`, JAX's `Task N heartbeat
        timeout`); on JAX, when the error names none, the other process of
        a run of two, or `"another process"`. Only a run of several
        processes (JAX's process count; on TensorFlow, `TF_CONFIG` or
        Slurm's task count) can lose one.

    Example:

    >>> import keras_tpugan as ktg
    >>> ktg.distribute.lost_process(ValueError("Expected ...")) is None
    True
    """
    text = _error_text(error)
    if not any(words in text for words in _LOST_WORDS):
        return None
    if keras.backend.backend() == "jax":
        import jax

        count = jax.process_count()
        if count < 2:
            return None
        named = _JAX_TASK.search(text)
        if named:
            return f"process {named.group(1)} of {count}"
        if count == 2:
            return f"process {1 - jax.process_index()} of 2"
        return f"another process (of {count})"
    # TensorFlow: only a run the environment describes as several
    # processes (its TF_CONFIG, or a Slurm job) can lose one; "Connection
    # reset by peer" alone may be a download's.
    cluster = json.loads(os.environ.get("TF_CONFIG") or "{}").get("cluster", {})
    count = sum(len(cluster.get(kind, [])) for kind in ("chief", "worker"))
    if max(count, int(os.environ.get("SLURM_NTASKS", "1"))) < 2:
        return None
    named = _TF_TASK.search(text.split("unhealthy", 1)[-1])
    if not named:
        return "another process"
    job, task = named.group(1), int(named.group(2))
    if job == "chief":
        return "process 0 (the chief)"
    index = task + (1 if "chief" in cluster else 0)
    return f"process {index}" + (f" of {count}" if count else "")


def _error_text(error):
    parts = []
    while error is not None and len(parts) < 10:
        parts.append(str(error))
        error = error.__cause__ or error.__context__
    return "\n".join(parts)


def leave_after_lost_process(error, status=1, log=None):
    """Ends the process in one line when `error` says a peer is gone.

    Prints `keras-tpugan: error: lost process N ...` (what happened and how
    to go on) to stderr and leaves at once with `status`, skipping the
    exit handlers that would wait for the lost process or abort. Returns
    (doing nothing) when `error` is not a lost process.

    Args:
        error: An exception.
        status: The exit status to leave with.
        log: The file the traceback was written to, named in the line
            (None: not named).
    """
    lost = lost_process(error)
    if lost is None:
        return
    print(
        f"keras-tpugan: error: lost {lost}: it stopped answering, and the run "
        "cannot go on without it. Start every process again with --resume "
        "(train(resume=True)): the last backup is whole."
        + (f" The traceback is in {log}." if log else ""),
        file=sys.stderr,
    )
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def leave_at_exit_after_lost_process():
    """At exit, after an uncaught exception that says a peer is gone: one
    line and `os._exit(1)` (`leave_after_lost_process`), before the
    backend's exit handlers run. Registered with `atexit` by the code that
    starts the processes (after JAX's own handler, so it runs first)."""
    error = getattr(sys, "last_value", None)
    if error is not None:
        leave_after_lost_process(error)
