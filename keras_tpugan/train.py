"""`train(config, workdir)`: one training run, as the CLI and notebooks do it."""

import json
import os
import time

import keras

from keras_tpugan import callbacks, data, distribute, large_batch, models, precision
from keras_tpugan.config import TrainConfig
from keras_tpugan.gan import GAN


def build_gan(config, image_shape, num_classes=None, steps_per_epoch=None):
    """Builds and compiles the GAN a config describes (call inside a scope).

    Args:
        config: A `TrainConfig`.
        image_shape: `(height, width, channels)` of the data.
        num_classes: Number of classes for a conditional GAN.
        steps_per_epoch: Steps per epoch, to turn `warmup_epochs` into
            steps (required when `warmup_epochs > 0`).

    Returns:
        A compiled `keras_tpugan.GAN`.
    """
    num_classes = num_classes if config.conditional else None
    gan = GAN(
        generator=models.dcgan_generator(
            latent_dim=config.latent_dim,
            image_shape=image_shape,
            width=config.width,
            num_classes=num_classes,
            norm=config.norm,
        ),
        discriminator=models.dcgan_discriminator(
            image_shape=image_shape,
            width=config.width,
            num_classes=num_classes,
        ),
        latent_dim=config.latent_dim,
        num_classes=num_classes,
        discriminator_steps=config.discriminator_steps,
        gradient_penalty=config.gradient_penalty,
        penalty_weight=config.penalty_weight,
        seed=config.seed,
        ema_decay=config.ema_decay,
    )
    if config.warmup_epochs and not steps_per_epoch:
        raise ValueError(
            "Expected steps_per_epoch with warmup_epochs > 0. Received: "
            f"steps_per_epoch={steps_per_epoch}."
        )
    warmup_steps = config.warmup_epochs * (steps_per_epoch or 0)

    def optimizer():
        return large_batch.make_optimizer(
            config.optimizer, config.scaled_learning_rate, config.beta_1, warmup_steps
        )

    gan.compile(
        generator_optimizer=optimizer(),
        discriminator_optimizer=optimizer(),
        loss=config.loss,
        jit_compile=config.jit_compile,
    )
    return gan


def train(config, workdir, strategy=None, verbose="auto", extra_callbacks=()):
    """Trains a GAN as `config` says and writes everything under `workdir`.

    Writes `config.json`, `samples/epoch_*.png` and `samples/samples.gif`,
    `history.csv`, `loss_curves.png`, `generator.keras` (the EMA generator
    when there is one) and `summary.json` (data source, replicas, precision,
    XLA, batch, images/s, wall time, final losses and quality metrics). For
    28x28x1 data it scores FCD, classifier score and KID every
    `quality_every` epochs; a `DivergenceGuard` stops a diverging run.

    Args:
        config: A `TrainConfig`.
        workdir: Output directory (created if missing).
        strategy: A `tf.distribute.Strategy` or, on JAX, a
            `keras.distribution.DataParallel` (default:
            `distribute.get_strategy(config.strategy)`).
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
    if not isinstance(config, TrainConfig):
        raise ValueError(f"Expected a TrainConfig. Received: {type(config).__name__}.")
    started = time.perf_counter()
    os.makedirs(workdir, exist_ok=True)
    with open(os.path.join(workdir, "config.json"), "w") as f:
        json.dump(config.to_dict(), f, indent=2)
    keras.utils.set_random_seed(config.seed)
    precision.configure(config.precision)
    strategy = strategy or distribute.get_strategy(config.strategy)
    distribute.check_global_batch(config.batch_size, strategy)
    ds, info = data.load_images(
        config.dataset,
        batch_size=config.batch_size,
        labels=config.conditional,
        source=config.source,
        seed=config.seed,
        return_info=True,
    )
    with strategy.scope():
        gan = build_gan(
            config,
            info["image_shape"],
            info["num_classes"],
            steps_per_epoch=(info["num_examples"] or 0) // config.batch_size or None,
        )
    speed = callbacks.Throughput(global_batch_size=config.batch_size)
    guard = callbacks.DivergenceGuard()
    scoring = []
    if config.quality_every and tuple(info["image_shape"]) == (28, 28, 1):
        scoring = [
            callbacks.QualityMetrics(
                every_n_epochs=config.quality_every,
                num_images=config.quality_images,
                seed=config.seed,
            )
        ]
    fit_started = time.perf_counter()
    history = gan.fit(
        ds,
        epochs=config.epochs,
        verbose=verbose,
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
    if distribute.is_chief(strategy):
        generator = gan.ema_generator or gan.generator
        generator.save(os.path.join(workdir, "generator.keras"))
    summary = {
        "data_source": info["source"],
        "dataset": config.dataset,
        "num_examples": info["num_examples"],
        "strategy": type(strategy).__name__,
        "backend": keras.backend.backend(),
        "replicas": distribute.num_replicas(strategy),
        "precision": config.precision,
        "xla": gan.xla,
        "batch_size": config.batch_size,
        "learning_rate": config.scaled_learning_rate,
        "epochs": config.epochs,
        "images_per_sec": speed.mean_images_per_sec,
        "first_epoch_seconds": speed.first_epoch_seconds,
        "mean_epoch_seconds": speed.mean_epoch_seconds,
        "train_seconds": train_seconds,
        "wall_seconds": time.perf_counter() - started,
        "ema_decay": config.ema_decay,
        "stopped_reason": guard.stopped_reason,
        "final": {k: float(v[-1]) for k, v in history.history.items()},
    }
    with open(os.path.join(workdir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    return summary
