"""`Throughput`: images/s and step time per epoch, compile time apart."""

import time

from keras_tpugan.callbacks.gan_callback import GANCallback


class Throughput(GANCallback):
    """Measures training speed per epoch and adds it to the logs.

    Adds `images_per_sec` and `step_time_ms` (wall time per step) to each
    epoch's logs, so History, CSV files and TensorBoard carry them. The
    first epoch of a `fit` call includes tracing and XLA compilation: it is
    kept apart in `first_epoch_seconds` and excluded from `mean_images_per_sec`.
    Validation (`fit(..., validation_data=...)`) is not counted: the clock
    stops when it starts.

    Args:
        global_batch_size: Images per step over all replicas (the batch size
            of the dataset given to `fit`).

    Example:

    ```python
    speed = ktg.callbacks.Throughput(global_batch_size=256)
    gan.fit(ds, epochs=3, callbacks=[speed])
    speed.mean_images_per_sec
    ```
    """

    # Runs first of all: its epoch time then holds the training alone, not
    # the other callbacks' work (scoring, grids).
    log_order = 0

    def __init__(self, global_batch_size):
        super().__init__(None)
        if (
            isinstance(global_batch_size, bool)
            or not isinstance(global_batch_size, int)
            or global_batch_size < 1
        ):
            raise ValueError(
                "Expected `global_batch_size`, the images per step over all "
                "replicas, as a positive int. Received: "
                f"global_batch_size={global_batch_size!r}. Pass the batch size "
                "of the dataset given to `fit`."
            )
        self.global_batch_size = global_batch_size

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self.epoch_seconds = []
        self.images_per_sec = []
        self.first_epoch_seconds = None
        self.train_begin = time.perf_counter()

    def on_epoch_begin(self, epoch, logs=None):
        self._steps = 0
        self._start = time.perf_counter()
        self._stop = None

    def on_test_begin(self, logs=None):
        # `fit`'s validation runs at the end of the epoch: not training.
        if getattr(self, "_stop", 0.0) is None:
            self._stop = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self._steps = batch + 1

    def on_epoch_end(self, epoch, logs=None):
        seconds = (self._stop or time.perf_counter()) - self._start
        if self.first_epoch_seconds is None:
            self.first_epoch_seconds = seconds
        else:
            self.epoch_seconds.append(seconds)
        rate = self._steps * self.global_batch_size / seconds if seconds > 0 else 0.0
        self.images_per_sec.append(rate)
        if logs is not None:
            logs["images_per_sec"] = rate
            logs["step_time_ms"] = 1000.0 * seconds / max(1, self._steps)

    @property
    def mean_images_per_sec(self):
        """Mean images/s over the epochs after the first (None before)."""
        rates = self.images_per_sec[1:]
        return sum(rates) / len(rates) if rates else None

    @property
    def total_seconds(self):
        """Seconds spent in the epochs so far, the compiling one included."""
        return (self.first_epoch_seconds or 0.0) + sum(self.epoch_seconds)

    @property
    def mean_epoch_seconds(self):
        """Mean epoch time after the first (None before)."""
        s = self.epoch_seconds
        return sum(s) / len(s) if s else None
