"""tf.data batches for the TensorFlow backend: a new permutation of the
whole dataset every epoch, keyed by `(seed, epoch)` (the epoch read from
`keras_tpugan.data.epochs` inside the pipeline), scaled to [-1, 1]."""

import keras

from keras_tpugan.data import image_files
from keras_tpugan.data.epoch_batches import EpochBatches
from keras_tpugan.data.epochs import epoch_variable
from keras_tpugan.keyed_dropout import hash_uint32
from keras_tpugan.tf_import import tf


def tf_epoch_batches(images, class_ids, batch_size, shuffle, seed, xflip, labels):
    """Global batches of one permutation per epoch, gathered from memory
    (or, for a streamed folder, decoded from the batch's files).

    On TensorFlow a `tf.data.Dataset`; on JAX an `EpochBatches`, which needs
    no TensorFlow. Both read the order of `epoch_order` (same seed and
    epoch, same batches).
    """
    if keras.backend.backend() == "jax":
        return EpochBatches(
            images,
            class_ids if labels else None,
            batch_size=batch_size,
            shuffle=shuffle,
            seed=seed,
            xflip=xflip,
        )
    n = len(images)
    steps = n // batch_size
    if isinstance(images, image_files.FolderImages):
        image_shape = images.shape[1:]

        def read(order):  # the batch's files, decoded as it is read
            pixels = tf.numpy_function(images.__getitem__, [order], tf.uint8)
            return tf.ensure_shape(pixels, [batch_size, *image_shape])

    else:
        stored = tf.constant(images)

        def read(order):
            return tf.gather(stored, order)

    class_ids = tf.constant(class_ids, "int32")

    epoch = epoch_variable()

    def one_epoch(_):
        # Read when a pass over the data starts: the order of epoch e is a
        # function of (seed, e) alone, in any process: `epoch_order`'s, in
        # TensorFlow ops (no Python in the pipeline).
        e = epoch.read_value()
        if shuffle:
            keys = tf.cast(tf_epoch_keys(n, seed, e, 0), tf.int64)
            order = tf.argsort(keys, stable=True)
        else:
            order = tf.range(n)
        flips = tf_epoch_flips(n, seed, e, xflip)
        used = steps * batch_size
        return tf.data.Dataset.from_tensor_slices(
            (
                tf.reshape(order[:used], [steps, batch_size]),
                tf.reshape(flips[:used], [steps, batch_size]),
            )
        )

    def gather(order, flips):
        return finished_batch(read(order), tf.gather(class_ids, order), flips, labels)

    ds = tf.data.Dataset.range(1).flat_map(without_autograph(one_epoch))
    ds = ds.map(
        without_autograph(gather),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    ds = ds.apply(tf.data.experimental.assert_cardinality(steps))
    return without_autotune(ds.prefetch(tf.data.AUTOTUNE))


def without_autograph(fn):
    """`fn` for `tf.data` to trace as it is written, without AutoGraph.

    The pipeline's functions branch and loop on Python values only, so
    AutoGraph's rewrite of them (and of everything they call) would change
    nothing but the time to build the pipeline; a branch on a tensor would
    raise when traced.
    """
    return tf.autograph.experimental.do_not_convert(fn)


def without_autotune(ds):
    """`ds` with tf.data's autotuning off: each `AUTOTUNE` parallelism is
    then the number of CPU cores (at most 16), each prefetch buffer fixed.

    Keras drops an epoch's iterator when the epoch ends, and dropping one
    waits for the autotuner's optimization pass in progress, which the
    training step's load on the CPU can stretch to a second; a run of 250
    short epochs lost minutes to it (docs/design/notes.md).
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    return ds.with_options(options)


def tf_epoch_keys(n, seed, epoch, stream):
    """`epoch_batches.epoch_keys` in TensorFlow ops (`epoch` a tensor).

    The hash is `keyed_dropout.hash_uint32` (`keras.ops`: TensorFlow ops on
    this backend), the one `KeyedDropout` draws its masks with.
    """
    key = tf.constant(0, tf.uint32)
    for part in (
        tf.constant(int(seed) % 2**32, tf.uint32),
        tf.cast(epoch % 2**32, tf.uint32),
        tf.constant(stream, tf.uint32),
    ):
        key = hash_uint32(tf.bitwise.bitwise_xor(key, part))
    positions = tf.cast(tf.range(n), tf.uint32)
    return hash_uint32(tf.bitwise.bitwise_xor(hash_uint32(positions), key))


def tf_epoch_flips(n, seed, epoch, xflip):
    """Which of the epoch's `n` positions `xflip` mirrors (`epoch` a tensor):
    the top bit of their keys of stream 1, as `EpochBatches` draws them."""
    if not xflip:
        return tf.zeros([n], "bool")
    return tf.bitwise.right_shift(tf_epoch_keys(n, seed, epoch, 1), 31) == 1


def finished_batch(pixels, class_ids, flips, labels):
    """A stored batch scaled to [-1, 1], its flipped images mirrored, with
    its class ids when `labels`."""
    batch = _scaled_batch(pixels)
    batch = tf.where(flips[:, None, None, None], tf.reverse(batch, [2]), batch)
    return (batch, class_ids) if labels else batch


def _scaled_batch(batch):
    """A stored batch (uint8 pixels, or float32 already in [-1, 1]) in [-1, 1]."""
    if batch.dtype == tf.uint8:
        return tf.cast(batch, "float32") / 127.5 - 1.0
    return tf.cast(batch, "float32")
