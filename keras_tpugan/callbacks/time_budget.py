"""`TimeBudget`: stops training at the end of the epoch that spends a budget."""

import logging
import time

import keras

logger = logging.getLogger("keras_tpugan")


class TimeBudget(keras.callbacks.Callback):
    """Stops `fit` at the end of the epoch in which `seconds` of training passed.

    Made for sessions that end on their own (a Colab runtime): stop in time,
    with the epoch's backup written, and continue later from it (with
    `keras.callbacks.BackupAndRestore`, or `keras-tpugan train --resume`).
    The clock starts when training starts; the epoch under way is always
    finished. Keras has no callback for this.

    Args:
        seconds: The training time after which no new epoch starts.

    Example:

    ```python
    budget = ktg.callbacks.TimeBudget(seconds=3 * 3600)
    gan.fit(ds, epochs=500, callbacks=[budget])
    budget.stopped_epoch  # the last epoch trained (1-based), or None
    ```
    """

    def __init__(self, seconds):
        super().__init__()
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            seconds = float("nan")
        if not seconds > 0:
            raise ValueError(
                f"Expected a time budget of seconds > 0. Received: seconds={seconds!r}."
            )
        self.seconds = float(seconds)
        self.stopped_epoch = None

    def on_train_begin(self, logs=None):
        self._started = time.perf_counter()
        self.stopped_epoch = None

    def on_epoch_end(self, epoch, logs=None):
        spent = time.perf_counter() - self._started
        if spent >= self.seconds and not self.model.stop_training:
            self.model.stop_training = True
            self.stopped_epoch = epoch + 1
            logger.warning(
                "time budget: %.0f s of training spent (budget %.0f s); stopped "
                "after epoch %d.",
                spent,
                self.seconds,
                epoch + 1,
            )
