"""`TimedBackup`: the run's backup for `--resume`, on the clock, written whole."""

import json
import os
import re
import shutil
import time
import warnings

import keras

from keras_tpugan import distribute
from keras_tpugan.whole_files import file_sha256

# Each backup is a folder of the GAN's weights and its record, written last.
WEIGHTS = "gan.weights.h5"
RECORD = "state.json"
_FOLDER = re.compile(r"epoch_(\d+)")


class TimedBackup(keras.callbacks.Callback):
    """The run's backup, on the clock: restored before training, written whole.

    It backs up after the first epoch that ends `minutes` after its last
    backup (every epoch with 0), and at the end of training when the last
    epochs were not backed up (a run stopped by its time budget resumes from
    where it stopped). An epoch's backup is written when the next epoch
    begins, after every callback has written its files for that epoch (its
    history row, snapshot, sample grid), so a backup never counts an epoch
    whose files a kill left unwritten.

    Each backup is a folder, `epoch_NNNNNN/`: the whole GAN's weights
    (`gan.weights.h5`: both networks, both optimizers, the EMA generator,
    the step counter that keys the latents) and a record written last
    (`state.json`: the epoch and the weights file's SHA-256). The folder is
    built under a temporary name and renamed into place, and the
    two newest are kept, so a kill or a full disk at any moment leaves the
    last whole backup as it was.

    Written here rather than taken from `keras.callbacks.BackupAndRestore`,
    which overwrites its two files in place (after copying them aside) and
    falls back to the older copy only when the weights file cannot be
    opened: a torn epoch record, or a weights file written in part, stops
    its resume.

    Resuming is two calls: `restore_epoch()` before `fit`, which picks the
    newest whole backup (a damaged newer one is named in a warning) and
    returns its epoch for `fit(initial_epoch=...)`; the callback loads that
    backup's weights when training begins (once `fit` has built the
    optimizers).

    In a run of several processes each process keeps its own backups
    (`backup_dir` differs), and they stay in step: the chief's clock decides
    when all of them back up, and a resume takes the newest epoch that every
    process has whole, so no process resumes from an epoch another lacks.

    Args:
        backup_dir: The folder of the backups (created at the first one).
        minutes: Back up at the first epoch end this many minutes of
            training after the last backup (0: every epoch).
        strategy: The run's strategy (default: the current one), whose
            processes agree on when to back up and where to resume.

    Example:

    ```python
    backup = TimedBackup("runs/x/backup", minutes=5)
    start = backup.restore_epoch()  # 0 when there is no backup yet
    gan.fit(dataset, epochs=30, initial_epoch=start, callbacks=[backup])
    ```
    """

    def __init__(self, backup_dir, minutes, strategy=None):
        super().__init__()
        self.backup_dir = os.fspath(backup_dir)
        self.minutes = minutes
        self.strategy = strategy
        self._restore_from = None

    def backups(self):
        """`[(epoch, folder), ...]` of the backups in `backup_dir`, newest
        first (whole or not: `restore_epoch` checks them)."""
        if not os.path.isdir(self.backup_dir):
            return []
        found = [
            (int(match.group(1)), os.path.join(self.backup_dir, name))
            for name in os.listdir(self.backup_dir)
            if (match := _FOLDER.fullmatch(name))
        ]
        return sorted(found, reverse=True)

    def restore_epoch(self):
        """Picks the newest whole backup to resume from.

        Returns:
            Its epoch (the epochs it has trained), or 0 when `backup_dir`
            holds no backup. The callback loads its weights when `fit`
            begins; pass the epoch to `fit(initial_epoch=...)`.

        Raises:
            ValueError: Every backup in `backup_dir` is damaged (in a run of
                several processes: no epoch is backed up whole in every
                process). The message names the newest one and why.
        """
        self._restore_from = None
        checked = [
            (epoch, folder, check_backup(folder, epoch))
            for epoch, folder in self.backups()
        ]
        whole = [epoch for epoch, _, reason in checked if reason is None]
        # What every process holds (here, one list per process; at once
        # with one process), so that all of them take the same decision.
        held = distribute.every_process_ints(
            [len(checked), *whole], width=8, strategy=self.strategy
        )
        shared = set(whole).intersection(*(h[1:] for h in held))
        if shared:
            epoch = max(shared)
            folder = next(f for e, f, _ in checked if e == epoch)
            if checked[0][0] != epoch:
                self._warn_older(checked[0], folder, epoch)
            self._restore_from = folder
            return epoch
        if not any(h[0] for h in held):
            return 0
        if checked and checked[0][2] is not None:
            newest, reason = checked[0][1], checked[0][2]
        else:
            newest, reason = (
                checked[0][1] if checked else self.backup_dir,
                "no epoch is backed up whole in every process",
            )
        raise ValueError(
            f"Expected a whole backup in {self.backup_dir!r} to resume from. "
            f"Received: {len(checked) - len(whole)} damaged (the newest, "
            f"{newest!r}: {reason})."
        )

    def _warn_older(self, newest, folder, epoch):
        _, newest_folder, reason = newest
        why = f"is damaged ({reason})" if reason else "is not whole in every process"
        warnings.warn(
            f"The newest backup, {newest_folder!r}, {why}; resuming from the "
            f"older one, {folder!r} (epoch {epoch}).",
            stacklevel=3,
        )

    def on_train_begin(self, logs=None):
        if self._restore_from is not None:
            self.model.load_weights(os.path.join(self._restore_from, WEIGHTS))
        self._backed_up_at = time.monotonic()
        self._ended = self._backed_up = None  # epochs trained, backed up
        self._due = False

    def on_epoch_end(self, epoch, logs=None):
        self._ended = epoch + 1
        self._due = time.monotonic() - self._backed_up_at >= self.minutes * 60
        if self.minutes:  # the chief's clock decides, in every process
            due = distribute.chief_values({"due": self._due}, self.strategy)
            self._due = bool(due["due"])

    def on_epoch_begin(self, epoch, logs=None):
        # The epoch before is backed up now, once every callback has written
        # its files for it (its history row, snapshot, sample grid).
        if self._due:
            self._back_up(self._ended)

    def on_train_end(self, logs=None):
        if self._ended is not None and self._ended != self._backed_up:
            self._back_up(self._ended)

    def _back_up(self, epoch):
        write_backup(self.model, self.backup_dir, epoch)
        for _, older in self.backups()[2:]:  # the two newest are kept
            shutil.rmtree(older, ignore_errors=True)
        self._backed_up_at, self._backed_up, self._due = time.monotonic(), epoch, False


