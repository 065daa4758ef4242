"""`ScoredTensorBoard`: the run's TensorBoard logs, without unscored epochs'
scores."""

import keras

from keras_tpugan import directions


class ScoredTensorBoard(keras.callbacks.TensorBoard):
    """Keras's TensorBoard, without the scores of unscored epochs (logged
    as `inf` or `-inf` for Keras's monitors: a point off every chart).

    With `update_freq="epoch"` (the default) it also leaves out Keras's
    per-batch scalars, which no writer records then: building them cost
    about 0.4 ms a step on a CPU (docs/design/notes.md), a share of the
    step that grows with the device's speed.
    """

    def on_train_batch_end(self, batch, logs=None):
        if self.update_freq == "epoch":  # no writer is pushed for batches
            logs = None
        super().on_train_batch_end(batch, logs)

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, directions.scored_logs(logs))
