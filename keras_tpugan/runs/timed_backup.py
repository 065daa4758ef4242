"""`TimedBackup`: the run's backup for `--resume`, on the clock."""

import time

import keras


class TimedBackup(keras.callbacks.BackupAndRestore):
    """`BackupAndRestore` on the clock: it backs up at the end of the first
    epoch `minutes` after its last backup (every epoch with 0), and at the
    end of training when the last epochs were not backed up (a run stopped
    by its time budget resumes from where it stopped). Two copies, kept
    after training (`train` removes them when the run is finished)."""

    def __init__(self, backup_dir, minutes):
        super().__init__(backup_dir, double_checkpoint=True, delete_checkpoint=False)
        self.minutes = minutes

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._backed_up_at, self._pending = time.monotonic(), None

    def on_epoch_end(self, epoch, logs=None):
        if time.monotonic() - self._backed_up_at >= self.minutes * 60:
            super().on_epoch_end(epoch, logs)
            self._backed_up_at, self._pending = time.monotonic(), None
        else:
            self._pending = epoch

    def on_train_end(self, logs=None):
        if self._pending is not None:
            super().on_epoch_end(self._pending, logs)
            self._pending = None
        super().on_train_end(logs)
