"""A backup's files: the GAN's weights and a record written last, in one
folder that is renamed into place once whole (`TimedBackup` schedules them).

A backup is the folder `epoch_NNNNNN` (after NNNNNN whole epochs) or
`epoch_NNNNNN_batch_BBBBBB` (BBBBBB batches into the next) holding
`gan.weights.h5` and `state.json`: the epoch, the batch, the weights file's
SHA-256 and, from the middle of an epoch, the epoch's running means so far.
"""

import json
import os
import re
import shutil

from keras_tpugan.whole_files import file_sha256

WEIGHTS = "gan.weights.h5"
RECORD = "state.json"
_FOLDER = re.compile(r"epoch_(\d+)(?:_batch_(\d+))?")


def backup_point(name):
    """`(epoch, batch)` of the backup folder `name`, or None when the name is
    not a backup's."""
    match = _FOLDER.fullmatch(name)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2) or 0)


def backup_name(epoch, batch=0):
    """The folder name of the backup after `epoch` epochs and `batch`
    batches of the next."""
    return f"epoch_{epoch:06d}" + (f"_batch_{batch:06d}" if batch else "")


def write_backup(model, backup_dir, epoch, batch=0):
    """Writes `model`'s weights as the backup after `epoch` epochs and
    `batch` batches of the next, whole or not at all: into a temporary
    folder (the weights, then the record with their checksum), renamed to
    `backup_dir/epoch_NNNNNN` (`..._batch_BBBBBB`) once complete.

    `TimedBackup` does it in two halves: `start_backup` on the training
    thread (the weights, read between steps), `finish_backup` on a thread
    of its own while training goes on.

    Returns:
        The backup's folder.
    """
    return finish_backup(start_backup(model, backup_dir, epoch, batch))


def start_backup(model, backup_dir, epoch, batch=0, means=None):
    """The first half of `write_backup`: `model`'s weights into a temporary
    folder of `backup_dir`. `means` (a dict of floats), the epoch's running
    means so far, goes into the record of a backup from the middle of one.

    Returns:
        The pending backup, for `finish_backup`.
    """
    os.makedirs(backup_dir, exist_ok=True)
    name = backup_name(epoch, batch)
    partial = os.path.join(backup_dir, f".{name}.{os.getpid()}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        os.makedirs(partial)
        model.save_weights(os.path.join(partial, WEIGHTS))
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return (partial, os.path.join(backup_dir, name), epoch, batch, means)


def finish_backup(pending):
    """The second half of `write_backup`, from any thread: the weights'
    checksum, the record (written last, synced), the rename into place.

    Returns:
        The backup's folder.
    """
    partial, final, epoch, batch, means = pending
    try:
        weights = os.path.join(partial, WEIGHTS)
        record = {"epoch": epoch, "batch": batch, "sha256": file_sha256(weights)}
        if means is not None:
            record["means"] = means
        with open(os.path.join(partial, RECORD), "w") as f:
            json.dump(record, f)
            f.flush()
            os.fsync(f.fileno())
        if os.path.isdir(final):  # the same point backed up again
            shutil.rmtree(final)
        os.rename(partial, final)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return final


def check_backup(folder, epoch, batch=0):
    """Why the backup in `folder` cannot be resumed from, or None when it is
    whole: its record readable and of `epoch` and `batch`, its weights file
    there with the checksum the record holds."""
    try:
        with open(os.path.join(folder, RECORD)) as f:
            record = json.load(f)
    except FileNotFoundError:
        return f"no {RECORD}: its write did not finish"
    except (OSError, ValueError) as e:
        return f"{RECORD} unreadable, {type(e).__name__}: {e}"
    point = (
        (record.get("epoch"), record.get("batch", 0))
        if isinstance(record, dict)
        else None
    )
    if point != (epoch, batch):
        where = f"epoch {epoch}" + (f", batch {batch}" if batch else "")
        return f"{RECORD} is not the record of {where}: {record!r:.80}"
    weights = os.path.join(folder, WEIGHTS)
    try:
        digest = file_sha256(weights)
    except OSError as e:
        return f"{WEIGHTS} unreadable, {type(e).__name__}: {e.strerror or e}"
    if digest != record.get("sha256"):
        return f"{WEIGHTS} differs from the checksum in {RECORD} (torn or changed)"
    means = record.get("means", {})
    if not isinstance(means, dict) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in means.values()
    ):
        return f"{RECORD}'s epoch means are not numbers: {means!r:.80}"
    return None


def read_record(folder):
    """The record of the backup in `folder` (checked by `check_backup`)."""
    with open(os.path.join(folder, RECORD)) as f:
        return json.load(f)
