"""`GlobalBatchNormalization`: batch normalization over the global batch."""

import keras
from keras import layers


@keras.saving.register_keras_serializable(package="keras_tpugan")
class GlobalBatchNormalization(layers.BatchNormalization):
    """BatchNormalization over the GLOBAL batch, on either backend.

    Small per-replica batches still normalize with the global batch's
    statistics, so results do not depend on the replica count. On
    TensorFlow it is `BatchNormalization(synchronized=True)` (an all-reduce
    of the moments across replicas); on JAX the jitted step sees the global
    batch sharded over the devices, so plain batch moments already are
    global (and Keras refuses `synchronized=True` there). Its saved config
    leaves `synchronized` out, so a model saved on one backend loads on the
    other.

    Args:
        **kwargs: `keras.layers.BatchNormalization` arguments other than
            `synchronized`.

    Example:

    >>> layer = GlobalBatchNormalization()
    >>> layer.synchronized == (keras.backend.backend() == "tensorflow")
    True
    """

    def __init__(self, **kwargs):
        kwargs.pop("synchronized", None)
        super().__init__(synchronized=keras.backend.backend() == "tensorflow", **kwargs)

    def get_config(self):
        config = super().get_config()
        config.pop("synchronized", None)
        return config
