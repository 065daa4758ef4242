"""`PreparedRun`: the one set-up of a run that train, sweep, tune and bench share."""

import dataclasses
import logging
from typing import Any

import keras

from keras_tpugan import data as data_lib
from keras_tpugan import distribute, large_batch, models, precision
from keras_tpugan.gan import GAN
from keras_tpugan.runs.config import TrainConfig

logger = logging.getLogger("keras_tpugan")


@dataclasses.dataclass(frozen=True)
class PreparedRun:
    """A run set up from a `TrainConfig`: seeded, precision applied, data loaded.

    Made by `prepare`; `build_gan()` builds the config's GAN in the run's
    strategy scope.

    Attributes:
        config: The `TrainConfig`.
        placement: The `distribute.Placement`: the strategy (or, on JAX,
            the `keras.distribution.DataParallel`) to build and fit under,
            the replicas, processes and chief.
        dataset: The batched `tf.data.Dataset` (global batches).
        info: `load_images`'s info dict (`source`, `num_examples`,
            `image_shape`, `num_classes`).
        steps_per_epoch: Batches per epoch (None when the size is unknown).
        validation: The held-out `config.validation_split`, batched, for
            `fit(..., validation_data=...)` (None without one).

    Example:

    ```python
    run = prepare(TrainConfig.preset("smoke"))
    gan = run.build_gan()
    gan.fit(run.dataset, epochs=run.config.epochs)
    ```
    """

    config: TrainConfig
    placement: distribute.Placement
    dataset: Any
    info: dict
    steps_per_epoch: int | None
    validation: Any = None

    @property
    def strategy(self):
        """The placement's strategy (or JAX distribution)."""
        return self.placement.strategy

    @property
    def replicas(self):
        """Replicas the global batch is split over, all processes together."""
        return self.placement.replicas

    def build_gan(self):
        """Builds and compiles the config's GAN in the strategy's scope.

        Returns:
            A compiled `keras_tpugan.GAN`.
        """
        with self.strategy.scope():
            gan = build_gan(
                self.config,
                self.info["image_shape"],
                self.info["num_classes"],
                self.steps_per_epoch,
            )
        gan.set_placement(self.placement)
        return gan


def prepare(config, strategy=None, data=None):
    """Sets up a run: seed, placement, precision, data.

    In this order: `keras.utils.set_random_seed(config.seed)`; the placement
    (`distribute.Placement.choose`: the strategy of
    `config.strategy_options()` unless given, and the check that every
    process has the same settings); the config's dtype policy; the data
    (`data.TrainingData.load`: the training batches of
    `config.image_source()` and its held-out `validation_split`). The
    global batch is checked against the replicas by `GAN.fit`. `train`,
    `GANHyperModel`, `run_sweep` (through `train`) and the benchmark all
    start here, so every run of every tool is set up alike.

    Args:
        config: A `TrainConfig` (validated when it was made).
        strategy: A `tf.distribute.Strategy` or, on JAX, a
            `keras.distribution.DataParallel` (default: the config's kind).
        data: Anything `load_images` takes, in place of `config.dataset`
            (for example an array of images). Arrays, folders and datasets
            have no splits: `config.split` must be `"train"` for them.

    Returns:
        A `PreparedRun`.

    Example:

    ```python
    from keras_tpugan.runs.config import TrainConfig
    from keras_tpugan.runs.prepared_run import prepare

    run = prepare(TrainConfig.preset("smoke"))
    run.steps_per_epoch  # 62: 4,000 offline digits in batches of 64
    ```
    """
    if not isinstance(config, TrainConfig):
        raise ValueError(
            "Expected a keras_tpugan.runs.config.TrainConfig. Received: "
            f"{type(config).__name__}. Build one with TrainConfig(...) or "
            "TrainConfig.preset(name)."
        )
    keras.utils.set_random_seed(config.seed)
    placement = distribute.Placement.choose(
        config.to_dict(), strategy, **config.strategy_options()
    )
    precision.configure(config.precision, placement.strategy)
    data = data_lib.TrainingData.load(
        config.image_source(data=data),
        batch_size=config.batch_size,
        labels=config.conditional,
        seed=config.seed,
        xflip=config.xflip,
        validation_split=config.validation_split if data is None else None,
        replicas=placement.replicas,
    )
    return PreparedRun(
        config=config,
        placement=placement,
        dataset=data.dataset,
        info=data.info,
        steps_per_epoch=data.steps_per_epoch,
        validation=data.validation,
    )


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
    if config.warmup_epochs and not steps_per_epoch:
        raise ValueError(
            "Expected steps_per_epoch with warmup_epochs > 0. Received: "
            f"steps_per_epoch={steps_per_epoch}. Use data of known size."
        )
    if config.architecture == "resnet":  # its discriminator: always spectral
        build_generator = models.resnet_generator
        build_discriminator, d_options = models.resnet_discriminator, {}
    else:
        build_generator = models.dcgan_generator
        build_discriminator = models.dcgan_discriminator
        d_options = {"norm": config.d_norm, "dropout": config.d_dropout}
    generator = build_generator(
        latent_dim=config.latent_dim,
        image_shape=image_shape,
        width=config.width,
        num_classes=num_classes,
        norm=config.norm,
    )
    discriminator = build_discriminator(
        image_shape=image_shape,
        width=config.width,
        num_classes=num_classes,
        **d_options,
    )
    gan = GAN(
        generator=generator,
        discriminator=discriminator,
        latent_dim=config.latent_dim,
        num_classes=num_classes,
        discriminator_steps=config.discriminator_steps,
        update=config.update,
        gradient_penalty=config.gradient_penalty,
        penalty_weight=config.penalty_weight,
        seed=config.seed,
        ema_decay=config.ema_decay,
        ema_halflife_images=config.ema_halflife_images,
        ema_rampup=config.ema_rampup,
        augment=config.augmentation(),
    )
    warmup_steps = config.warmup_epochs * (steps_per_epoch or 0)

    def optimizer(network, rate, beta_1):
        beta_2, epsilon = config.scaled_adam_moments(network)
        return large_batch.make_optimizer(
            config.optimizer,
            rate,
            beta_1,
            warmup_steps,
            beta_2=beta_2,
            epsilon=epsilon,
        )

    gan.compile(
        generator_optimizer=optimizer("g", config.scaled_learning_rate, config.beta_1),
        discriminator_optimizer=optimizer(
            "d",
            config.scaled_d_learning_rate,
            config.beta_1 if config.d_beta_1 is None else config.d_beta_1,
        ),
        loss=config.loss,
        jit_compile=config.jit_compile,
        steps_per_execution=config.steps_per_execution,
        all_reduce_dtype=config.all_reduce_dtype,
    )
    return gan
