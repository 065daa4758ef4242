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
        try:
            super().on_train_begin(logs)
        except (OSError, ValueError, KeyError) as e:
            # Both copies unreadable (Keras tries the older one after an I/O
            # error), or the newest record of the epoch torn.
            raise ValueError(
                f"Expected a readable backup in {self.backup_dir!r} to resume "
                f"from. Received: a damaged one ({type(e).__name__}: "
                f"{str(e).splitlines()[0] if str(e) else 'no detail'}). Move "
                "the run's backup folder away and resume again to train on from "
                "its last snapshot (snapshots/), or train into another folder."
            ) from e
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