def write_backup(model, backup_dir, epoch):
    """Writes `model`'s weights as the backup after `epoch` epochs, whole or
    not at all: into a temporary folder (the weights, then the record with
    their checksum), renamed to `backup_dir/epoch_NNNNNN` once complete.

    Returns:
        The backup's folder.
    """
    os.makedirs(backup_dir, exist_ok=True)
    final = os.path.join(backup_dir, f"epoch_{epoch:06d}")
    partial = os.path.join(backup_dir, f".epoch_{epoch:06d}.{os.getpid()}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        os.makedirs(partial)
        weights = os.path.join(partial, WEIGHTS)
        model.save_weights(weights)
        record = {"epoch": epoch, "sha256": file_sha256(weights)}
        with open(os.path.join(partial, RECORD), "w") as f:
            json.dump(record, f)
            f.flush()
            os.fsync(f.fileno())
        if os.path.isdir(final):  # the same epoch backed up again
            shutil.rmtree(final)
        os.rename(partial, final)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return final


def check_backup(folder, epoch):
    """Why the backup in `folder` cannot be resumed from, or None when it is
    whole: its record readable and of `epoch`, its weights file there with
    the checksum the record holds."""
    try:
        with open(os.path.join(folder, RECORD)) as f:
            record = json.load(f)
    except FileNotFoundError:
        return f"no {RECORD}: its write did not finish"
    except (OSError, ValueError) as e:
        return f"{RECORD} unreadable, {type(e).__name__}: {e}"
    if not isinstance(record, dict) or record.get("epoch") != epoch:
        return f"{RECORD} is not the record of epoch {epoch}: {record!r:.80}"
    weights = os.path.join(folder, WEIGHTS)
    try:
        digest = file_sha256(weights)
    except OSError as e:
        return f"{WEIGHTS} unreadable, {type(e).__name__}: {e.strerror or e}"
    if digest != record.get("sha256"):
        return f"{WEIGHTS} differs from the checksum in {RECORD} (torn or changed)"
    return None
