"""`GANOptimizer`: the GAN's two optimizers as the one `model.optimizer`."""

import keras


class GANOptimizer(keras.optimizers.MultiOptimizer):
    """The generator's and the discriminator's optimizers as one optimizer.

    `keras_tpugan.GAN.compile` sets `gan.optimizer` to this, on both
    backends, so that what Keras's callbacks do to `model.optimizer` reaches
    both networks:

    - `ReduceLROnPlateau` and `LearningRateScheduler` see a Keras
      `MultiOptimizer` and drive each of its `optimizers` (the generator's
      first), so a schedule `lambda epoch, lr: lr * 0.5` halves both and
      keeps their ratio;
    - `SwapEMAWeights` swaps the weights of each optimizer made with
      `use_ema=True`, and `fit` ends by writing their averages into the
      weights, as on a plain model;
    - `learning_rate` reads the generator's rate; setting it sets the
      generator's to the value and the discriminator's to the value times
      their current ratio (`discriminator rate / generator rate`), so a
      two-time-scale set-up stays two-time-scale. Set one network's rate on
      `gan.generator_optimizer` or `gan.discriminator_optimizer`;
    - `iterations` counts generator updates, that is GAN steps (what
      `TensorBoard` plots against).

    The GAN applies each optimizer at its own point of the step; this one is
    never applied. It saves nothing itself: the GAN saves its
    `generator_optimizer` and `discriminator_optimizer` (and their config)
    the same way on both backends, so checkpoints load on either. On JAX it
    also carries both optimizers' state through Keras's jitted step, which
    threads `model.optimizer.variables` only.

    Args:
        generator_optimizer: The generator's optimizer (a
            `LossScaleOptimizer` counts as the optimizer it wraps).
        discriminator_optimizer: The discriminator's optimizer.
        generator_variables: The generator's trainable variables; every
            other variable is the discriminator's.
        name: The optimizer's name.

    Example:

    ```python
    gan.compile(
        generator_optimizer=keras.optimizers.Adam(1e-4, beta_1=0.0),
        discriminator_optimizer=keras.optimizers.Adam(4e-4, beta_1=0.0),
    )
    gan.optimizer.learning_rate = 2e-4  # generator 2e-4, discriminator 8e-4
    gan.fit(ds, callbacks=[keras.callbacks.ReduceLROnPlateau("fcd")])
    ```
    """

    def __init__(
        self,
        generator_optimizer,
        discriminator_optimizer,
        generator_variables,
        name="gan_optimizer",
    ):
        if generator_optimizer is discriminator_optimizer:
            raise ValueError(
                "Expected one optimizer per network. Received: the same "
                f"optimizer object ({generator_optimizer.name!r}) for the "
                "generator and the discriminator. Pass two instances, for "
                "example `keras.optimizers.Adam(2e-4)` twice."
            )
        g_opt = _unwrapped(generator_optimizer)
        d_opt = _unwrapped(discriminator_optimizer)
        # MultiOptimizer sets its optimizers' loss-scale factor to its own;
        # each network keeps the one it was given.
        factors = g_opt.loss_scale_factor, d_opt.loss_scale_factor
        super().__init__(_NetworkMap(g_opt, d_opt, generator_variables), name=name)
        g_opt.loss_scale_factor, d_opt.loss_scale_factor = factors

    @property
    def learning_rate(self):
        return self.optimizers[0].learning_rate

    @learning_rate.setter
    def learning_rate(self, value):
        g_opt, d_opt = self.optimizers
        g_rate = float(keras.ops.convert_to_numpy(g_opt.learning_rate))
        d_rate = float(keras.ops.convert_to_numpy(d_opt.learning_rate))
        ratio = d_rate / g_rate if g_rate else 1.0
        g_opt.learning_rate = value
        d_opt.learning_rate = float(value) * ratio

    @property
    def iterations(self):
        return self.optimizers[0].iterations

    def get_config(self):
        return {
            "generator_optimizer": keras.saving.serialize_keras_object(
                self.optimizers[0]
            ),
            "discriminator_optimizer": keras.saving.serialize_keras_object(
                self.optimizers[1]
            ),
            "name": self.name,
        }

    @classmethod
    def from_config(cls, config, custom_objects=None):
        raise NotImplementedError(
            "A GANOptimizer is made by `GAN.compile` from the GAN's two "
            "optimizers, which the GAN saves itself; rebuild it by compiling "
            "the GAN."
        )

    def save_own_variables(self, store):
        pass  # saved by the GAN as its two optimizers

    def load_own_variables(self, store):
        pass


class _NetworkMap(keras.optimizers.OptimizerMap):
    """The generator's optimizer for its variables (known by identity, not
    by path: two networks may name their layers alike), the
    discriminator's for the rest. `MultiOptimizer` lists the mapped
    optimizer first, then the default: the generator's, then the
    discriminator's, the order Keras's callbacks report in."""

    def __init__(self, generator_optimizer, discriminator_optimizer, variables):
        super().__init__(
            default_optimizer=discriminator_optimizer,
            optimizer_map={"generator": generator_optimizer},
        )
        self.generator_optimizer = generator_optimizer
        self.generator_ids = {id(v) for v in variables}

    def __call__(self, variable):
        if id(variable) in self.generator_ids:
            return self.generator_optimizer
        return self.default_optimizer


def _unwrapped(optimizer):
    # A MultiOptimizer cannot hold a LossScaleOptimizer; the GAN scales its
    # losses itself with the wrapper it keeps as `generator_optimizer`.
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return optimizer.inner_optimizer
    return optimizer
