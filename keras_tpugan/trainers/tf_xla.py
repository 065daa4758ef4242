"""Where XLA goes in the TensorFlow step: `jit_compile` resolved, and
whether the whole update or only the gradients are compiled."""

import tensorflow as tf

from keras_tpugan.models.walk import batch_normalizations


def whole_step_in_xla(xla, strategy):
    """Whether the whole update after the draw can be one XLA program.

    On one device, yes (not on a TPU, where Keras compiles everything).
    Under several replicas, or a one-worker MultiWorkerMirroredStrategy
    (which still all-reduces through a merge_call), XLA cannot hold the
    optimizer updates' cross-replica sums.
    """
    return (
        xla
        and strategy.num_replicas_in_sync == 1
        and not isinstance(
            strategy,
            (tf.distribute.TPUStrategy, tf.distribute.MultiWorkerMirroredStrategy),
        )
    )


def resolve_jit_compile(jit_compile, strategy, generator, discriminator):
    """Whether the step uses XLA, for `compile`'s `jit_compile`.

    `"auto"` is Keras's: no XLA on a CPU-only machine. Synchronized batch
    normalization under a multi-replica mirrored strategy cannot be inside
    the per-replica XLA function: refused with `True`, off with `"auto"`.
    """
    conflict = _mirrors(strategy) and _has_synchronized_batchnorm(
        generator, discriminator
    )
    if jit_compile == "auto" and not _has_accelerator():
        # Keras's own "auto": no XLA on CPU-only machines, where it
        # often makes a model slower (docs/results/throughput-and-peers.md,
        # "XLA and jit_compile").
        return False
    if not conflict:
        return jit_compile is not False
    if jit_compile is True:
        raise ValueError(
            "`jit_compile=True` cannot compile synchronized "
            "BatchNormalization under a multi-replica MirroredStrategy or "
            "MultiWorkerMirroredStrategy: its "
            "cross-replica mean would run inside the per-replica XLA "
            "function. Use models with norm='layer' (the default), "
            "jit_compile='auto' (turns XLA off here), or a TPU."
        )
    return False


def check_steps_per_execution(steps_per_execution, strategy):
    """Refuses more than one step per execution under a mirrored strategy."""
    if steps_per_execution != 1 and _mirrors(strategy):
        raise ValueError(
            "Expected steps_per_execution=1 under a multi-replica "
            "MirroredStrategy (Keras 3 fails there with more). Received: "
            f"steps_per_execution={steps_per_execution}. Use 1, or a TPU."
        )


def _mirrors(strategy):
    """A multi-replica MirroredStrategy or MultiWorkerMirroredStrategy.

    (The second is not a subclass of the first.)
    """
    return (
        isinstance(
            strategy,
            (tf.distribute.MirroredStrategy, tf.distribute.MultiWorkerMirroredStrategy),
        )
        and strategy.num_replicas_in_sync > 1
    )


def _has_accelerator():
    # Keras's test for its own jit_compile="auto": any device but a CPU.
    return any(d.device_type != "CPU" for d in tf.config.list_physical_devices())


def _has_synchronized_batchnorm(*models):
    return any(
        getattr(layer, "synchronized", False) for layer in batch_normalizations(*models)
    )
