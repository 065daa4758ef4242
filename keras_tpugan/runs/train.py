"""`train(config, workdir)`: one training run, as the CLI and notebooks do it."""

import functools
import logging
import os
import shutil
import time

import keras

from keras_tpugan import callbacks
from keras_tpugan.runs import results, run_folder, run_scoring
from keras_tpugan.runs.fit_parts import fit_in_parts
from keras_tpugan.runs.prepared_run import build_gan, prepare
from keras_tpugan.runs.scored_tensorboard import ScoredTensorBoard
from keras_tpugan.runs.snapshots import Snapshots, latest_snapshot
from keras_tpugan.runs.timed_backup import TimedBackup
from keras_tpugan.tf_import import tensorflow
from keras_tpugan.whole_files import replaced_whole

__all__ = ["build_gan", "prepare", "train"]
logger = logging.getLogger("keras_tpugan")


def train(
    config,
    workdir,
    strategy=None,
    verbose="auto",
    extra_callbacks=(),
    resume=False,
    time_budget_seconds=None,
    resume_from=None,
):
    """Trains a GAN as `config` says and writes everything under `workdir`.

    It validates on the config's held-out split every
    `validation_every_images` images seen, in whole epochs (`val_d_loss`,
    `val_d_real`, ... in the history).

    With `config.target_fcd` the summary gives the steps, images and
    training seconds until the FCD first reached it (None if never), the
    best FCD and every score with its step, images and seconds
    (`quality_schedule`).

    Writes `config.json`, `samples/epoch_*.png` and `samples/samples.gif`,
    `history.csv`, `loss_curves.png`, `generator.keras` (the EMA generator
    when there is one) and `summary.json` (data source, processes, replicas
    over all processes, precision, XLA, batch, images/s, wall time, final
    losses and quality metrics); in a multi-process run only the chief
    writes them, and every process returns the summary. It scores FCD,
    classifier score, KID, precision and recall every `quality_every`
    epochs (MNIST against the shipped digit classifier, other labelled data
    against a classifier of its own classes: `QualityMetrics.for_data`; the
    summary's `quality_unavailable` says why when it cannot; data without
    labels is scored by FID); a `DivergenceGuard` stops a diverging run.
    After the last epoch the chief scores the generator's FID against the
    run's data on `config.fid_images` images a side (`runs/final_fid.py`:
    unset, 10,000 when they cost at most `quality_max_share` of the
    training time; the summary's `final_fid_skipped` says why not).

    A run can be killed at any point and continued: every
    `config.backup_minutes` of training (in the middle of an epoch too),
    and when the run stops early, `TimedBackup` saves the whole GAN (both
    networks, both optimizers, the EMA generator, the step counter that
    keys the latents) under `backup/`, whole or not at all, keeping the
    newest; and `resume=True`
    continues from the newest whole backup (a damaged newer one is named in
    a warning) with the weights an uninterrupted run would have: from the
    middle of an epoch, that epoch's remaining batches are fitted first,
    then the epochs after it. The backups are removed when every epoch has
    run (kept when the time budget stopped the run). Every
    `config.snapshot_every` epochs, and at the end, the whole GAN is saved
    as `snapshots/gan_epoch_NNNN.keras` (with one process; not yet with
    several); TensorBoard logs (the logged values per epoch) go to
    `tensorboard/` when TensorFlow is installed (its summary writer writes
    them; without it, one log line says they are off).

    Args:
        config: A `TrainConfig`.
        workdir: Output directory (created if missing).
        strategy: A `tf.distribute.Strategy` or, on JAX, a
            `keras.distribution.DataParallel` (default:
            `distribute.get_strategy(**config.strategy_options())`).
        verbose: Passed to `fit`.
        extra_callbacks: More callbacks for `fit`.
        resume: Continue the run in `workdir`, which must hold a run of the
            same settings but for `epochs`: an unfinished one from its
            backup; a finished one, with more epochs, from its last
            snapshot. Without it, a `workdir` that holds a run (finished
            or not) is refused: nothing is overwritten.
        time_budget_seconds: Stop at the end of the epoch in which this much
            training time has passed (`callbacks.TimeBudget`); `resume=True`
            continues the run later.
        resume_from: Continue the run in `workdir` from this snapshot of it
            (`snapshots/gan_epoch_NNNN.keras`, a path or one relative to
            `workdir`) instead of its backup, which is moved to
            `backup_set_aside/`; implies `resume`.

    Returns:
        The summary dict (also written to `summary.json`).

    Example:

    ```python
    from keras_tpugan.runs.config import TrainConfig
    from keras_tpugan.runs.train import train

    summary = train(TrainConfig.preset("demo"), "runs/demo")
    ```
    """
    started = time.perf_counter()
    workdir = os.fspath(workdir)
    resume = resume or resume_from is not None
    warm_start = run_folder.check_run_folder(config, workdir, resume, resume_from)
    run = prepare(config, strategy)
    info, placement = run.info, run.placement
    chief = placement.chief  # only the chief writes files
    processes = placement.processes
    if time_budget_seconds is not None and processes > 1:
        raise ValueError(
            "Expected one process with a time budget (each process would "
            f"read its own clock). Received: {processes} processes. Set "
            "epochs instead."
        )
    if chief:
        os.makedirs(workdir, exist_ok=True)
        results.write_json(config.to_dict(), os.path.join(workdir, "config.json"))
    gan = run.build_gan()
    backup_dir = os.path.join(workdir, run_folder.BACKUP)
    if processes > 1:  # one backup per process: each restores its own
        backup_dir = os.path.join(backup_dir, f"process_{placement.process_index}")
    if resume_from is not None and chief:
        aside = run_folder.set_backup_aside(workdir)
        if aside:
            logger.warning("the run's backup is set aside in %r.", aside)
    backup = TimedBackup(backup_dir, config.backup_minutes, strategy=placement.strategy)
    restored_epoch = 0
    if resume and not warm_start:
        restored_epoch = _restore_epoch(backup, workdir)
    budget = (
        None
        if time_budget_seconds is None
        else callbacks.TimeBudget(time_budget_seconds)
    )
    files = []
    if chief and _tensorboard_available():
        files = [
            ScoredTensorBoard(
                os.path.join(workdir, "tensorboard"), write_graph=False, profile_batch=0
            )
        ]
    # Every process saves each snapshot (the others into a folder that is
    # then deleted): saving reads the variables, which on JAX with several
    # processes is a step every process must take, as TensorFlow's
    # multi-worker checkpoints are written by all of them.
    files.append(
        Snapshots(
            os.path.join(workdir, "snapshots"), config.snapshot_every, chief=chief
        )
    )
    speed = callbacks.Throughput(global_batch_size=config.batch_size)
    guard = callbacks.DivergenceGuard()
    scoring, unavailable = run_scoring.quality_scoring(config, info)
    fit_started = time.perf_counter()
    initial_epoch, extend = restored_epoch, []
    if warm_start:  # on from a snapshot
        snapshot, initial_epoch = warm_start
        extend = [run_folder.WarmStart(snapshot)]
        finished = run_folder.epochs_finished(workdir) is not None
        logger.warning(
            "training the %s run in %r on from epoch %d (%s) to %d.",
            "finished" if finished else "unfinished (its backup gone)",
            workdir,
            initial_epoch,
            os.path.basename(snapshot),
            config.epochs,
        )
    validation_epochs = _validation_epochs(
        config, run.steps_per_epoch, first_epoch=initial_epoch + 1
    )
    grid = callbacks.SampleGrid(
        os.path.join(workdir, "samples"),
        every_n_epochs=config.sample_every,
        num_images=config.num_samples,
        seed=config.seed,
        max_share=config.sample_max_share,
        every_n_images=config.sample_every_images,
        global_batch_size=config.batch_size,
    )
    fit_callbacks = [
        *extend,
        backup,
        speed,
        *scoring,
        guard,
        grid,
        callbacks.LossCurves(workdir, every_seconds=config.curves_every_seconds),
        *files,
    ]
    parts = [(run.dataset, config.epochs)]
    if backup.restored_batch:  # resumed mid-epoch: that epoch's rest first
        logger.warning(
            "resuming epoch %d at batch %d of %d.",
            initial_epoch + 1,
            backup.restored_batch + 1,
            run.steps_per_epoch,
        )
        rest = (run.dataset.skip(backup.restored_batch), initial_epoch + 1)
        parts = [rest, *parts] if initial_epoch + 1 < config.epochs else [rest]
    histories = fit_in_parts(
        gan,
        parts,
        initial_epoch,
        [*fit_callbacks, *([budget] if budget else []), *extra_callbacks],
        verbose=verbose,
        validation_data=run.validation,
        validation_freq=validation_epochs,
    )
    history = functools.reduce(_joined, histories)
    train_seconds = time.perf_counter() - fit_started
    stopped_by_budget = budget is not None and budget.stopped_epoch is not None
    if not stopped_by_budget:  # finished: nothing left to resume
        shutil.rmtree(backup_dir, ignore_errors=True)
        if chief:
            shutil.rmtree(os.path.join(workdir, run_folder.BACKUP), ignore_errors=True)
    fid = {}
    if chief:
        generator = gan.ema_generator or gan.generator
        with replaced_whole(os.path.join(workdir, "generator.keras")) as path:
            generator.save(path)
        fid = run_scoring.run_final_fid(
            config, workdir, train_seconds, processes, stopped_by_budget, scoring
        )
    summary = {
        "data_source": info["source"],
        "dataset": config.dataset,
        "num_examples": info["num_examples"],
        "data_streamed": info["streamed"],
        "data_memory_bytes": info["memory_bytes"],
        "validation_split": config.validation_split if run.validation else None,
        # backend, strategy, replicas (over all processes), processes, device
        **placement.to_dict(),
        # The policy in force ("auto" resolved) and the setting asked for.
        "precision": keras.mixed_precision.global_policy().name,
        "precision_setting": config.precision,
        "xla": gan.xla,
        "flat_all_reduce": gan.flat_all_reduce,
        "all_reduce_dtype": config.all_reduce_dtype,
        "batch_size": config.batch_size,
        "learning_rate": config.scaled_learning_rate,
        "epochs": config.epochs,
        "steps_per_epoch": run.steps_per_epoch,
        "seed": config.seed,
        "images_per_sec": speed.mean_images_per_sec,
        "first_epoch_seconds": speed.first_epoch_seconds,
        "mean_epoch_seconds": speed.mean_epoch_seconds,
        "train_seconds": train_seconds,
        "wall_seconds": time.perf_counter() - started,
        # The side work's schedules.
        "backup_minutes": config.backup_minutes,
        "validation_every_images": config.validation_every_images,
        # The epochs validated (1: every epoch).
        "validation_epochs": validation_epochs if run.validation else None,
        "curves_every_seconds": config.curves_every_seconds,
        "quality_max_share": run_scoring.quality_max_share(config),
        "sample_every_images": config.sample_every_images,
        "sample_max_share": config.sample_max_share,
        "samples_skipped": grid.skipped,
        "ema_decay": config.ema_decay,
        "ema_halflife_images": config.ema_halflife_images,
        "stopped_reason": guard.stopped_reason,
        "resumed_at_epoch": history.epoch[0] if resume and history.epoch else None,
        # Batches of that epoch the backup had trained (0: none, at its end).
        "resumed_at_batch": backup.restored_batch if resume else None,
        "stopped_by_time_budget": stopped_by_budget,
        # Of all the run's sessions (a resumed one counts on from the backup).
        "epochs_completed": history.epoch[-1] + 1 if history.epoch else None,
        "final": {k: float(v[-1]) for k, v in history.history.items() if v},
        "image_shape": list(info["image_shape"]),
        "quality_unavailable": unavailable,
        **run_scoring.time_to_target(config, scoring),
        # fid_images, final_fid, final_fid_real_images, final_fid_seconds,
        # final_fid_skipped (the chief's; absent on the other processes).
        **fid,
    }
    if chief:
        results.write_json(summary, os.path.join(workdir, "summary.json"))
    return summary


