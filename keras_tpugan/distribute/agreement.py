"""Agreement between the processes of a run: the same settings everywhere
(`check_same_settings`), the chief's values everywhere (`chief_values`),
every process's small lists of ints everywhere (`every_process_ints`)."""

import hashlib
import json

import keras
import numpy as np

from keras_tpugan.distribute.cluster import process_count
from keras_tpugan.tf_import import tf


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


def every_process_ints(values, width, strategy=None):
    """Every process's list of non-negative ints, in every process.

    For a decision each process must take alike from what each one holds
    (the newest backup that every process has whole): every process passes
    its own list and receives all of them, in process order (the chief's
    first), gathered on the backend's own collectives. A run of one process
    returns `[values]` at once.

    Args:
        values: Non-negative ints that fit in int32 (at most `width` of
            them: the first `width` are kept).
        width: How many ints each process sends; the same in every process.
        strategy: The strategy (default: the current one).

    Returns:
        A list of lists of ints (on TensorFlow one per replica, so a
        process's list may appear more than once).

    Raises:
        ValueError: When a value is negative.

    Example:

    >>> import keras_tpugan as ktg
    >>> ktg.distribute.every_process_ints([6, 4], width=4)  # one process
    [[6, 4]]
    """
    values = [int(value) for value in values][:width]
    if any(value < 0 for value in values):
        raise ValueError(
            f"Expected non-negative ints. Received: {values}. Pass counts, "
            "epochs or indices."
        )
    if process_count(strategy) == 1:
        return [values]
    row = np.full(width, -1, "int32")
    row[: len(values)] = values
    rows = _gathered(row, strategy)
    return [[int(value) for value in r if value >= 0] for r in rows]


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
