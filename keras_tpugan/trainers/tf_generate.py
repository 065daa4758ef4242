"""`traced_generator`: a generator's inference call as one `tf.function`."""

import tensorflow as tf


def traced_generator(generator, inputs):
    """`generator(inputs, training=False)` as a `tf.function`, traced now
    with the batch dimension left unknown, so that batches of any size
    (grids, scores, a last partial batch) share the one trace.

    Called eagerly, the generator runs its layers one Python call at a time;
    the traced function gives the same images.

    Args:
        generator: The generator model.
        inputs: A batch of its inputs (latents, or `[latents, labels]`):
            their shapes past the batch dimension and their dtypes.

    Returns:
        The `tf.function`, to call with such inputs.
    """
    call = tf.function(
        lambda inputs: generator(inputs, training=False), autograph=False
    )
    call.get_concrete_function(tf.nest.map_structure(_any_batch, inputs))
    return call


def _any_batch(value):
    """The `tf.TensorSpec` of `value` with its batch dimension unknown."""
    return tf.TensorSpec((None, *value.shape[1:]), tf.as_dtype(value.dtype))
