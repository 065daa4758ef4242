"""Image datasets for GAN training: TFDS, the offline MNIST subset, numpy, folders.

`load_images` returns global batches of float32 images in [-1, 1] (and
int32 labels when asked), a new permutation of the whole dataset every
epoch, with a fixed global batch (as replicas need): a `tf.data.Dataset` on
the TensorFlow backend, a `keras_tpugan.EpochBatches` (no TensorFlow
needed) on JAX.

Modules: `image_source` (`ImageSource`: what to read and how), `loading`
(`load_images`, `read_images`), `training_data` (`TrainingData`: a
run's training and held-out batches), `sources` (what they
read: a name, arrays or a `tf.data.Dataset`), `tfds` (TFDS names and
sources), `mnist` (the offline subset), `tf_batches` (the TensorFlow
pipeline), `epoch_batches` (`EpochBatches`, the JAX one), `image_files`
(folders of image files), `epochs` (the epoch that keys the shuffle order)
and `checks`.
"""

from keras_tpugan.data.epoch_batches import EpochBatches
from keras_tpugan.data.epochs import current_epoch, set_epoch
from keras_tpugan.data.image_source import SOURCES, ImageSource
from keras_tpugan.data.loading import (
    is_normalized,
    load_images,
    read_images,
    to_unit,
)
from keras_tpugan.data.mnist import OFFLINE_MNIST_FILE, OFFLINE_SPLITS, offline_mnist
from keras_tpugan.data.tfds import STREAM_SHUFFLE_BUFFER
from keras_tpugan.data.training_data import TrainingData

__all__ = [
    "OFFLINE_MNIST_FILE",
    "OFFLINE_SPLITS",
    "SOURCES",
    "STREAM_SHUFFLE_BUFFER",
    "EpochBatches",
    "ImageSource",
    "TrainingData",
    "current_epoch",
    "is_normalized",
    "load_images",
    "offline_mnist",
    "read_images",
    "set_epoch",
    "to_unit",
]