def _joined(history, later):
    """`later`'s `keras.callbacks.History` after `history`'s."""
    history.epoch += later.epoch
    for name, values in later.history.items():
        history.history.setdefault(name, []).extend(values)
    return history


def _validation_epochs(config, steps_per_epoch, first_epoch=1):
    """Keras's `validation_freq`: the fit's first epoch (1-based), the epochs
    `validation_every_images` spans, and the last, so that the run ends
    validated.

    The first epoch's validation traces (or compiles) the test step beside
    the train step's compile, and a held-out split that cannot be validated
    fails after one epoch, not after `validation_every_images`.
    """
    if config.validation_every_images is None or not steps_per_epoch:
        return 1
    images_per_epoch = steps_per_epoch * config.batch_size
    every = max(1, round(config.validation_every_images / images_per_epoch))
    if every == 1:
        return 1
    scheduled = range(every, config.epochs + 1, every)
    return sorted({min(first_epoch, config.epochs), *scheduled, config.epochs})


def _restore_epoch(backup, workdir):
    """The epoch of the run's newest whole backup (0: none yet); when every
    backup is damaged, a `ValueError` that says how to go on."""
    try:
        return backup.restore_epoch()
    except ValueError as e:
        latest = latest_snapshot(os.path.join(workdir, "snapshots"))
        snapshot = (
            f"snapshots/{os.path.basename(latest[0])}"
            if latest
            else "snapshots/gan_epoch_NNNN.keras"
        )
        raise ValueError(
            f"{e} Resume from a snapshot of the run with --resume-from "
            f"{snapshot} (resume_from= in Python), or train into another "
            "folder."
        ) from e


def _tensorboard_available():
    """Whether Keras's TensorBoard callback can write (it needs TensorFlow)."""
    try:
        tensorflow("TensorBoard logs")
    except ImportError as e:
        logger.warning("TensorBoard logs: off. %s", e)
        return False
    return True
