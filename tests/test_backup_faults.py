"""The run's backup survives faults: a damaged newest backup falls back to
the older one, and a write killed or failed at any point leaves the last
whole backup as it was."""

import errno
import json
import os
import threading

import keras
import numpy as np
import pytest
from conftest import batches, random_images, tiny_gan

from keras_tpugan.runs import backup_files, timed_backup
from keras_tpugan.runs.timed_backup import TimedBackup

pytestmark = pytest.mark.both_backends


class _Weights(keras.callbacks.Callback):
    """Keeps the GAN's weights after each epoch, by epoch number (1-based)."""

    def __init__(self):
        super().__init__()
        self.after = {}

    def on_epoch_end(self, epoch, logs=None):
        self.after[epoch + 1] = [np.array(w) for w in self.model.get_weights()]


@pytest.fixture(scope="module")
def three_epochs(tmp_path_factory):
    """A GAN trained 3 epochs with a backup every epoch (epochs 2 and 3
    kept), and its weights after each epoch."""
    backup_dir = str(tmp_path_factory.mktemp("run") / "backup")
    weights = _Weights()
    tiny_gan().fit(
        batches(random_images(8), 4),
        epochs=3,
        verbose=0,
        callbacks=[weights, TimedBackup(backup_dir, minutes=0)],
    )
    return backup_dir, weights.after


def _copy(backup_dir, tmp_path):
    import shutil

    copy = str(tmp_path / "backup")
    shutil.copytree(backup_dir, copy)
    return copy


def _restored(backup, epoch):
    """A fresh GAN with `backup`'s chosen weights (of `epoch`), loaded when
    `fit` begins."""
    gan = tiny_gan()
    gan.fit(
        batches(random_images(8), 4),
        epochs=epoch,
        initial_epoch=epoch,
        verbose=0,
        callbacks=[backup],
    )
    return gan.get_weights()


def _same(weights, expected):
    for got, want in zip(weights, expected, strict=True):
        np.testing.assert_array_equal(got, want)


def test_the_newest_whole_backup_is_restored(three_epochs, tmp_path):
    backup_dir, after = three_epochs
    backup = TimedBackup(_copy(backup_dir, tmp_path), minutes=0)
    assert [epoch for epoch, _, _ in backup.backups()] == [3, 2]
    assert backup.restore_epoch() == 3
    _same(_restored(backup, 3), after[3])


