"""How the JAX step's gradients cross the devices: by XLA's partitioner, or
as one flat buffer (`flat_all_reduce`) where each buffer costs a round
trip."""

import jax
from jax.flatten_util import ravel_pytree
from jax.sharding import PartitionSpec

from keras_tpugan.models.walk import batch_normalizations


def summed_over_devices(gan, local, replicated, inputs):
    """`local(*replicated, inputs)`, its first output summed over devices.

    `local` returns `(summed, kept)`: `summed`, `(gradients, logged
    shares)`, adds up over the devices' examples, `kept` (network states)
    is the same on every device. By default the step is written for the
    global batch and XLA's partitioner sums each gradient where it is
    made (XLA combines them into one all-reduce of many buffers). With
    `flat_all_reduce`, each device computes `local` on its own examples
    (`jax.shard_map`) and `summed` crosses the devices as ONE flat
    buffer: Gloo, JAX's CPU collectives across processes, pays a round
    trip per buffer (docs/design/notes.md). TensorFlow's collectives fuse
    gradients themselves (`bytes_per_pack`); no JAX or Keras API does,
    hence this helper. With `all_reduce_dtype=
    "bfloat16"` the gradients cross as a bfloat16 buffer of their own,
    the logged shares in float32 beside it.
    """
    if not gan.flat_all_reduce:
        return local(*replicated, inputs)
    axis = gan.strategy.batch_dim_name
    per_example = {
        "images": inputs.images,
        "labels": inputs.labels,
        "latents": inputs.latents,
        "alpha": inputs.alpha,
        "augment_noise": inputs.augment_noise,
    }
    key = None if inputs.dropout is None else inputs.dropout[0]
    shared = (inputs.augment_p, key)

    def on_device(replicated, per_example, shared):
        augment_p, key = shared
        dropout = None
        if key is not None:  # keyed from this device's first example
            size = per_example["latents"].shape[0]
            first = inputs.dropout[1] + jax.lax.axis_index(axis) * size
            dropout = (key, first)
        own = inputs._replace(**per_example, augment_p=augment_p, dropout=dropout)
        summed, kept = local(*replicated, own)
        if gan.all_reduce_dtype == "float32":
            return psum_flat(summed, axis), kept
        grads, shares = summed
        grads = psum_flat(grads, axis, gan.all_reduce_dtype)
        return (grads, psum_flat(shares, axis)), kept

    return jax.shard_map(
        on_device,
        mesh=gan.strategy.device_mesh.backend_mesh,
        in_specs=(PartitionSpec(), PartitionSpec(axis), PartitionSpec()),
        out_specs=(PartitionSpec(), PartitionSpec()),
        # Unchecked: with the check on, JAX sums each gradient of a
        # replicated value over the devices itself, one all-reduce each.
        # `kept` is the same on every device because no layer reads the
        # batch as a whole (see `flat_all_reduce_pays`).
        check_vma=False,
    )(replicated, per_example, shared)


def flat_all_reduce_pays(gan):
    """Whether to sum each update's gradients as one flat buffer.

    On CPUs across processes (Gloo, which pays a round trip per buffer;
    see `summed_over_devices`), and only when no layer normalizes over
    the batch: each device then sees its own examples, and a
    `GlobalBatchNormalization` needs the global batch. Within a process,
    and on TPU and GPU interconnects, XLA's own placement is kept, unless
    the gradients are to cross in bfloat16 (only a flat buffer of our
    own can be).
    """
    if gan.strategy is None or len(gan.strategy.device_mesh.devices.flat) == 1:
        return False
    batch_norm = bool(batch_normalizations(gan.generator, gan.discriminator))
    if gan.all_reduce_dtype != "float32":
        if batch_norm:
            raise ValueError(
                "Expected networks without BatchNormalization for "
                f"all_reduce_dtype={gan.all_reduce_dtype!r} on JAX (each "
                "device sums its own examples' gradients, and batch "
                "normalization needs the global batch). Received: a "
                "network with one. Use norm='layer' or "
                "all_reduce_dtype='float32'."
            )
        return True
    if jax.process_count() == 1 or any(d.platform != "cpu" for d in jax.devices()):
        return False
    return not batch_norm


def psum_flat(values, axis, dtype=None):
    """`values` (a pytree) summed over the mesh axis as one flat buffer."""
    flat, unflatten = ravel_pytree(values)
    if dtype is None:
        return unflatten(jax.lax.psum(flat, axis))
    return unflatten(jax.lax.psum(flat.astype(dtype), axis).astype(flat.dtype))
