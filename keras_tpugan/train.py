"""`train(config, workdir)`: one training run, as the CLI and notebooks do it."""

import json
import logging
import os
import time

import keras

from keras_tpugan import callbacks, distribute
from keras_tpugan.prepared_run import build_gan, prepare

__all__ = ["build_gan", "prepare", "train"]
logger = logging.getLogger("keras_tpugan")


def train(config, workdir, strategy=None, verbose="auto", extra_callbacks=()):
    """Trains a GAN as `config` says and writes everything under `workdir`.

    It validates on the config's held-out split after every epoch
    (`val_d_loss`, `val_d_real`, ... in the history).

    With `config.target_fcd` the summary gives the steps, images and
    training seconds until the FCD first reached it (None if never), the
    best FCD and every score with its step, images and seconds
    (`quality_schedule`).

    Writes `config.json`, `samples/epoch_*.png` and `samples/samples.gif`,
    `history.csv`, `loss_curves.png`, `generator.keras` (the EMA generator
    when there is one) and `summary.json` (data source, processes, replicas
    over all processes, precision, XLA, batch, images/s, wall time, final
    losses and quality metrics); in a multi-process run only the chief
    writes them, and every process returns the summary. For
    28x28x1 data it scores FCD, classifier score and KID every
    `quality_every` epochs; a `DivergenceGuard` stops a diverging run.

    Args:
        config: A `TrainConfig`.
        workdir: Output directory (created if missing).
        strategy: A `tf.distribute.Strategy` or, on JAX, a
            `keras.distribution.DataParallel` (default:
            `distribute.get_strategy(**config.strategy_options())`).
        verbose: Passed to `fit`.
        extra_callbacks: More callbacks for `fit`.

    Returns:
        The summary dict (also written to `summary.json`).

    Example:

    ```python
    from keras_tpugan.config import TrainConfig
    from keras_tpugan.train import train

    summary = train(TrainConfig.preset("demo"), "runs/demo")
    ```
    """
    started = time.perf_counter()
    run = prepare(config, strategy)
    info, strategy = run.info, run.strategy
    chief = distribute.is_chief(strategy)  # only the chief writes files
    if chief:
        os.makedirs(workdir, exist_ok=True)
        with open(os.path.join(workdir, "config.json"), "w") as f:
            json.dump(config.to_dict(), f, indent=2)
    gan = run.build_gan()
    speed = callbacks.Throughput(global_batch_size=config.batch_size)
    guard = callbacks.DivergenceGuard()
    scoring = []
    unavailable = _unavailable_quality(config, info)
    if unavailable and config.quality_every:
        logger.warning("quality figures: %s.", unavailable)
    elif config.quality_every:
        scoring = [
            callbacks.QualityMetrics(
                every_n_epochs=config.quality_every,
                num_images=config.quality_images,
                seed=config.seed,
                every_n_images=_quality_every_images(config, info),
                global_batch_size=config.batch_size,
            )
        ]
    fit_started = time.perf_counter()
    history = gan.fit(
        run.dataset,
        epochs=config.epochs,
        verbose=verbose,
        validation_data=run.validation,
        callbacks=[
            speed,
            *scoring,
            guard,
            callbacks.SampleGrid(
                os.path.join(workdir, "samples"),
                every_n_epochs=config.sample_every,
                num_images=config.num_samples,
                seed=config.seed,
            ),
            callbacks.LossCurves(workdir),
            *extra_callbacks,
        ],
    )
    train_seconds = time.perf_counter() - fit_started
    if chief:
        generator = gan.ema_generator or gan.generator
        generator.save(os.path.join(workdir, "generator.keras"))
    summary = {
        "data_source": info["source"],
        "dataset": config.dataset,
        "num_examples": info["num_examples"],
        "validation_split": config.validation_split if run.validation else None,
        "strategy": distribute.strategy_name(strategy),
        "backend": keras.backend.backend(),
        "processes": distribute.process_count(strategy),
        "replicas": run.replicas,  # over all processes
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
        "ema_decay": config.ema_decay,
        "ema_halflife_images": config.ema_halflife_images,
        "stopped_reason": guard.stopped_reason,
        "final": {k: float(v[-1]) for k, v in history.history.items()},
        "image_shape": list(info["image_shape"]),
        "quality_unavailable": unavailable,
        **_time_to_target(config, scoring),
    }
    if chief:
        with open(os.path.join(workdir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2)
    return summary


def _unavailable_quality(config, info):
    """Why this run gets no quality figures (None: it gets them)."""
    if not config.quality_every:
        return "off (quality_every=0)"
    shape = tuple(info["image_shape"])
    if shape != (28, 28, 1):
        return (
            "FCD, classifier score and KID unavailable for "
            f"{'x'.join(map(str, shape))} images: they are scored with an "
            "MNIST classifier, on 28x28x1 digits only"
        )
    return None


def _quality_every_images(config, info):
    if config.quality_every_images or config.target_fcd is None:
        return config.quality_every_images
    # A schedule in images that is the same for every batch size.
    return config.quality_every * info["num_examples"] if info["num_examples"] else None


def _time_to_target(config, scoring):
    """The quality schedule and the first score at or below the target."""
    if not scoring:
        return {}
    quality = scoring[0]
    fcds = [r["fcd"] for r in quality.records]
    out = {
        "quality_schedule": quality.records,
        "best_fcd": min(fcds) if fcds else None,
        "target_fcd": config.target_fcd,
        "steps_to_target": None,
        "images_to_target": None,
        "seconds_to_target": None,
    }
    reached = (
        None if config.target_fcd is None else quality.first_reaching(config.target_fcd)
    )
    if reached is not None:
        out["steps_to_target"] = reached["step"]
        out["images_to_target"] = reached["images"]
        out["seconds_to_target"] = reached["seconds"]
    return out