@pytest.mark.parametrize(
    "damage",
    ["truncated weights", "garbled weights", "truncated record", "garbled record"],
)
def test_a_damaged_newest_backup_falls_back_to_the_older_one(
    three_epochs, tmp_path, damage
):
    backup_dir, after = three_epochs
    copy = _copy(backup_dir, tmp_path)
    name = backup_files.WEIGHTS if "weights" in damage else backup_files.RECORD
    path = os.path.join(copy, "epoch_000003", name)
    data = open(path, "rb").read()
    if "truncated" in damage:
        data = data[: len(data) // 3]
    else:  # the same length, bytes changed in the middle
        middle = len(data) // 2
        data = data[:middle] + bytes(b ^ 0xFF for b in data[middle : middle + 8])
        data += open(path, "rb").read()[middle + 8 :]
    open(path, "wb").write(data)
    backup = TimedBackup(copy, minutes=0)
    with pytest.warns(UserWarning) as caught:
        assert backup.restore_epoch() == 2
    (warning,) = caught
    message = str(warning.message)
    assert "\n" not in message
    assert message.startswith(
        f"The newest backup, {os.path.dirname(path)!r}, is damaged"
    )
    assert name in message and "resuming from the older one" in message
    assert message.endswith("(epoch 2).")
    _same(_restored(backup, 2), after[2])


def test_both_backups_damaged_is_one_error_naming_the_newest(three_epochs, tmp_path):
    backup_dir, _ = three_epochs
    copy = _copy(backup_dir, tmp_path)
    for epoch in ("epoch_000002", "epoch_000003"):
        open(os.path.join(copy, epoch, backup_files.RECORD), "w").write('{"epoch')
    with pytest.raises(ValueError) as raised:
        TimedBackup(copy, minutes=0).restore_epoch()
    message = str(raised.value)
    assert message.startswith(f"Expected a whole backup in {copy!r} to resume from.")
    assert "2 damaged" in message and "epoch_000003" in message
    assert "state.json unreadable, JSONDecodeError" in message


def _other_process_holds(monkeypatch, count, whole):
    """Stands for a second process whose backups are `count` folders, of
    which those of the epochs `whole` (at their ends) are whole:
    `every_process_ints` returns this process's list and that one, each the
    count and then the whole points, an (epoch, batch) pair each."""

    def every_process_ints(values, width, strategy=None):
        points = [n for epoch in whole for n in (epoch, 0)]
        return [list(values)[:width], [count, *points][:width]]

    monkeypatch.setattr(
        timed_backup.distribute, "every_process_ints", every_process_ints
    )


def test_a_record_whose_epoch_means_are_not_numbers_is_damaged(three_epochs, tmp_path):
    backup_dir, _ = three_epochs
    copy = _copy(backup_dir, tmp_path)
    folder = os.path.join(copy, "epoch_000003")
    path = os.path.join(folder, backup_files.RECORD)
    record = json.load(open(path))
    assert backup_files.check_backup(folder, 3) is None
    json.dump({**record, "means": {"d_loss": 0.5, "g_loss": 1.25}}, open(path, "w"))
    assert backup_files.check_backup(folder, 3) is None
    json.dump({**record, "means": {"d_loss": "0.5"}}, open(path, "w"))
    reason = backup_files.check_backup(folder, 3)
    assert reason.startswith("state.json's epoch means are not numbers: ")


def test_processes_resume_from_the_newest_epoch_every_one_has_whole(
    three_epochs, tmp_path, monkeypatch
):
    backup_dir, after = three_epochs
    backup = TimedBackup(_copy(backup_dir, tmp_path), minutes=0)
    _other_process_holds(monkeypatch, 2, [2])  # its epoch 3 is damaged
    with pytest.warns(UserWarning, match="is not whole in every process") as caught:
        assert backup.restore_epoch() == 2
    assert str(caught[0].message).endswith("(epoch 2).")
    _same(_restored(backup, 2), after[2])
    _other_process_holds(monkeypatch, 1, [])  # nothing whole there
    with pytest.raises(ValueError, match="no epoch is backed up whole in every"):
        backup.restore_epoch()
    # No process has a backup: a fresh start in all of them.
    _other_process_holds(monkeypatch, 0, [])
    assert TimedBackup(str(tmp_path / "none"), minutes=0).restore_epoch() == 0


def test_the_chiefs_clock_decides_when_every_process_backs_up(tmp_path, monkeypatch):
    """With `minutes`, every process backs up at the epochs the chief's
    clock picks (`chief_values`), not at its own."""
    asked = []

    def chief_values(values, strategy=None):
        asked.append(values)
        return {**values, "due": 1.0}  # the chief's clock: due at every epoch

    monkeypatch.setattr(timed_backup.distribute, "chief_values", chief_values)
    backup = TimedBackup(str(tmp_path / "backup"), minutes=60)
    tiny_gan().fit(
        batches(random_images(8), 4), epochs=3, verbose=0, callbacks=[backup]
    )
    # This process's clock: not yet; and one process plans no batches (its
    # clock decides those).
    assert asked == [{"due": False, "first": 0, "every": 0}] * 3
    assert [epoch for epoch, _, _ in backup.backups()] == [3, 2]


class _Killed(BaseException):
    """Stands for a kill: nothing after it runs (not even `except
    Exception` handlers)."""


@pytest.mark.parametrize(
    "point",
    ["in the weights", "before the record", "in the record", "at the rename"],
)
def test_a_write_killed_at_any_point_leaves_the_last_backup_whole(
    three_epochs, tmp_path, monkeypatch, point
):
    backup_dir, after = three_epochs
    copy = _copy(backup_dir, tmp_path)
    gan = tiny_gan()
    gan.fit(batches(random_images(8), 4), epochs=1, verbose=0)
    save_weights, dump, rename = gan.save_weights, json.dump, os.rename
    # The test stands in for the kill: the write's own clean-up is not run.
    monkeypatch.setattr(backup_files.shutil, "rmtree", lambda *a, **k: None)

    def torn_weights(path):
        save_weights(path)
        if point == "in the weights":
            with open(path, "r+b") as f:
                f.truncate(os.path.getsize(path) // 2)
            raise _Killed
        if point == "before the record":
            raise _Killed

    def torn_record(record, f):
        f.write(json.dumps(record)[:5])
        raise _Killed

    def no_rename(source, target):
        if os.path.basename(target).startswith("epoch_"):
            raise _Killed
        rename(source, target)

    monkeypatch.setattr(gan, "save_weights", torn_weights)
    if point == "in the record":
        monkeypatch.setattr(backup_files.json, "dump", torn_record)
    if point == "at the rename":
        monkeypatch.setattr(backup_files.os, "rename", no_rename)
    with pytest.raises(_Killed):
        backup_files.write_backup(gan, copy, 4)
    monkeypatch.setattr(backup_files.json, "dump", dump)
    monkeypatch.setattr(backup_files.os, "rename", rename)
    # What a kill leaves (the write's temporary folder) is passed over.
    leftover = os.path.join(copy, ".epoch_000004.999.partial")
    os.makedirs(leftover)
    open(os.path.join(leftover, backup_files.WEIGHTS), "wb").write(b"\x89HDF")
    backup = TimedBackup(copy, minutes=0)
    assert [epoch for epoch, _, _ in backup.backups()] == [3, 2]
    assert backup.restore_epoch() == 3
    _same(_restored(backup, 3), after[3])


def test_a_full_disk_during_a_backup_leaves_the_last_one_whole(
    three_epochs, tmp_path, monkeypatch
):
    backup_dir, after = three_epochs
    copy = _copy(backup_dir, tmp_path)
    gan = tiny_gan()
    gan.fit(batches(random_images(8), 4), epochs=1, verbose=0)

    def full(path):
        with open(path, "wb") as f:
            f.write(b"\x89HDF")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)

    monkeypatch.setattr(gan, "save_weights", full)
    with pytest.raises(OSError, match="No space left on device"):
        backup_files.write_backup(gan, copy, 4)
    assert sorted(os.listdir(copy)) == ["epoch_000002", "epoch_000003"]
    backup = TimedBackup(copy, minutes=0)
    assert backup.restore_epoch() == 3
    _same(_restored(backup, 3), after[3])


def test_a_backup_that_fails_in_the_background_is_reported_and_the_last_one_kept(
    tmp_path, monkeypatch
):
    """The record of epoch 2's backup finds the disk full on the backup's own
    thread while epoch 3 trains: the error is raised at the next backup (the
    end of training), its partial folder is gone, and epoch 1's backup is
    restored."""
    dump = json.dump
    threads = []

    def full_at_epoch_2(record, f, **kwargs):
        threads.append(threading.current_thread().name)
        if record["epoch"] == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), f.name)
        dump(record, f, **kwargs)

    monkeypatch.setattr(backup_files.json, "dump", full_at_epoch_2)
    weights = _Weights()
    backup_dir = str(tmp_path / "backup")
    with pytest.raises(OSError, match="No space left on device"):
        tiny_gan().fit(
            batches(random_images(8), 4),
            epochs=3,
            verbose=0,
            callbacks=[TimedBackup(backup_dir, minutes=0), weights],
        )
    assert sorted(weights.after) == [1, 2, 3]  # epoch 3 trained meanwhile
    assert threads == ["keras-tpugan-backup"] * 2  # not the training thread
    assert os.listdir(backup_dir) == ["epoch_000001"]
    monkeypatch.setattr(backup_files.json, "dump", dump)
    backup = TimedBackup(backup_dir, minutes=0)
    assert backup.restore_epoch() == 1
    _same(_restored(backup, 1), weights.after[1])
