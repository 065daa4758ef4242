"""`KeyedDropout`: dropout whose mask is a hash of (key, example, feature)."""

import math
import weakref

import keras
from keras import layers, ops

# The multipliers of a 32-bit integer finalizer (the "lowbias32" constants
# found by C. Wellons' hash-prospector), whose output bits look independent.
# The multipliers of `hash_uint32` (also `epoch_batches.hash_uint32`'s).
HASH_MULTIPLIERS = (0x7FEB352D, 0x846CA68B)

# Every `KeyedDropout`'s key variable, by id, for as long as it lives: how a
# GAN finds the keys among its discriminator's variables, wherever the
# layers sit (`is_key`).
_KEYS = weakref.WeakValueDictionary()


def check_rate(rate, name="rate"):
    """Checks a dropout rate (the fraction dropped); returns it as a float.

    Args:
        rate: The rate.
        name: The setting's name in the message (`TrainConfig`'s
            `d_dropout` is one).
    """
    if isinstance(rate, bool) or not isinstance(rate, int | float):
        rate_ok = False
    else:
        rate_ok = 0.0 <= rate < 1.0
    if not rate_ok:
        raise ValueError(
            f"Expected {name} in [0, 1) (the fraction dropped: 0.3 is usual "
            f"for a DCGAN discriminator, 0 turns it off). Received: {name}={rate!r}."
        )
    return float(rate)


def is_key(variable):
    """Whether `variable` is the key variable of a `KeyedDropout` layer."""
    return _KEYS.get(id(variable)) is variable


def hash_uint32(x):
    """A well-mixed 32-bit hash of the uint32 tensor `x`, element-wise.

    Plain integer arithmetic (shifts, xors, wrapping multiplies), so the same
    numbers on TensorFlow, JAX, inside and outside XLA, on any device: the
    stateless random ops differ between those (see DESIGN.md).
    """
    x = ops.cast(x, "uint32")
    x = ops.bitwise_xor(x, ops.right_shift(x, 16))
    x = ops.multiply(x, ops.cast(HASH_MULTIPLIERS[0], "uint32"))
    x = ops.bitwise_xor(x, ops.right_shift(x, 15))
    x = ops.multiply(x, ops.cast(HASH_MULTIPLIERS[1], "uint32"))
    return ops.bitwise_xor(x, ops.right_shift(x, 16))


def key_of(*parts):
    """A key in [0, 2**31) made of non-negative integer scalars `parts`.

    Returned as int32 (it fits), so it can be stored in an int32 variable
    and cast back without a sign change on any backend.
    """
    key = ops.cast(0, "uint32")
    for part in parts:
        key = hash_uint32(ops.bitwise_xor(key, ops.cast(part, "uint32")))
    return ops.cast(ops.right_shift(key, 1), "int32")


def keyed_uniform(key, counters):
    """Uniform floats in [0, 1) (24 bits) for uint32 `counters` under `key`."""
    bits = hash_uint32(ops.bitwise_xor(hash_uint32(counters), ops.cast(key, "uint32")))
    return ops.cast(ops.right_shift(bits, 8), "float32") / float(2**24)


@keras.saving.register_keras_serializable(package="keras_tpugan")
class KeyedDropout(layers.Layer):
    """Dropout whose mask depends on a key and each example's GLOBAL index.

    `keras.layers.Dropout` draws its mask from the layer's own seed
    generator for whatever batch it sees: on 2 replicas each replica draws
    for its half, so the masks (and the weights) differ from 1 replica's,
    and TensorFlow's stateless draws differ inside and outside XLA. Here
    the mask of feature `f` of example `e` is a hash of `(key, e, f)`, where
    `e` counts from the first example of the GLOBAL batch: the same masks on
    1 or 1,000 replicas, with or without XLA, on TensorFlow and JAX.

    `keras_tpugan.GAN` sets the key (from its seed, the step and which call
    of the discriminator it is) and the replica's first example before
    every training call of the discriminator, through the layer's int32
    variable `key` = `[key, first_example]`; so training stays reproducible
    and resumes exactly. Outside a GAN's step (`training=True` in a call of
    your own) the stored key is used. In inference it is the identity.

    Args:
        rate: Fraction of the features dropped, in [0, 1); the rest are
            scaled by `1 / (1 - rate)`.
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`).

    Returns:
        The inputs, masked in training.

    Example:

    >>> layer = KeyedDropout(0.5)
    >>> y = layer(keras.ops.ones((2, 4)), training=True)
    >>> sorted(set(keras.ops.convert_to_numpy(y).ravel().tolist())) in (
    ...     [0.0, 2.0], [0.0], [2.0])
    True
    """

    def __init__(self, rate, **kwargs):
        super().__init__(**kwargs)
        self.rate = check_rate(rate)
        self.supports_masking = True

    def build(self, input_shape):
        self.key = self.add_weight(
            name="key",
            shape=(2,),
            dtype="int32",
            initializer="zeros",
            trainable=False,
        )
        _KEYS[id(self.key)] = self.key

    def call(self, inputs, training=False):
        if not training or self.rate == 0.0:
            return inputs
        features = math.prod(inputs.shape[1:])
        batch = ops.shape(inputs)[0]
        first = ops.cast(self.key[1], "uint32")
        examples = first + ops.cast(ops.arange(batch, dtype="int32"), "uint32")
        positions = ops.cast(ops.arange(features, dtype="int32"), "uint32")
        counters = examples[:, None] * ops.cast(features, "uint32") + positions[None]
        keep = keyed_uniform(self.key[0], counters) >= self.rate
        keep = ops.reshape(ops.cast(keep, inputs.dtype), ops.shape(inputs))
        return inputs * keep * ops.cast(1.0 / (1.0 - self.rate), inputs.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "rate": self.rate}
