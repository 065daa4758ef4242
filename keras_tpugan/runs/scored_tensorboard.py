"""`ScoredTensorBoard`: the run's TensorBoard logs, without unscored epochs'
scores."""

import keras

from keras_tpugan import directions


class ScoredTensorBoard(keras.callbacks.TensorBoard):
    """Keras's TensorBoard, without the scores of unscored epochs (logged
    as `inf` or `-inf` for Keras's monitors: a point off every chart)."""

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, directions.scored_logs(logs))
