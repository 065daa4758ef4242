"""`ScoredTensorBoard`: the run's TensorBoard logs, without unscored epochs'
scores."""

import keras
import numpy as np


class ScoredTensorBoard(keras.callbacks.TensorBoard):
    """Keras's TensorBoard, without the scores of unscored epochs (logged
    as `inf` or `-inf` for Keras's monitors: a point off every chart)."""

    def on_epoch_end(self, epoch, logs=None):
        logs = {
            k: v
            for k, v in (logs or {}).items()
            if not (np.ndim(v) == 0 and np.isinf(v))
        }
        super().on_epoch_end(epoch, logs)
