"""`TimedBackup`: the run's backup for `--resume`, on the clock, written whole."""

import math
import os
import shutil
import threading
import time
import warnings

import keras

from keras_tpugan import distribute
from keras_tpugan.runs.backup_files import (
    WEIGHTS,
    backup_point,
    check_backup,
    finish_backup,
    read_record,
    start_backup,
)

# Each backup is a folder of the GAN's weights and its record, written last.
# The newest whole backups each process tells the others it holds, to agree
# on where to resume (two are kept; a third may be left by a kill).
_SHARED_POINTS = 3


class TimedBackup(keras.callbacks.Callback):
    """The run's backup, on the clock: restored before training, written whole.

    It backs up when `minutes` of training have passed since its last
    backup: at the end of an epoch, or in the middle of one, so that a run
    killed at any point loses at most about `minutes` of training, however
    long its epochs. With 0 it backs up at every epoch's end, never
    mid-epoch. It also backs up at the end of
    training when the last epochs were not backed up (a run stopped by its
    time budget resumes from where it stopped). A backup is written at the
    start of the next batch or epoch, after every callback has done its work
    for the one before (an epoch's history row, snapshot, sample grid), so
    a backup never counts work whose files a kill left unwritten.

    Each backup is a folder, `epoch_NNNNNN/` (after NNNNNN whole epochs) or
    `epoch_NNNNNN_batch_BBBBBB/` (BBBBBB batches into the next): the whole
    GAN's weights (`gan.weights.h5`: both networks, both optimizers, the
    EMA generator, the step counter that keys the latents) and a record
    written last (`state.json`: the epoch, the batch and the weights file's
    SHA-256). The folder is built under a temporary name and renamed into
    place, and the two newest are kept (three with several processes), so
    a kill or a full disk at any moment leaves the last whole backup as it
    was. The weights are read on
    the training thread, between two steps; their checksum, the record and
    the rename are done on a thread of their own while training goes on.
    The next backup and the end of training wait for that write, and raise
    its error if it failed.

    Written here rather than taken from `keras.callbacks.BackupAndRestore`,
    which overwrites its two files in place (after copying them aside),
    falls back to the older copy only when the weights file cannot be
    opened (a torn epoch record, or a weights file written in part, stops
    its resume), and restarts an epoch it backed up in the middle of.

    Resuming is two calls: `restore_epoch()` before `fit`, which picks the
    newest whole backup (a damaged newer one is named in a warning) and
    returns its epoch for `fit(initial_epoch=...)`, with the batches of that
    epoch already trained in `restored_batch`; the callback loads that
    backup's weights when the next `fit` begins (once `fit` has built the
    optimizers). A backup from the middle of an epoch resumes exactly when
    that epoch's remaining batches are trained first: `keras_tpugan.data`
    datasets read the same batches for the same epoch, so
    `train` fits `dataset.skip(restored_batch)` for that one epoch, then the
    rest (`runs.fit_parts.fit_in_parts`: one session for the callbacks).

    In a run of several processes each process keeps its own backups
    (`backup_dir` differs), and they stay in step: the chief's clock
    decides when all of them back up, and a resume takes the newest point
    that every process has whole, so no process resumes from a point
    another lacks. Mid-epoch they back up at batches the chief plans from
    its steps' pace: at each epoch's end (the one agreement an epoch, not
    one a step), and in the first epoch of a `fit` once, as its third
    batch begins (the pace of its second: the first may wait for a compile).

    Args:
        backup_dir: The folder of the backups (created at the first one).
        minutes: Back up once this many minutes of training have passed
            since the last backup (0: at every epoch's end).
        strategy: The run's strategy (default: the current one), whose
            processes agree on when to back up and where to resume.

    Example:

    ```python
    backup = TimedBackup("runs/x/backup", minutes=5)
    start = backup.restore_epoch()  # 0 when there is no backup yet
    gan.fit(dataset, epochs=30, initial_epoch=start, callbacks=[backup])
    ```
    """

    # `GAN.fit` runs it before the callbacks that read or add to the logs:
    # the weights are restored before any callback reads the step counter,
    # and a resumed epoch's logs are joined before any callback sees them.
    log_order = -1

    def __init__(self, backup_dir, minutes, strategy=None):
        super().__init__()
        self.backup_dir = os.fspath(backup_dir)
        self.minutes = minutes
        self.strategy = strategy
        self.restored_batch = 0
        self._restore_from = None
        self._writing = self._failed = None  # the write in the background

    def backups(self):
        """`[(epoch, batch, folder), ...]` of the backups in `backup_dir`,
        newest first (whole or not: `restore_epoch` checks them); `batch` is
        0 for a backup at an epoch's end."""
        if not os.path.isdir(self.backup_dir):
            return []
        found = [
            (*point, os.path.join(self.backup_dir, name))
            for name in os.listdir(self.backup_dir)
            if (point := backup_point(name))
        ]
        return sorted(found, reverse=True)

    def restore_epoch(self):
        """Picks the newest whole backup to resume from.

        Returns:
            Its epoch (the whole epochs it has trained), or 0 when
            `backup_dir` holds no backup; a backup from the middle of an
            epoch sets `restored_batch` to the batches of that epoch it has
            trained (0 otherwise). The callback loads its weights when `fit`
            begins; pass the epoch to `fit(initial_epoch=...)`.

        Raises:
            ValueError: Every backup in `backup_dir` is damaged (in a run of
                several processes: no epoch is backed up whole in every
                process). The message names the newest one and why.
        """
        self._restore_from, self.restored_batch = None, 0
        checked = [
            (epoch, batch, folder, check_backup(folder, epoch, batch))
            for epoch, batch, folder in self.backups()
        ]
        whole = [(e, b) for e, b, _, reason in checked if reason is None]
        # What every process holds (here, one list per process; at once
        # with one process), so that all of them take the same decision:
        # the newest whole points, an (epoch, batch) pair each.
        held = distribute.every_process_ints(
            [len(checked), *(n for point in whole[:_SHARED_POINTS] for n in point)],
            width=1 + 2 * _SHARED_POINTS,
            strategy=self.strategy,
        )
        shared = set(whole).intersection(
            *(set(zip(h[1::2], h[2::2], strict=True)) for h in held)
        )
        if shared:
            point = max(shared)
            folder = next(f for e, b, f, _ in checked if (e, b) == point)
            if checked[0][:2] != point:
                self._warn_older(checked[0], folder, point)
            self._restore_from, self.restored_batch = folder, point[1]
            return point[0]
        if not any(h[0] for h in held):
            return 0
        if checked and checked[0][3] is not None:
            newest, reason = checked[0][2], checked[0][3]
        else:
            newest, reason = (
                checked[0][2] if checked else self.backup_dir,
                "no epoch is backed up whole in every process",
            )
        raise ValueError(
            f"Expected a whole backup in {self.backup_dir!r} to resume from. "
            f"Received: {len(checked) - len(whole)} damaged (the newest, "
            f"{newest!r}: {reason})."
        )

    def _warn_older(self, newest, folder, point):
        *_, newest_folder, reason = newest
        why = f"is damaged ({reason})" if reason else "is not whole in every process"
        where = f"epoch {point[0]}" + (f", batch {point[1]}" if point[1] else "")
        warnings.warn(
            f"The newest backup, {newest_folder!r}, {why}; resuming from the "
            f"older one, {folder!r} ({where}).",
            stacklevel=3,
        )

    def on_train_begin(self, logs=None):
        # The batches of this fit's first epoch trained before it began.
        self._offset = 0
        self._means_before = None
        if self._restore_from is not None:
            self.model.load_weights(os.path.join(self._restore_from, WEIGHTS))
            if self.restored_batch:  # the means of the epoch's first batches
                self._means_before = read_record(self._restore_from).get("means")
                self._steps_at_resume = self._steps()
            # A second fit (the rest of the run after a resumed epoch's
            # remaining batches) goes on from the weights in memory.
            self._restore_from, self._offset = None, self.restored_batch
        placement = getattr(self.model, "placement", None)  # a GAN's
        processes = (
            placement.processes
            if placement is not None
            else distribute.process_count(self.strategy)
        )
        self._mid_epoch = bool(self.minutes)
        self._one_process = processes == 1
        # The newest backups kept: two, or with several processes three (a
        # process may write one more before it learns a peer was lost, and
        # they must still hold a point in common).
        self._kept = 2 if self._one_process else 3
        self._backed_up_at = time.monotonic()
        # (epochs, batches) trained, backed up, and to back up as the next
        # epoch begins.
        self._ended = self._backed_up = self._due = None
        # Several processes: the chief's planned batches of the next epoch
        # to back up at, `(first, every)` (first 0: none), and whether the
        # first epoch still waits for its plan.
        self._plan = self._next_plan = (0, 0)
        self._first_epoch_plan = True

    def on_epoch_begin(self, epoch, logs=None):
        # The epoch before is backed up now, once every callback has written
        # its files for it (its history row, snapshot, sample grid).
        if self._due:
            self._back_up(*self._due)
        self._epoch = epoch
        self._plan, self._next_plan = self._next_plan, (0, 0)
        self._first_batch = self._last_batch = None

    def on_train_batch_begin(self, batch, logs=None):
        # Checked as a batch begins, once every callback has done its work
        # for the batch before; no batch-end hook, which would keep Keras
        # from dispatching the steps ahead of their logs.
        if not (self._mid_epoch and batch):
            return
        if self._one_process:
            due = self._elapsed() >= self.minutes * 60
        else:  # every process at the batches the chief planned
            self._time_pace(batch)
            if self._first_epoch_plan and self._last_batch[0] > self._first_batch[0]:
                self._plan_first_epoch(batch)
            due = self._at_planned_batch(batch)
        if due:
            self._back_up(self._epoch, self._offset + batch)

    def _time_pace(self, batch):
        # From the epoch's second batch on: the first may wait for the data
        # or a compile. `_pace_plan` turns it into batches per interval.
        now = time.monotonic()
        if self._first_batch is None:
            self._first_batch = (batch, now)
        self._last_batch = (batch, now)

    def _plan_first_epoch(self, batch):
        """The chief's plan for the rest of the first epoch of a `fit`, from
        the pace of its second batch: the same agreement in every process,
        as the same batch begins."""
        self._first_epoch_plan = False
        first, every = self._pace_plan(self._elapsed())
        if first:  # batches from this one
            first += batch
        agreed = distribute.chief_values(
            {"first": first, "every": every}, self.strategy
        )
        self._plan = (int(agreed["first"]), int(agreed["every"]))

    def _at_planned_batch(self, batch):
        """Whether to back up as `batch` begins, by the chief's plan (then
        the plan moves on past it)."""
        first, every = self._plan
        if not first or batch < first:
            return False
        # The next one after this batch (with steps_per_execution > 1 the
        # batches come several at a time).
        self._plan = (first + ((batch - first) // every + 1) * every, every)
        return True

    def on_epoch_end(self, epoch, logs=None):
        if self._means_before is not None and logs is not None:
            self._join_means(logs)
        self._means_before = None
        self._ended, self._offset = (epoch + 1, 0), 0
        self._first_epoch_plan = False  # planned at its end from now on
        due = self._elapsed() >= self.minutes * 60
        if self.minutes:  # the chief's clock decides, in every process
            plan = self._planned(due)
            agreed = distribute.chief_values(
                {"due": due, "first": plan[0], "every": plan[1]}, self.strategy
            )
            due = bool(agreed["due"])
            self._next_plan = (int(agreed["first"]), int(agreed["every"]))
        self._due = self._ended if due else None

    def _join_means(self, logs):
        """A resumed epoch's logs, as the whole epoch's: each tracker's mean
        over the batches before the backup (its record's) and after."""
        before = self.restored_batch
        after = self._steps() - self._steps_at_resume
        if after < 1:
            return
        for name, mean in self._means_before.items():
            if name in logs:
                logs[name] = (mean * before + float(logs[name]) * after) / (
                    before + after
                )
        if "loss" in logs:  # the GAN's `loss`, the sum of two of them
            self.model.with_total_loss(logs)

    def _steps(self):
        return int(keras.ops.convert_to_numpy(self.model.step_counter))

    def _running_means(self):
        """The epoch's running means of the model's trackers (what `fit`
        logs), for a backup in the middle of an epoch."""
        means = {}
        for name, value in self.model.get_metrics_result().items():
            try:
                means[name] = float(value)
            except (TypeError, ValueError):  # not a scalar: not joined
                pass
        return means

    def _planned(self, due):
        """The batches of the next epoch to back up at, `(first, every)`,
        from this epoch's pace ((0, 0): none; one process: its clock)."""
        if self._one_process:
            return (0, 0)
        return self._pace_plan(0.0 if due else self._elapsed())

    def _pace_plan(self, elapsed):
        """`(first, every)`: in how many batches from now the next backup
        falls due, `elapsed` seconds after the last, and then every how
        many, at the pace timed so far ((0, 0): no pace yet)."""
        if self._first_batch is None:
            return (0, 0)
        (b0, t0), (b1, t1) = self._first_batch, self._last_batch
        if b1 <= b0 or t1 <= t0:
            return (0, 0)
        per_batch = (t1 - t0) / (b1 - b0)
        interval = self.minutes * 60
        return (
            max(1, math.ceil((interval - elapsed) / per_batch)),
            max(1, math.ceil(interval / per_batch)),
        )

    def on_train_end(self, logs=None):
        if self._ended is not None and self._ended != self._backed_up:
            self._back_up(*self._ended)
        self.wait()

    def _elapsed(self):
        return time.monotonic() - self._backed_up_at

    def _back_up(self, epoch, batch):
        self.wait()  # the write before: whole, or its error raised here
        means = self._running_means() if batch else None
        pending = start_backup(self.model, self.backup_dir, epoch, batch, means)
        self._writing = threading.Thread(
            target=self._finish, args=(pending,), name="keras-tpugan-backup"
        )
        self._writing.start()
        self._backed_up_at, self._backed_up = time.monotonic(), (epoch, batch)
        self._due = None

    def _finish(self, pending):
        try:
            finish_backup(pending)
            for *_, older in self.backups()[self._kept :]:
                shutil.rmtree(older, ignore_errors=True)
        except BaseException as e:  # raised on the training thread by `wait`
            self._failed = e

    def wait(self):
        """Waits for the backup being written in the background.

        Raises:
            OSError: Or whatever else stopped that write (a full disk, a
                folder that went away); its partial folder is gone and the
                backup before it is left whole.
        """
        writing, self._writing = self._writing, None
        if writing is not None:
            writing.join()
        failed, self._failed = self._failed, None
        if failed is not None:
            raise failed
