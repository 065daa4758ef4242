"""The epoch that keys the shuffle order of `load_images` datasets.

One value per process: `set_epoch` sets it (`GAN.fit` does at the start of
every epoch), `EpochBatches` and the tf.data pipelines of `load_images` read
it when a pass over the data starts.
"""

import functools

import numpy as np

from keras_tpugan.tf_import import tf

# The epoch that keys the shuffle order (see `set_epoch`): one per process.
_EPOCH = [0]


def set_epoch(epoch):
    """Sets the epoch that keys the shuffle order of `load_images` datasets.

    The shuffle order of epoch `e` is a function of `(seed, e)` alone, so a
    run resumed at epoch `e` (for example by
    `keras.callbacks.BackupAndRestore`) sees the same batches as one that
    was never interrupted. The epoch is one value per process, read by every
    shuffled `load_images` dataset (and every dataset derived from one with
    `.map()` and the like) when a pass over it starts. `GAN.fit` sets it at
    the start of every epoch; a loop that iterates the data by hand calls
    it itself (otherwise every pass has the order of the last epoch set).

    Args:
        epoch: The epoch index (0-based).

    Example:

    >>> ds = load_images("mnist", source="offline", batch_size=64)
    >>> set_epoch(1)
    >>> current_epoch()
    1
    """
    if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)):
        raise ValueError(
            f"Expected an integer epoch. Received: epoch={epoch!r}. (The "
            "dataset argument was dropped: the epoch now keys every "
            "load_images dataset of the process.)"
        )
    _EPOCH[0] = int(epoch)
    if epoch_variable.cache_info().currsize:  # a tf.data pipeline reads it
        epoch_variable().assign(_EPOCH[0])


def current_epoch():
    """The epoch that keys the shuffle order now (see `set_epoch`).

    Returns:
        An int.
    """
    return _EPOCH[0]


@functools.cache
def epoch_variable():
    # The epoch inside tf.data pipelines: one variable per process, created
    # by the first pipeline (creating it at import would start TensorFlow
    # before a caller can split the CPU into logical devices), then kept
    # equal to `current_epoch()` by `set_epoch`. Datasets derived from a
    # `load_images` dataset with `.map()` keep following it.
    with tf.init_scope():
        return tf.Variable(_EPOCH[0], dtype="int64", trainable=False, name="data_epoch")
