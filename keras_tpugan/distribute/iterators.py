"""Multi-process iterators deleted aside, and the exit protocol they need.

How it works: with `MultiWorkerMirroredStrategy`, deleting a dataset's
iterator waits for the peer processes (1-2 s), and a deletion cut short
when Python finalizes aborts the process. So the datasets of a
multi-process run (`shard_over_processes`) keep their iterators in a list
here; when Keras drops one (`release_unused_iterators`, called when a new
iterator starts and when `fit` or `evaluate` ends) it is deleted on a
daemon thread beside the training loop. Making such a dataset also
installs the exit handler (`install_exit_handler`, once per process): at
exit the process deletes the iterators left, waits for the deletions and
for its peers (one all-reduce of the strategy's, with a time-out), at most
`EXIT_WAIT_SECONDS`, and, if a deletion is still running then (a peer is
gone), leaves at once with its exit status (`end_process`) instead of
finalizing into an abort. A process that never makes a multi-process
dataset registers nothing: importing the package has no side effect.
"""

import atexit
import logging
import os
import sys
import threading
import time

from keras_tpugan import internals
from keras_tpugan.distribute.lost import leave_at_exit_after_lost_process

logger = logging.getLogger("keras_tpugan")


# The iterators of multi-process datasets, until nothing else holds them.
_ITERATORS = []
_ITERATORS_LOCK = threading.Lock()


def deleting_iterators_aside(distributed, strategy):
    """The multi-process dataset, its iterators deleted on a thread of their own.

    Deleting an iterator of a `MultiWorkerMirroredStrategy` dataset waits
    for the peers (docs/design/notes.md), and Keras drops an epoch's
    iterator on the training loop's thread, where the other processes would
    wait for this one; no option of tf.data or of the strategy removes the
    wait. So the iterators are kept here until only this module holds them,
    then deleted on another thread (`release_unused_iterators`). `strategy`
    (the one that made `distributed`) is where the processes meet at exit.
    """
    internals.extend_iter_in_place(distributed, _kept_iterator)
    _EXIT_BARRIERS["strategy"] = strategy
    install_exit_handler()
    return distributed


def install_exit_handler():
    """Registers the exit protocol with `atexit` (once per process).

    The datasets of a multi-process run call it when they are made; from
    then on the process waits at exit for its iterators' deletions and for
    its peers, and leaves with its status when a deletion cannot end (see
    `end_process`).

    Returns:
        `True` when this call registered it, `False` when it already was.

    Example:

    ```python
    ktg.distribute.install_exit_handler()
    ```
    """
    if _EXIT_BARRIERS["needed"]:
        return False
    _EXIT_BARRIERS["needed"] = True
    atexit.register(_end_at_exit)
    return True


def _kept_iterator(iterator):
    """Keeps a new iterator of a multi-process dataset (and first deletes
    the unused ones aside)."""
    release_unused_iterators()
    with _ITERATORS_LOCK:
        _ITERATORS.append(iterator)
    return iterator


def release_unused_iterators():
    """Deletes, on a thread of its own, multi-process iterators nobody holds.

    `GAN.fit` and `GAN.evaluate` call it when they end, and each new
    iterator of a `shard_over_processes` dataset calls it when it starts:
    the iterators Keras has dropped since are deleted beside the training
    loop instead of inside it (see `deleting_iterators_aside`). At exit the
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
        unused = [it for it in _ITERATORS if internals.held_by_list_only(it)]
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
    before it ends: at exit (`install_exit_handler`) and, with its exit
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


# Whether this process has multi-process iterators, and the strategy whose
# processes meet at exit.
_EXIT_BARRIERS = {"needed": False, "strategy": None}


def _wait_for_peers(seconds):
    """Waits, at most `seconds`, until every process is here too.

    A process should not leave while a peer still deletes
    (docs/design/notes.md). (A deletion can outlast the wait even so;
    `end_process` then leaves without finalizing.) The processes meet in
    one all-reduce of their strategy's, bounded by the time-out of
    `tf.distribute.experimental.CommunicationOptions`: it ends when every
    process has reached it. A lost peer fails it, or it times out: either
    way the process goes on ending (a timed-out collective leaves the
    strategy unusable, which no longer matters here).
    """
    strategy = _EXIT_BARRIERS["strategy"]
    if strategy is None:  # no multi-process dataset made (TensorFlow's)
        return
    import tensorflow as tf

    # Zero would mean no time-out at all.
    options = tf.distribute.experimental.CommunicationOptions(
        timeout_seconds=max(seconds, 0.1)
    )
    try:
        here = strategy.experimental_distribute_values_from_function(
            lambda _: tf.constant(1.0)
        )
        strategy.extended.reduce_to(
            tf.distribute.ReduceOp.SUM, here, destinations="/cpu:0", options=options
        )
    except Exception as e:  # a lost peer, a time-out: the exit goes on
        logger.info("exit barrier not passed: %s", e)


def end_process(status):
    """Ends the process with `status` if finalizing it would abort it.

    When a multi-process iterator's deletion is still running after
    `finish_deletions`' wait, the process leaves at once with `status`
    (`os._exit`, after flushing its output) instead of finalizing into an
    abort. Otherwise it returns and the process ends as usual.

    Once the exit handler is installed (`install_exit_handler`) it runs by
    itself at exit, with status 1 after an uncaught exception and 0
    otherwise: a script of several processes that ends with `sys.exit(n)`
    calls `end_process(n)` first to keep its status. Without multi-process
    iterators it returns at once.

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


def _end_at_exit():
    # Python does not tell an exit handler its exit status. An uncaught
    # exception has been printed (and left in sys.last_value): status 1, as
    # Python's own. Otherwise the script ended (status 0), or called
    # sys.exit(n), which keras-tpugan's own commands pass on through
    # end_process themselves. A lost process ends it at once: the
    # deletions and the barrier would wait for it.
    leave_at_exit_after_lost_process()
    end_process(1 if getattr(sys, "last_value", None) is not None else 0)
