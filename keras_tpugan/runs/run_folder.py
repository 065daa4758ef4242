"""What a run folder may hold: the checks before a run, and the warm start
that trains a run on from a snapshot (a finished one to more epochs, an
unfinished one without its backup)."""

import json
import os
import shutil

import keras

from keras_tpugan.runs.snapshots import latest_snapshot, snapshot_epoch, snapshot_path

# Under the run folder: the backups `TimedBackup` writes every few minutes,
# at an epoch's end; a backup set aside by `resume_from`.
BACKUP = "backup"
SET_ASIDE = "backup_set_aside"


def check_run_folder(config, workdir, resume, resume_from=None):
    """Refuses what would overwrite or mix runs.

    Args:
        config: The run's `TrainConfig`.
        workdir: The run folder.
        resume: Whether the run is to be continued.
        resume_from: A snapshot of the run to continue from instead of its
            backup (a path, or one relative to `workdir` such as
            `snapshots/gan_epoch_0030.keras`); implies `resume`.

    Returns:
        `(snapshot, epochs)` when the run trains on from a snapshot (a
        finished run to more epochs, an unfinished one without its backup
        from its latest, or `resume_from`), else None.
    """
    resume = resume or resume_from is not None
    backup = os.path.join(workdir, BACKUP)
    saved = os.path.join(workdir, "config.json")
    finished = epochs_finished(workdir)
    if not resume:
        if os.path.isdir(backup):
            raise ValueError(
                f"Expected a new run folder. Received: {workdir!r}, which "
                "holds an unfinished run (its backup). Add --resume "
                "(resume=True) to continue it, or train into another folder."
            )
        if finished is not None:
            raise ValueError(
                f"Expected a new run folder. Received: {workdir!r}, which "
                f"holds a finished run of {finished} epochs. Add --resume "
                "(resume=True) with more --epochs to train it on, or train "
                "into another folder."
            )
        return None
    if not os.path.isfile(saved):
        raise ValueError(
            f"Expected a run folder to resume (one holding config.json). "
            f"Received: {workdir!r}, which holds no run. Start the run "
            "without --resume."
        )
    with open(saved) as f:
        previous = json.load(f)
    # A setting added since the run started took its default then.
    defaults = json.loads(json.dumps(type(config)().to_dict()))
    previous = {**defaults, **previous}
    current = json.loads(json.dumps(config.to_dict()))
    differ = sorted(
        k
        for k in {*previous, *current}
        # More epochs train the run on.
        if previous.get(k) != current.get(k) and k != "epochs"
    )
    if differ:
        changes = ", ".join(
            f"{k}={previous.get(k)!r} -> {current.get(k)!r}" for k in differ
        )
        raise ValueError(
            f"Expected the settings of the run in {workdir!r} to resume it "
            f"(epochs may grow). Received: other settings ({changes}). Resume "
            "with the command that started it, or train into another folder."
        )
    if resume_from is not None:
        return _named_snapshot(config, workdir, resume_from)
    if os.path.isdir(backup):
        return None  # `TimedBackup` continues from its last whole backup
    if finished is None:
        # An unfinished run without its backup (stopped before its first
        # backup, or its damaged backup moved away): on from its last
        # snapshot, when it has one.
        latest = latest_snapshot(os.path.join(workdir, "snapshots"))
        if latest is None:
            raise ValueError(
                f"Expected an unfinished run to resume. Received: {workdir!r}, "
                "whose run has no backup and no snapshot (it was stopped before "
                "either was written). Start a new run, or train into another "
                "folder."
            )
        return latest
    if config.epochs <= finished:
        raise ValueError(
            f"Expected more epochs than the {finished} of the finished run in "
            f"{workdir!r}, to train it on. Received: epochs={config.epochs}. "
            "Raise --epochs (epochs=...), or train into another folder."
        )
    snapshot = snapshot_path(os.path.join(workdir, "snapshots"), finished)
    if not os.path.isfile(snapshot):
        raise ValueError(
            f"Expected the finished run's last snapshot, {snapshot!r}, to train "
            "it on. Received: no such file. Train into another folder."
        )
    return snapshot, finished


def _named_snapshot(config, workdir, resume_from):
    path = os.fspath(resume_from)
    if not os.path.isfile(path) and not os.path.isabs(path):
        path = os.path.join(workdir, path)
    epoch = snapshot_epoch(path)
    if not os.path.isfile(path) or epoch is None:
        raise ValueError(
            f"Expected a snapshot of the run in {workdir!r} to resume from "
            "(snapshots/gan_epoch_NNNN.keras). Received: resume_from="
            f"{os.fspath(resume_from)!r}, "
            + ("not a snapshot's name." if os.path.isfile(path) else "no such file.")
            + " Name one of the files in its snapshots/ folder."
        )
    if epoch >= config.epochs:
        raise ValueError(
            f"Expected a snapshot before the run's last epoch ({config.epochs}) "
            f"to resume from. Received: {path!r}, of epoch {epoch}. Raise "
            "--epochs (epochs=...) to train on from it."
        )
    return path, epoch


def set_backup_aside(workdir):
    """Moves the run's backup to `backup_set_aside/` (replacing an earlier
    one), so that a run resumed from a named snapshot backs up afresh.

    Returns:
        The folder it was moved to, or None when the run had no backup.
    """
    backup = os.path.join(workdir, BACKUP)
    if not os.path.isdir(backup):
        return None
    aside = os.path.join(workdir, SET_ASIDE)
    if os.path.isdir(aside):
        shutil.rmtree(aside)
    os.rename(backup, aside)
    return aside


def epochs_finished(workdir):
    """The epochs of the finished run in `workdir` (from its `summary.json`),
    or None when it holds no finished run."""
    try:
        with open(os.path.join(workdir, "summary.json")) as f:
            return json.load(f)["epochs_completed"]
    except (OSError, ValueError, KeyError):
        return None


class WarmStart(keras.callbacks.Callback):
    """Loads a finished run's last snapshot when training begins.

    Both networks, both optimizers, the EMA generator and the step counter
    that keys the latents come back, as `BackupAndRestore` brings back its
    backup (and at the same point: `fit` has built the optimizers by then).

    Args:
        snapshot: A `.keras` file of the whole GAN.
    """

    # Run first by `GAN.fit`, as `TimedBackup` is: the weights and the step
    # counter are back before any other callback reads them.
    log_order = -1

    def __init__(self, snapshot):
        super().__init__()
        self.snapshot = snapshot

    def on_train_begin(self, logs=None):
        self.model.load_weights(self.snapshot)
