"""The data over processes and replicas: sharding and the global batch check.

`shard_over_processes` gives each process its part of the data,
`sharded_by_the_data` tells JAX the batches are already split by process,
`fitting` does both (and the clean-up after) around one `fit` or
`evaluate`, and `check_global_batch` refuses a batch the replicas cannot
share.
"""

import contextlib

import keras

from keras_tpugan.distribute.cluster import process_count
from keras_tpugan.distribute.iterators import (
    deleting_iterators_aside,
    release_unused_iterators,
)
from keras_tpugan.distribute.strategy import num_replicas, scope, strategy_name
from keras_tpugan.tf_import import is_dataset, tf


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

    return deleting_iterators_aside(
        strategy.distribute_datasets_from_function(process_part), strategy
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


@contextlib.contextmanager
def fitting(x, validation_data=None, strategy=None, distribution=None):
    """The distributed context of one `fit` or `evaluate` of a GAN.

    In this order: each `tf.data.Dataset` among the data is given its
    process's part (`shard_over_processes`); on JAX, `distribution` is put
    in force when none is (Keras shards the data over the distribution in
    force) and `EpochBatches` pass through it unsharded
    (`sharded_by_the_data`). On leaving, the iterators Keras dropped of a
    multi-process dataset are released (`release_unused_iterators`).

    Args:
        x: The data of the `fit` or `evaluate`.
        validation_data: `fit`'s `validation_data` (a dataset, a tuple, or
            None).
        strategy: The strategy the GAN was built under (default: the
            current one).
        distribution: On JAX, the `keras.distribution.Distribution` the
            GAN was built under (None: none).

    Yields:
        `(x, validation_data)`, the datasets among them sharded.

    Example:

    ```python
    with ktg.distribute.fitting(ds, strategy=strategy) as (ds, _):
        gan.fit(ds, epochs=1)
    ```
    """
    if is_dataset(x):
        x = shard_over_processes(x, strategy)
    if is_dataset(validation_data):
        validation_data = shard_over_processes(validation_data, strategy)
    outer = contextlib.nullcontext()
    if keras.distribution.distribution() is None:
        outer = scope(distribution)
    try:
        with outer, sharded_by_the_data(x, validation_data):
            yield x, validation_data
    finally:
        release_unused_iterators()


def _process_rows(data):
    # `EpochBatches` (and its `repeated()`) and bench's batches say so.
    return getattr(data, "process_rows", False)


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
