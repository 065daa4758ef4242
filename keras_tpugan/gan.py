"""`GAN`: the adversarial `keras.Model`: its settings, `compile`, `fit`,
`evaluate`, `generate` and saving.

Its `train_step` is in `keras_tpugan.trainers` (one per backend), what `fit`
checks of its input in `fit_input`. At about 590 lines it is over the package's
400: it is the public class, whose methods read best side by side.
"""

import inspect

import keras
import numpy as np
from keras import ops

from keras_tpugan import (
    directions,
    distribute,
    fit_input,
    gan_checks,
    models,
    penalties,
    precision,
)
from keras_tpugan import losses as losses_module
from keras_tpugan.augment import DiffAugment
from keras_tpugan.gan_optimizer import GANOptimizer
from keras_tpugan.latents import class_labels, seeded_latents
from keras_tpugan.precision import ALL_REDUCE_DTYPES
from keras_tpugan.tf_import import is_dataset
from keras_tpugan.trainers import BackendGANStep
from keras_tpugan.trainers.base import D_LOGGED, G_LOGGED


@keras.saving.register_keras_serializable(package="keras_tpugan")
class GAN(BackendGANStep, keras.Model):
    """A generative adversarial network trained with `fit`.

    `train_step` draws the latents, trains the discriminator
    `discriminator_steps` times, trains the generator once and updates the
    metrics, with the same results on any number of replicas, with or
    without XLA: every loss is divided by the GLOBAL batch, every logged
    value is all-reduced, and the latents are a function of `(seed, step,
    example in the global batch)`. The step is written once per backend
    (`keras_tpugan.trainers`: TensorFlow under a `tf.distribute` strategy,
    JAX under a `keras.distribution.DataParallel`); `trainers/base.py`
    holds the shared objectives and the contract between the GAN and its
    step. Build and compile it inside the scope of
    `keras_tpugan.distribute.get_strategy()`, which returns the right one.

    Args:
        generator: A `keras.Model` from latents (and labels, when
            `num_classes` is set) to images in [-1, 1].
        discriminator: A `keras.Model` from images (and labels) to one logit
            per image. For dropout use `keras_tpugan.KeyedDropout`, whose
            masks the step keys by `(seed, step, example)`; a
            `keras.layers.Dropout`'s masks depend on the replica count.
        latent_dim: Size of the generator's latent input.
        num_classes: If set, a class-conditional GAN: the dataset yields
            `(images, labels)` and both networks take the labels as their
            second input.
        discriminator_steps: Discriminator updates per generator update
            (n_critic). They reuse the step's real batch with fresh latents.
        gradient_penalty: `None`, `"wgan-gp"` or `"r1"`.
        penalty_weight: Weight of the gradient penalty (default 10.0).
        seed: Seed of the latents (and WGAN-GP interpolation weights).
        ema_decay: If set (for example 0.999), keep `ema_generator`, an
            exponential moving average of the generator's weights, updated
            after every generator step with the decay
            `min(ema_decay, (1 + step) / (10 + step))` (a warm-up, so early
            averages forget the random initial weights). `generate` (and so
            the sample grids and quality metrics) uses it; it is saved with
            the GAN.
        ema_halflife_images: Instead of `ema_decay`: the average's
            half-life in images (StyleGAN2-ADA's `ema_kimg`), so it spans the
            same number of images at any batch size: the decay per step of
            a global batch `b` is `0.5 ** (b / half_life)`.
        ema_rampup: With `ema_halflife_images`, the half-life is at most
            `ema_rampup` times the images seen so far (None: no ramp-up), so
            early averages forget the random initial weights.
        update: `"alternating"` (the default): the discriminator steps,
            then the generator steps against the updated discriminator on
            fresh latents. `"simultaneous"`: the TensorFlow DCGAN
            tutorial's step, both losses from one generator forward and
            both networks updated from the same weights (about a quarter
            fewer FLOPs per step; needs `discriminator_steps=1`). The docs'
            ablations page (results/ablations.md) compares their quality.
        augment: A `keras_tpugan.DiffAugment` (or a policy string such as
            `"translation,cutout"`): real and generated images reach the
            discriminator through the same random, differentiable
            transformations, in both networks' updates. With
            `adaptive=True`, the probability is the GAN's
            `augment_probability` weight, logged as `augment_p` and the
            mean sign of the real logits as `d_real_sign`.
        **kwargs: Passed to `keras.Model` (for example `name`).

    Example:

    ```python
    import keras
    import keras_tpugan as ktg

    strategy = ktg.distribute.get_strategy("auto")
    ds = ktg.data.load_images("mnist", batch_size=256)
    with strategy.scope():
        gan = ktg.GAN(
            generator=ktg.models.dcgan_generator(latent_dim=128),
            discriminator=ktg.models.dcgan_discriminator(),
            latent_dim=128,
        )
        gan.compile(
            generator_optimizer=keras.optimizers.Adam(2e-4, beta_1=0.5),
            discriminator_optimizer=keras.optimizers.Adam(2e-4, beta_1=0.5),
            loss="non_saturating",
            jit_compile=True,
        )
    gan.fit(ds, epochs=30)
    images = gan.generate(16, seed=0)
    ```
    """

    def __init__(
        self,
        generator,
        discriminator,
        latent_dim,
        num_classes=None,
        discriminator_steps=1,
        gradient_penalty=None,
        penalty_weight=None,
        seed=0,
        ema_decay=None,
        ema_halflife_images=None,
        ema_rampup=0.05,
        augment=None,
        update="alternating",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self._fitting = False  # True inside `fit` (`evaluate` reads it)
        self._placement = None  # made when first asked (`placement`)
        # One warning at most about a generator that cannot reach -1: at
        # its last activation here, else on its first batch at `fit`.
        output_range_checked = gan_checks.check_networks(
            generator, discriminator, latent_dim, num_classes
        )
        self.update = gan_checks.check_update(update, discriminator_steps)
        self.generator = generator
        self.discriminator = discriminator
        self.latent_dim = int(latent_dim)
        self.num_classes = None if num_classes is None else int(num_classes)
        self.discriminator_steps = int(discriminator_steps)
        self.gradient_penalty = penalties.check(gradient_penalty)
        if penalty_weight is None and gradient_penalty is not None:
            penalty_weight = penalties.DEFAULT_WEIGHTS[gradient_penalty]
        self.penalty_weight = None if penalty_weight is None else float(penalty_weight)
        self.seed = int(seed)
        self._dropout_slots = gan_checks.keyed_dropout_slots(discriminator)
        # The keras.distribution in force (JAX); TensorFlow's strategy is
        # captured by keras.Model itself.
        self._distribution = keras.distribution.distribution()
        self.ema_decay, self.ema_halflife_images, self.ema_rampup = (
            gan_checks.check_ema(ema_decay, ema_halflife_images, ema_rampup)
        )
        self.ema_generator = None
        if ema_decay is not None or ema_halflife_images is not None:
            # Keras has no separate moving-average copy of a model (the
            # optimizers' `use_ema` overwrites the weights at the end of fit).
            self.ema_generator = keras.models.clone_model(generator)
            self.ema_generator.set_weights(generator.get_weights())
            self.ema_generator.trainable = False
        # Training steps taken: keys the latents, so resume is exact.
        self.step_counter = self.add_weight(
            name="step_counter",
            shape=(),
            # JAX computes in 32 bits unless told otherwise.
            dtype="int32" if keras.backend.backend() == "jax" else "int64",
            initializer="zeros",
            trainable=False,
            aggregation="only_first_replica",
        )
        if isinstance(augment, str):
            augment = DiffAugment(augment)
        if augment is not None and not isinstance(augment, DiffAugment):
            raise ValueError(
                "Expected `augment` to be a keras_tpugan.DiffAugment, a policy "
                f"string or None. Received: augment={augment!r}."
            )
        self.augment = augment
        if augment is not None:
            augment.check_images(generator.output_shape[1:])
            self.augment_probability = self.add_weight(
                name="augment_probability",
                shape=(),
                dtype="float32",
                initializer=keras.initializers.Constant(augment.probability),
                trainable=False,
                aggregation="only_first_replica",
            )
        d_logged = D_LOGGED if gradient_penalty else D_LOGGED[:-1]
        if augment is not None and augment.adaptive:
            d_logged = d_logged + ("d_real_sign",)
        self.trackers = [keras.metrics.Mean(name=n) for n in d_logged + G_LOGGED]
        self._fit_input = fit_input.FitInput(self, output_range_checked)
        self.built = True

    # ------------------------------------------------------------------ API

    # `GAN.from_preset(preset, image_shape, ...)`: a compiled GAN of this
    # class with a recommended recipe (`models.recipes.from_preset`).
    from_preset = classmethod(models.recipes.from_preset)

    def call(self, inputs, training=False):
        """Runs the generator: latents (or `[latents, labels]`) to images."""
        return self.generator(inputs, training=training)

    @property
    def metrics(self):
        return _own_metrics(self)

    def compile(
        self,
        generator_optimizer=None,
        discriminator_optimizer=None,
        loss="non_saturating",
        jit_compile="auto",
        steps_per_execution=1,
        all_reduce_dtype="float32",
        **kwargs,
    ):
        """Configures the GAN for training.

        Args:
            generator_optimizer: A `keras.optimizers.Optimizer` (default:
                Adam(2e-4, beta_1=0.5)). An unnamed one is renamed
                `"generator_optimizer"`, the name Keras's learning-rate
                callbacks log it under.
            discriminator_optimizer: Likewise, for the discriminator (a
                different instance). `gan.optimizer` becomes a
                `keras_tpugan.GANOptimizer` holding both, which Keras's
                callbacks (`ReduceLROnPlateau`, `LearningRateScheduler`,
                `SwapEMAWeights`) drive like a plain model's optimizer.
            loss: `"non_saturating"`, `"hinge"`, `"wasserstein"`,
                `"least_squares"` or a `keras_tpugan.losses.AdversarialLoss`.
            jit_compile: `True` compiles the per-replica gradient
                computation with XLA; `"auto"` does so as Keras's own
                `"auto"` does: on a machine with a GPU or TPU, not on a
                CPU-only one, and not where the networks hold synchronized
                batch normalization under a multi-replica `MirroredStrategy`
                (whose cross-replica reductions cannot run inside the
                per-replica XLA function). On JAX, `True` and `"auto"`
                compile the whole step with `jax.jit`.
            steps_per_execution: Steps per `tf.function` call, passed to
                Keras (keep 1 under a multi-device `MirroredStrategy`).
            all_reduce_dtype: The type the gradients cross the replicas in:
                `"float32"`, or `"bfloat16"` (half the bytes; each replica's
                share is rounded to bfloat16 and summed in it, then the
                optimizers update in float32). Only with more than one
                replica; on JAX it needs per-example networks (no
                `BatchNormalization`) and sums one flat buffer
                (`flat_all_reduce`).
            **kwargs: Other `keras.Model.compile` arguments (not `optimizer`,
                `loss` or `metrics`, which the GAN owns).

        Returns:
            None.
        """
        for owned in ("optimizer", "metrics", "loss_weights"):
            if kwargs.get(owned) is not None:
                raise ValueError(
                    f"`GAN.compile` does not take `{owned}`: pass "
                    "`generator_optimizer`, `discriminator_optimizer` and "
                    f"`loss` instead. Received: {owned}={kwargs[owned]!r}."
                )
            kwargs.pop(owned, None)
        gan_checks.check_metrics(self, _own_metrics(self))
        gan_checks.check_step(self, BackendGANStep)
        gan_checks.check_jit_compile(jit_compile)
        if all_reduce_dtype not in ALL_REDUCE_DTYPES:
            raise ValueError(
                f"Expected `all_reduce_dtype` in {ALL_REDUCE_DTYPES}. Received: "
                f"all_reduce_dtype={all_reduce_dtype!r}."
            )
        self.all_reduce_dtype = all_reduce_dtype
        self.adversarial_loss = losses_module.get(loss)
        self.generator_optimizer = self._prepare_optimizer(
            generator_optimizer, "generator_optimizer"
        )
        self.discriminator_optimizer = self._prepare_optimizer(
            discriminator_optimizer, "discriminator_optimizer"
        )
        optimizer = GANOptimizer(
            self.generator_optimizer,
            self.discriminator_optimizer,
            generator_variables=self.generator.trainable_variables,
        )
        # Built here, in the strategy's scope, so that no optimizer variable
        # is created while Keras traces the step.
        with self.strategy_scope():
            self.generator_optimizer.build(self.generator.trainable_variables)
            self.discriminator_optimizer.build(self.discriminator.trainable_variables)
            optimizer.build(self.trainable_variables)
        self.compile_step(optimizer, jit_compile, steps_per_execution, **kwargs)
        self._gan_compile_config = {
            "loss": keras.saving.serialize_keras_object(self.adversarial_loss),
            "jit_compile": jit_compile,
            "steps_per_execution": steps_per_execution,
            "all_reduce_dtype": all_reduce_dtype,
        }

    def fit(self, x=None, y=None, batch_size=None, epochs=1, **kwargs):
        """Trains the GAN; see `keras.Model.fit`.

        Before training it checks what it can of the input: the dataset is
        not empty, and the global batch splits evenly over the replicas. On
        the first call it also generates one small batch and warns when no
        pixel is negative (a generator that cannot reach -1). For
        a `load_images` dataset it keys the shuffle order on the epoch, so a
        run resumed by `keras.callbacks.BackupAndRestore` is exact.

        Args:
            x: A `tf.data.Dataset` of images or `(images, labels)` batches
                (global batches), or an array of images.
            y: Labels when `x` is an array (conditional GAN).
            batch_size: Global batch size when `x` is an array.
            epochs: Number of epochs.
            **kwargs: Other `keras.Model.fit` arguments (`callbacks`,
                `verbose`, `initial_epoch`, `steps_per_epoch`, ...).

        Returns:
            A `keras.callbacks.History`.
        """
        self._fit_input.check(x, y, batch_size)
        self._fit_input.check_generated_range()
        gan_checks.check_unused_optimizers(self)
        if is_dataset(x) or isinstance(x, keras.utils.PyDataset):
            # The pipeline shuffles; a PyDataset keeps the order it gives.
            kwargs.setdefault("shuffle", False)
        kwargs["callbacks"], epochs_begun = self._fit_input.callbacks(
            kwargs.get("callbacks"), kwargs.get("verbose", "auto")
        )
        validation = kwargs.pop("validation_data", None)
        if validation is not None:
            if isinstance(validation, tuple):
                self._fit_input.check_first_batch(*validation[:2])
            else:
                self._fit_input.check_first_batch(validation, None)
        self._fitting = True  # `evaluate` is called for its validation
        try:
            with distribute.fitting(
                x, validation, self.strategy, self._distribution
            ) as (x, validation):
                history = super().fit(
                    x,
                    y,
                    batch_size=batch_size,
                    epochs=epochs,
                    validation_data=validation,
                    **kwargs,
                )
        except UnboundLocalError as e:
            # Keras's JAX `fit` fails so when an epoch yields no batch (its
            # `logs` are never set).
            if "'logs'" not in str(e):
                raise
            raise fit_input.empty_dataset_error() from e
        finally:
            self._fitting = False
        if epochs_begun.count and not epochs_begun.batches:
            raise fit_input.empty_dataset_error()
        return history

    def evaluate(self, x=None, y=None, batch_size=None, **kwargs):
        """Evaluates the GAN on held-out real images; see `keras.Model.evaluate`.

        Runs `test_step`: both losses and the mean discriminator outputs on
        the real images given and on as many generated ones, with the
        networks in inference mode and latents fixed by each example's
        position in the data (so two evaluations of the same data agree),
        nothing trained. `fit(..., validation_data=...)` logs the same
        values as `val_d_loss`, `val_d_real`, `val_d_fake`, `val_g_loss`
        (and `val_penalty`, `val_loss`): a `d_real` that keeps rising while
        `val_d_real` does not is the discriminator memorizing its training
        images.

        Args:
            x: A `tf.data.Dataset` of images or `(images, labels)` batches,
                or an array of images.
            y: Labels when `x` is an array (conditional GAN).
            batch_size: Global batch size when `x` is an array.
            **kwargs: Other `keras.Model.evaluate` arguments
                (`return_dict`, `steps`, `callbacks`, `verbose`).

        Returns:
            As `keras.Model.evaluate`: the loss, or a dict with
            `return_dict=True`.
        """
        if self._fitting:  # `fit` checked its validation data and shards it
            return super().evaluate(x, y, batch_size=batch_size, **kwargs)
        self._fit_input.check(x, y, batch_size)
        with distribute.fitting(
            x, strategy=self.strategy, distribution=self._distribution
        ) as (x, _):
            return super().evaluate(x, y, batch_size=batch_size, **kwargs)

    def generate(
        self,
        num_images_or_latents,
        labels=None,
        seed=None,
        batch_size=256,
        use_ema=True,
    ):
        """Generates images with the generator in inference mode.

        Args:
            num_images_or_latents: A number of images, or an array of
                latents of shape `(n, latent_dim)`.
            labels: Class labels, shape `(n,)`, for a conditional GAN
                (default: `0, 1, ..., num_classes - 1, 0, 1, ...`).
            seed: Seed of the latents when a number is given (`None`: a
                fresh random draw).
            batch_size: Images per generator call.
            use_ema: Use `ema_generator` when the GAN keeps one.

        Returns:
            A float32 numpy array in [-1, 1] of shape `(n, *image_shape)`.
        """
        latents = self._latents_for(num_images_or_latents, seed)
        n = latents.shape[0]
        labels = self._labels_for(labels, n)
        generator = self.generator
        if use_ema and self.ema_generator is not None:
            generator = self.ema_generator
        out = []
        for i in range(0, n, batch_size):
            z = latents[i : i + batch_size]
            inputs = z if labels is None else [z, labels[i : i + batch_size]]
            out.append(
                keras.ops.convert_to_numpy(
                    keras.ops.cast(self.generated_images(generator, inputs), "float32")
                )
            )
        return np.concatenate(out, axis=0)

    # ------------------------------------------------------------- helpers

    @property
    def placement(self):
        """Where the GAN trains: a `distribute.Placement` of its strategy,
        made once (the replicas, the processes, whether this one is the
        chief that writes files)."""
        if self._placement is None:
            self._placement = distribute.Placement.of(self.strategy)
        return self._placement

    def set_placement(self, placement):
        """Gives the GAN the `distribute.Placement` of its strategy, made
        already (`prepare`'s), so that it is not asked again.

        Args:
            placement: A `distribute.Placement` of `gan.strategy`.
        """
        if placement.strategy is not self.strategy:
            raise ValueError(
                "Expected the placement of the strategy the GAN was built under. "
                f"Received: a placement of {placement.strategy_name}. Build the "
                "GAN inside that strategy's scope."
            )
        self._placement = placement

    def strategy_scope(self):
        """The scope of the strategy (or distribution) the GAN was built in."""
        return distribute.scope(self.strategy)

    def _latents_for(self, num_images_or_latents, seed):
        if isinstance(num_images_or_latents, (int, np.integer)):
            n = int(num_images_or_latents)
            if n < 1:
                raise ValueError(
                    f"Expected a positive number of images. Received: {n}."
                )
            if seed is None:
                seed = np.random.randint(2**31)
            return seeded_latents(n, self.latent_dim, seed)
        latents = np.asarray(
            ops.convert_to_numpy(num_images_or_latents), dtype="float32"
        )
        if latents.ndim != 2 or latents.shape[1] != self.latent_dim:
            raise ValueError(
                f"Expected latents of shape (n, {self.latent_dim}). Received: "
                f"shape {tuple(latents.shape)}."
            )
        return latents

    def _labels_for(self, labels, n):
        if labels is not None and self.num_classes is not None:
            # The checks `fit` makes, with the same messages.
            fit_input.check_labels(
                np.asarray(ops.convert_to_numpy(labels)), self.num_classes
            )
        return class_labels(labels, n, self.num_classes)

    def _prepare_optimizer(self, optimizer, role):
        if optimizer is None:
            optimizer = keras.optimizers.Adam(2e-4, beta_1=0.5)
        if isinstance(optimizer, (str, dict)):
            optimizer = keras.optimizers.get(optimizer)
        if gan_checks.has_default_name(optimizer):
            # Keras's learning-rate callbacks log `learning_rate_<name>`:
            # "adam_10" would not say which network it trains.
            optimizer.name = role
        needs_scaling = precision.needs_loss_scaling(
            self.generator.dtype_policy
        ) or precision.needs_loss_scaling(self.discriminator.dtype_policy)
        # Keras scales only `self.optimizer` automatically: wrap both here.
        if needs_scaling and not isinstance(
            optimizer, keras.optimizers.LossScaleOptimizer
        ):
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        return optimizer

    # ------------------------------------------------------------ saving

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "generator": keras.saving.serialize_keras_object(self.generator),
            "discriminator": keras.saving.serialize_keras_object(self.discriminator),
            "latent_dim": self.latent_dim,
            "num_classes": self.num_classes,
            "discriminator_steps": self.discriminator_steps,
            "gradient_penalty": self.gradient_penalty,
            "penalty_weight": self.penalty_weight,
            "seed": self.seed,
            "ema_decay": self.ema_decay,
            "ema_halflife_images": self.ema_halflife_images,
            "ema_rampup": self.ema_rampup,
            "augment": keras.saving.serialize_keras_object(self.augment),
            "update": self.update,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for key in ("generator", "discriminator", "augment"):
            if config.get(key) is not None:
                config[key] = keras.saving.deserialize_keras_object(config[key])
        return cls(**config)

    def get_compile_config(self):
        if not self.compiled:
            return None
        return {
            **self._gan_compile_config,
            "generator_optimizer": keras.saving.serialize_keras_object(
                self.generator_optimizer
            ),
            "discriminator_optimizer": keras.saving.serialize_keras_object(
                self.discriminator_optimizer
            ),
        }

    def compile_from_config(self, config):
        config = dict(config)
        for key in ("generator_optimizer", "discriminator_optimizer", "loss"):
            config[key] = keras.saving.deserialize_keras_object(config[key])
        try:
            inspect.signature(self.compile).bind(**config)
        except TypeError:
            # A subclass's `compile` with its own argument names (keras-io's
            # `compile(d_optimizer, g_optimizer, loss_fn)`, passed on to
            # this one): the saved settings are this method's.
            GAN.compile(self, **config)
            return
        self.compile(**config)


def _own_metrics(gan):
    # The trackers, then (stateless) the directions of the quality scores,
    # so Keras's callbacks with mode="auto" know fcd is a "min".
    return list(gan.trackers) + directions.declarations(
        tuple(directions.DIRECTIONS.items())
    )
