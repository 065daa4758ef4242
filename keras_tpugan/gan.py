"""`GAN`: a `keras.Model` whose `train_step` makes the adversarial updates."""

import contextlib

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from keras_tpugan import distribute, penalties, precision
from keras_tpugan import losses as losses_module
from keras_tpugan.latents import class_labels, seeded_latents
from keras_tpugan.trainers import BackendGANStep
from keras_tpugan.trainers.base import D_LOGGED, G_LOGGED


@keras.saving.register_keras_serializable(package="keras_tpugan")
class GAN(BackendGANStep, keras.Model):
    """A generative adversarial network trained with `fit`.

    `train_step` draws the latents, trains the discriminator
    `discriminator_steps` times, trains the generator once and updates the
    metrics. It is correct on any number of replicas:

    - every loss is summed per example and divided by the GLOBAL batch, so
      the gradients that `tf.distribute` sums over the replicas are those of
      the true mean, and every logged value is all-reduced, so it is the
      per-example mean over the global batch whatever the replica count and
      the strategy;
    - the latents are a function of `(seed, step, index of the example in
      the global batch)`: reproducible, distinct across replicas, and the
      same for the same global batch on 1, 2 or 1,000 replicas. They are
      drawn outside XLA, so runs with and without XLA agree;
    - with `jit_compile=True` the per-replica gradient computation is
      compiled with XLA while the cross-replica reductions stay outside it,
      so XLA also works under a multi-GPU `MirroredStrategy` (on a TPU the
      whole step is compiled anyway).

    It runs on Keras's TensorFlow backend (under a `tf.distribute`
    strategy) and on its JAX backend (under a
    `keras.distribution.DataParallel`, where the whole step is compiled
    with `jax.jit` and sees the global batch sharded over the devices); the
    objectives are shared: `keras_tpugan.trainers.base.GANStep` holds them
    with the contract between the GAN and its step, and
    `keras_tpugan.trainers` one step per backend. Build and compile it
    inside the scope of `keras_tpugan.distribute.get_strategy()`, which
    returns the right one.

    Args:
        generator: A `keras.Model` from latents (and labels, when
            `num_classes` is set) to images in [-1, 1].
        discriminator: A `keras.Model` from images (and labels) to one logit
            per image.
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
        **kwargs,
    ):
        super().__init__(**kwargs)
        _check_networks(generator, discriminator, latent_dim, num_classes)
        if int(discriminator_steps) < 1:
            raise ValueError(
                "Expected `discriminator_steps` >= 1. Received: "
                f"discriminator_steps={discriminator_steps}."
            )
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
        # The keras.distribution in force (JAX); TensorFlow's strategy is
        # captured by keras.Model itself.
        self._distribution = keras.distribution.distribution()
        if ema_decay is not None and not 0.0 < ema_decay < 1.0:
            raise ValueError(
                "Expected `ema_decay` in (0, 1) or None. Received: "
                f"ema_decay={ema_decay}."
            )
        self.ema_decay = None if ema_decay is None else float(ema_decay)
        self.ema_generator = None
        if ema_decay is not None:
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
        d_logged = D_LOGGED if gradient_penalty else D_LOGGED[:-1]
        self.trackers = [keras.metrics.Mean(name=n) for n in d_logged + G_LOGGED]
        self.built = True

    # ------------------------------------------------------------------ API

    def call(self, inputs, training=False):
        """Runs the generator: latents (or `[latents, labels]`) to images."""
        return self.generator(inputs, training=training)

    @property
    def metrics(self):
        return list(self.trackers)

    def compile(
        self,
        generator_optimizer=None,
        discriminator_optimizer=None,
        loss="non_saturating",
        jit_compile="auto",
        steps_per_execution=1,
        **kwargs,
    ):
        """Configures the GAN for training.

        Args:
            generator_optimizer: A `keras.optimizers.Optimizer` (default:
                Adam(2e-4, beta_1=0.5)).
            discriminator_optimizer: Likewise, for the discriminator.
            loss: `"non_saturating"`, `"hinge"`, `"wasserstein"`,
                `"least_squares"` or a `keras_tpugan.losses.AdversarialLoss`.
            jit_compile: `True` compiles the per-replica gradient
                computation with XLA; `"auto"` does so unless the networks
                hold synchronized batch normalization under a multi-replica
                `MirroredStrategy` (whose cross-replica reductions cannot run
                inside the per-replica XLA function). On JAX, `True` and
                `"auto"` compile the whole step with `jax.jit`.
            steps_per_execution: Steps per `tf.function` call, passed to
                Keras (keep 1 under a multi-device `MirroredStrategy`).
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
        if jit_compile not in (True, False, "auto"):
            raise ValueError(
                "Expected `jit_compile` to be True, False or 'auto'. "
                f"Received: jit_compile={jit_compile!r}."
            )
        self.adversarial_loss = losses_module.get(loss)
        self.generator_optimizer = self._prepare_optimizer(generator_optimizer)
        self.discriminator_optimizer = self._prepare_optimizer(discriminator_optimizer)
        # `fit` builds only `self.optimizer`: build both here, in the
        # strategy's scope, so their variables are not created while tracing.
        with self.strategy_scope():
            self.generator_optimizer.build(self.generator.trainable_variables)
            self.discriminator_optimizer.build(self.discriminator.trainable_variables)
        self.compile_step(jit_compile, steps_per_execution, **kwargs)
        self._gan_compile_config = {
            "loss": keras.saving.serialize_keras_object(self.adversarial_loss),
            "jit_compile": jit_compile,
            "steps_per_execution": steps_per_execution,
        }

    def fit(self, x=None, y=None, batch_size=None, epochs=1, **kwargs):
        """Trains the GAN; see `keras.Model.fit`.

        Before training it checks what it can of the input: the dataset is
        not empty, and the global batch splits evenly over the replicas. For
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
        self._check_fit_input(x, batch_size)
        if isinstance(x, tf.data.Dataset):
            kwargs.setdefault("shuffle", False)  # the pipeline shuffles
        epochs_begun = _DataEpoch()
        kwargs["callbacks"] = _ordered_callbacks(kwargs.get("callbacks"), epochs_begun)
        # On JAX, Keras shards the data over the distribution in force: use
        # the GAN's own when `fit` is called outside its scope.
        scope = contextlib.nullcontext()
        if keras.distribution.distribution() is None:
            scope = distribute.scope(self._distribution)
        try:
            with scope:
                history = super().fit(
                    x, y, batch_size=batch_size, epochs=epochs, **kwargs
                )
        except UnboundLocalError as e:
            # Keras's JAX `fit` fails so when an epoch yields no batch (its
            # `logs` are never set).
            if "'logs'" not in str(e):
                raise
            raise _empty_dataset_error() from e
        if epochs_begun.count and not self._images_seen_this_epoch():
            raise _empty_dataset_error()
        return history

    def _images_seen_this_epoch(self):
        # The trackers weigh each step by its global batch.
        return float(ops.convert_to_numpy(self.trackers[0].count))

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
                    keras.ops.cast(generator(inputs, training=False), "float32")
                )
            )
        return np.concatenate(out, axis=0)

    # ------------------------------------------------------------- helpers

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
        return class_labels(labels, n, self.num_classes)

    def _prepare_optimizer(self, optimizer):
        if optimizer is None:
            optimizer = keras.optimizers.Adam(2e-4, beta_1=0.5)
        if isinstance(optimizer, (str, dict)):
            optimizer = keras.optimizers.get(optimizer)
        needs_scaling = precision.needs_loss_scaling(
            self.generator.dtype_policy
        ) or precision.needs_loss_scaling(self.discriminator.dtype_policy)
        # Keras scales only `self.optimizer` automatically: wrap both here.
        if needs_scaling and not isinstance(
            optimizer, keras.optimizers.LossScaleOptimizer
        ):
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        return optimizer

    def _check_fit_input(self, x, batch_size):
        replicas = distribute.num_replicas(self.strategy)
        if isinstance(x, tf.data.Dataset):
            if int(x.cardinality()) == 0:
                raise ValueError(
                    "Expected a dataset that yields batches; this one is "
                    "empty (cardinality 0). Check its size against the batch "
                    "size: batches are dropped when `drop_remainder=True`."
                )
            spec = tf.nest.flatten(x.element_spec)[0]
            global_batch = spec.shape[0] if spec.shape.rank else None
            if global_batch is None and replicas > 1:
                raise ValueError(
                    f"Expected a dataset with a fixed global batch size under "
                    f"{replicas} replicas. Received: element_spec "
                    f"{x.element_spec} (unknown batch size). Batch it with "
                    "`drop_remainder=True`, as `keras_tpugan.data.load_images` "
                    "does."
                )
        else:
            global_batch = batch_size or 32
        if global_batch is not None:
            distribute.check_global_batch(global_batch, self.strategy)

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
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for key in ("generator", "discriminator"):
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
        self.compile(**config)


def _empty_dataset_error():
    return ValueError(
        "Expected the dataset to yield at least one batch, but it yielded "
        "nothing: check its size against the batch size (batches are "
        "dropped when `drop_remainder=True`)."
    )


def _ordered_callbacks(callbacks, first):
    """`callbacks` (a list or a `CallbackList`) ordered to run as `fit` needs.

    `first`, then the callbacks that add to the logs (a `log_order`, lowest
    first), then the others in their given order.
    """

    def ordered(items):
        producers = [c for c in items if getattr(c, "log_order", None) is not None]
        producers.sort(key=lambda c: c.log_order)
        return [first, *producers, *(c for c in items if c not in producers)]

    if isinstance(callbacks, keras.callbacks.CallbackList):
        # With History, which `fit` returns (Keras adds it to plain lists only).
        merged = keras.callbacks.CallbackList(
            ordered(callbacks.callbacks), add_history=True, model=callbacks.model
        )
        merged.set_params(callbacks.params)
        return merged
    return ordered(list(callbacks or []))


class _DataEpoch(keras.callbacks.Callback):
    """Keys the shuffle order of `load_images` data on the epoch; counts epochs.

    `data.set_epoch` is public: a loop that iterates the data by hand calls
    it itself.
    """

    def __init__(self):
        super().__init__()
        self.count = 0

    def on_epoch_begin(self, epoch, logs=None):
        from keras_tpugan import data

        data.set_epoch(epoch)
        self.count += 1


def _check_networks(generator, discriminator, latent_dim, num_classes):
    g_inputs = _defined_inputs("generator", generator, f"keras.Input(({latent_dim},))")
    d_inputs = _defined_inputs(
        "discriminator", discriminator, "keras.Input(image_shape)"
    )
    _check_logits(discriminator)
    expected = 1 if num_classes is None else 2
    for name, inputs, what in (
        ("generator", g_inputs, "[latents, labels]"),
        ("discriminator", d_inputs, "[images, labels]"),
    ):
        if inputs is not None and len(inputs) != expected:
            raise ValueError(
                f"Expected a {name} with {expected} input(s) "
                f"({what if expected == 2 else 'no labels'}) for "
                f"num_classes={num_classes}. Received: a {name} with "
                f"{len(inputs)} inputs. "
                + (
                    "Set num_classes for a conditional model."
                    if expected == 1
                    else "Build it with num_classes (models.dcgan_*)."
                )
            )
    if g_inputs is not None and g_inputs[0].shape[-1] != latent_dim:
        raise ValueError(
            f"Expected latent_dim to match the generator's input size "
            f"{g_inputs[0].shape[-1]}. Received: latent_dim={latent_dim}."
        )


def _defined_inputs(name, model, first_layer):
    try:
        return model.inputs
    except AttributeError as e:
        raise ValueError(
            f"Expected a {name} with defined inputs. Received: "
            f"{type(model).__name__} {model.name!r}, which has none yet ({e}). "
            f"Start it with `{first_layer}` (for a Sequential model), or build "
            "it as a functional model."
        ) from e


def _check_logits(discriminator):
    last = discriminator.layers[-1] if discriminator.layers else None
    activation = getattr(getattr(last, "activation", None), "__name__", None)
    if activation in ("sigmoid", "softmax"):
        raise ValueError(
            "Expected a discriminator that outputs logits (no final "
            f"activation). Received: its last layer {last.name!r} applies "
            f"{activation}. Remove that activation: the losses apply the "
            "sigmoid themselves, in float32."
        )
