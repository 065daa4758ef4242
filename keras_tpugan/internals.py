"""Every use of a Keras or TensorFlow internal, in one place.

(An optimizer's `_get_variable_index` is not one: `keras.Optimizer`'s own
documentation shows subclasses finding a variable's slots with it, as
`LARS` does.)

Each entry below has no public route in the versions it was checked on
(Keras 3.15.1, TensorFlow 2.21.0), says why it is needed, and has a test in
`tests/test_internals.py` that fails with the entry's name when the internal
changes, so an upgrade breaks loudly here rather than quietly elsewhere.

1. `MetricsList`: Keras's compiled-metrics list type, where
   `EarlyStopping`/`ModelCheckpoint`/`ReduceLROnPlateau` with `mode="auto"`
   look for a metric's direction (`keras_tpugan.directions`).
2. `TensorFlowTrainerHooks._maybe_symbolic_build`: Keras's TensorFlow trainer
   builds the model from a first batch reduced with one `strategy.reduce`,
   which `MultiWorkerMirroredStrategy` refuses for `(images, labels)`.
3. `TensorFlowTrainerHooks._make_function`: the same trainer all-reduces
   every logged value of every step across processes (one collective each);
   the GAN's values are all-reduced already.
4. `configure_multi_worker_start`: TensorFlow's coordination service and a
   class attribute of its collective strategy, to bound how long a
   multi-worker strategy waits for its peers at the start.
5. `extend_iter_in_place` and `held_by_list_only`: a distributed dataset's
   class extended in place (Keras knows a distributed dataset by its
   TensorFlow class, which the strategy makes) so that its iterators are
   kept, and when an iterator is held by nothing else (its reference count:
   TensorFlow's iterators hold none to themselves).
"""

import functools
import sys

# 1. Keras's compiled-metrics list type ------------------------------------

try:  # the type `keras.callbacks.MonitorCallback` looks into
    from keras.src.trainers.compile_utils import MetricsList
except ImportError:  # pragma: no cover - a Keras without it: no declaration
    MetricsList = None


# 2.-3. Keras's TensorFlow trainer -----------------------------------------


class TensorFlowTrainerHooks:
    """Two private methods of Keras's TensorFlow trainer, overridden.

    Mixed into `TensorFlowGANStep`, before `keras.Model` in its bases. Each
    changes what Keras does only with several processes (or, for the build,
    a distributed first batch), and otherwise calls Keras's own.
    """

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        # Keras builds from the first batch and, when it is distributed,
        # turns it into one tensor with a single `strategy.reduce` over the
        # whole batch; MultiWorkerMirroredStrategy's collectives refuse the
        # `(images, labels)` tuple (a conditional GAN could not fit on
        # several processes). Only shapes are needed: the first local
        # replica's part of each tensor. No public hook builds from a batch.
        import tensorflow as tf

        if self._distribute_strategy is None:  # as Keras: built when traced
            return
        if iterator is not None and data_batch is None:
            for _, _, batches in iterator:
                first = next(batches, None)  # None: empty, reported by `fit`
                if first is not None:
                    data_batch = tf.nest.map_structure(self.first_local_part, first)
                break
        super()._maybe_symbolic_build(data_batch=data_batch)

    def _make_function(self, step_function):
        # Keras reduces every logged value of every step across workers with
        # its own all-reduce (reduction "auto", i.e. "mean", whatever
        # `distribute_reduction_method` says): one collective per logged
        # value, half of a step on CPU processes (docs/design/notes.md). The
        # step's values are all-reduced already (one collective), so every
        # replica holds the same logs: take the first local replica's
        # ("first", as Keras does on TPUs).
        import tensorflow as tf

        if self.process_count == 1:
            return super()._make_function(step_function)
        strategy = self.distribute_strategy

        def one_step_on_iterator(iterator):
            outputs = strategy.run(step_function, args=(next(iterator),))
            return tf.nest.map_structure(self.first_local_part, outputs)

        if not self.run_eagerly:
            one_step_on_iterator = tf.function(
                one_step_on_iterator, reduce_retracing=True, autograph=False
            )
        return one_step_on_iterator


# 4. TensorFlow's coordination service ---------------------------------------


def configure_multi_worker_start(
    resolver, start_timeout_seconds, heartbeat_timeout_seconds
):
    """Bounds how long a `MultiWorkerMirroredStrategy` waits for its peers.

    The strategy starts TensorFlow's coordination service with no limit on
    the wait for the other tasks, and its first all-reduce waits for every
    worker with no limit either (a wrong address hangs for ever); no public
    API sets either. The strategy keeps a service configured before it is
    made, so this configures it as the strategy would, with the two
    time-outs, and returns a context manager that sets the first
    all-reduce's limit (a class attribute) while the strategy is made.

    Returns:
        A context manager to make the strategy in.
    """
    import contextlib

    from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
    from tensorflow.python.distribute import (
        collective_all_reduce_strategy,
        multi_worker_util,
    )
    from tensorflow.python.eager import context

    spec = resolver.cluster_spec()
    if (
        spec.jobs
        and resolver.task_type in ("chief", "worker")
        and context.context().coordination_service is None
    ):
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
        # Registration waits for every task: the time-out bounds the start.
        context.context().coordination_service.cluster_register_with_barrier = True

    @contextlib.contextmanager
    def first_all_reduce_limit():
        extended = collective_all_reduce_strategy.CollectiveAllReduceExtended
        default = extended._check_health_initial_timeout
        extended._check_health_initial_timeout = start_timeout_seconds
        try:
            yield
        finally:
            extended._check_health_initial_timeout = default

    return first_all_reduce_limit()


# 5. A distributed dataset's iterators, kept ---------------------------------


def extend_iter_in_place(distributed, keep):
    """Passes every new iterator of `distributed` through `keep`.

    The strategy makes the dataset's object, and Keras recognizes a
    distributed dataset by its TensorFlow class, so the class is extended in
    place (a subclass with one base: a mixin would change the object's
    layout). The subclass is made once per TensorFlow class.
    """
    distributed.__class__ = _keeping_class(type(distributed), keep)
    return distributed


@functools.cache
def _keeping_class(base, keep):
    def __iter__(self):
        return keep(base.__iter__(self))

    return type(base.__name__, (base,), {"__iter__": __iter__})


def held_by_list_only(iterator):
    """Whether only one list holds `iterator` (and the caller's loop).

    Its reference count (CPython's): the list, the caller's loop variable,
    this function's argument and `getrefcount`'s own.
    """
    return sys.getrefcount(iterator) <= 4
