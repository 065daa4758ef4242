"""The TensorFlow step's random numbers, drawn for the GLOBAL batch.

Every number a step uses outside the objectives (latents, WGAN-GP weights,
the augmentation's numbers, the dropout key) comes from a stateless draw
keyed by `(seed, step, stream)`, for the whole global batch, each replica
taking its own rows: the same numbers on any replica count. They are drawn
outside XLA, where stateless RNG gives other numbers.
"""

import tensorflow as tf

from keras_tpugan import keyed_dropout
from keras_tpugan.augment import NOISE_SIZE


def draw_noise(gan, stream, local_batch, global_batch):
    """Latents, WGAN-GP weights, augmentation and dropout numbers.

    The whole global batch is drawn from a seed made of (seed, step,
    stream) and each replica takes its own rows, so example i of the
    global batch gets the same latent whatever the replica count.
    Drawn outside XLA: stateless RNG gives other numbers inside it.
    The dropout key (hashed, the same inside XLA) comes with this
    replica's first example in the global batch.
    """
    counter = gan.step_counter.value * (gan.discriminator_steps + 1) + stream
    noise = _noise(gan, 2 * counter, local_batch, global_batch, augment=True)
    if not gan._dropout_slots:
        return (*noise, None)
    replica = tf.distribute.get_replica_context().replica_id_in_sync_group
    first = tf.cast(replica, "int32") * tf.cast(local_batch, "int32")
    return (*noise, (keyed_dropout.key_of(gan.seed, counter), first))


def validation_noise(gan, local_batch, global_batch):
    """Latents (and WGAN-GP weights) for this replica's held-out examples.

    Keyed by the position of the batch in the evaluation: the trackers,
    which Keras resets before every evaluation, count the examples
    evaluated so far. So every evaluation of the same data sees the same
    latents, and none of training's (their keys are negative here).
    """
    offset = tf.cast(gan.trackers[0].count, "int64")
    return _noise(gan, -2 * offset - 2, local_batch, global_batch)


def _noise(gan, key, local_batch, global_batch, augment=False):
    seed_z = tf.stack([tf.constant(gan.seed, "int64"), key])
    seed_a = tf.stack([tf.constant(gan.seed, "int64"), key + 1])
    start = tf.cast(
        tf.distribute.get_replica_context().replica_id_in_sync_group, "int32"
    ) * tf.cast(local_batch, "int32")
    z = tf.random.stateless_normal([global_batch, gan.latent_dim], seed=seed_z)
    z = tf.slice(z, [start, 0], [local_batch, gan.latent_dim])
    alpha = tf.random.stateless_uniform([global_batch], seed=seed_a)
    alpha = tf.slice(alpha, [start], [local_batch])
    if not augment or gan.augment is None:
        return z, alpha, None
    # The augmentation's numbers: for real (0) and generated (1) images.
    seed_aug = tf.random.experimental.stateless_fold_in(seed_z, 1)
    shape = [global_batch, 2, NOISE_SIZE]
    aug = tf.random.stateless_uniform(shape, seed=seed_aug)
    return z, alpha, tf.slice(aug, [start, 0, 0], [local_batch, 2, NOISE_SIZE])
