"""The peers `bench.peers` measures, written as their sources write them.

`TutorialLoop`: the TensorFlow DCGAN tutorial's joint step under
`tf.function`; `JaxLoop`: the same step as a JAX training loop
(`stateless_call`, one `jax.vjp`, `stateless_apply` under `jax.jit`);
`KerasIOGAN`: keras-io's "GAN overriding train_step" model; `FitRunner`
times `fit` of a Keras model. Each has `run(iterator, steps)`.
"""

import keras
from keras import ops

from keras_tpugan import models
from keras_tpugan.tf_import import tf

LATENT_DIM = 128


def _networks(norm, width):
    generator = models.dcgan_generator(latent_dim=LATENT_DIM, width=width, norm=norm)
    return generator, models.dcgan_discriminator(width=width)


def _adam():
    return keras.optimizers.Adam(2e-4, beta_1=0.5)


def _bce(labels, logits):
    return tf.reduce_mean(
        tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
    )


class TutorialLoop:
    """The TF DCGAN tutorial's training step, on the given networks."""

    def __init__(self, norm, width, xla, batch):
        self.generator, self.discriminator = _networks(norm, width)
        self.g_opt, self.d_opt = _adam(), _adam()
        self.batch = batch
        self.step = tf.function(self._step, jit_compile=xla)

    def _step(self, images):
        noise = tf.random.normal([self.batch, LATENT_DIM])
        with tf.GradientTape() as g_tape, tf.GradientTape() as d_tape:
            fake = self.generator(noise, training=True)
            real_logits = self.discriminator(images, training=True)
            fake_logits = self.discriminator(fake, training=True)
            g_loss = _bce(tf.ones_like(fake_logits), fake_logits)
            d_loss = _bce(tf.ones_like(real_logits), real_logits) + _bce(
                tf.zeros_like(fake_logits), fake_logits
            )
        g_vars = self.generator.trainable_variables
        d_vars = self.discriminator.trainable_variables
        self.g_opt.apply(g_tape.gradient(g_loss, g_vars), g_vars)
        self.d_opt.apply(d_tape.gradient(d_loss, d_vars), d_vars)
        return d_loss, g_loss

    def run(self, iterator, steps):
        for _ in range(steps):
            losses = self.step(next(iterator))
        float(losses[0])  # wait for the last step


class JaxLoop:
    """The tutorial's joint step on JAX, as one writes a JAX training loop."""

    def __init__(self, norm, width, batch):
        import jax

        self.generator, self.discriminator = _networks(norm, width)
        self.g_opt, self.d_opt = _adam(), _adam()
        self.g_opt.build(self.generator.trainable_variables)
        self.d_opt.build(self.discriminator.trainable_variables)
        self.batch = batch
        self.state = tuple(
            [v.value for v in variables]
            for variables in (
                self.generator.trainable_variables,
                self.generator.non_trainable_variables,
                self.discriminator.trainable_variables,
                self.discriminator.non_trainable_variables,
                self.g_opt.variables,
                self.d_opt.variables,
            )
        )
        self.key = jax.random.key(0)
        self.step = jax.jit(self._step, donate_argnums=(0,))

    def _step(self, state, key, images):
        import jax

        g_vars, g_state, d_vars, d_state, g_opt, d_opt = state
        key, sub = jax.random.split(key)
        noise = jax.random.normal(sub, (self.batch, LATENT_DIM))

        def losses(g_vars, d_vars):
            fake, new_g = self.generator.stateless_call(
                g_vars, g_state, noise, training=True
            )
            real_logits, new_d = self.discriminator.stateless_call(
                d_vars, d_state, images, training=True
            )
            fake_logits, new_d = self.discriminator.stateless_call(
                d_vars, new_d, fake, training=True
            )
            g_loss = _bce_ops(ops.ones_like(fake_logits), fake_logits)
            d_loss = _bce_ops(ops.ones_like(real_logits), real_logits) + _bce_ops(
                ops.zeros_like(fake_logits), fake_logits
            )
            return (d_loss, g_loss), (new_g, new_d)

        (d_loss, g_loss), backward, (g_state, d_state) = jax.vjp(
            losses, g_vars, d_vars, has_aux=True
        )
        _, d_grads = backward((ops.ones_like(d_loss), ops.zeros_like(g_loss)))
        g_grads, _ = backward((ops.zeros_like(d_loss), ops.ones_like(g_loss)))
        g_vars, g_opt = self.g_opt.stateless_apply(g_opt, g_grads, g_vars)
        d_vars, d_opt = self.d_opt.stateless_apply(d_opt, d_grads, d_vars)
        return (g_vars, g_state, d_vars, d_state, g_opt, d_opt), key, d_loss

    def run(self, iterator, steps):
        for _ in range(steps):
            self.state, self.key, d_loss = self.step(
                self.state, self.key, next(iterator)
            )
        float(d_loss)  # wait for the last step


def _bce_ops(labels, logits):
    return ops.mean(ops.binary_crossentropy(labels, logits, from_logits=True))


class KerasIOGAN(keras.Model):
    """The keras-io "GAN overriding train_step" pattern."""

    def __init__(self, norm, width):
        super().__init__()
        self.generator, self.discriminator = _networks(norm, width)
        self.seed_generator = keras.random.SeedGenerator(0)
        self.d_loss_tracker = keras.metrics.Mean(name="d_loss")
        self.g_loss_tracker = keras.metrics.Mean(name="g_loss")

    def compile(self, jit_compile):
        super().compile(jit_compile=jit_compile)
        self.d_optimizer, self.g_optimizer = _adam(), _adam()

    @property
    def metrics(self):
        return [self.d_loss_tracker, self.g_loss_tracker]

    def train_step(self, real_images):
        batch = tf.shape(real_images)[0]
        z = keras.random.normal((batch, LATENT_DIM), seed=self.seed_generator)
        generated = self.generator(z)
        combined = tf.concat([generated, real_images], axis=0)
        labels = tf.concat([tf.zeros((batch, 1)), tf.ones((batch, 1))], axis=0)
        with tf.GradientTape() as tape:
            d_loss = _bce(labels, self.discriminator(combined))
        d_vars = self.discriminator.trainable_weights
        self.d_optimizer.apply(tape.gradient(d_loss, d_vars), d_vars)
        z = keras.random.normal((batch, LATENT_DIM), seed=self.seed_generator)
        with tf.GradientTape() as tape:
            logits = self.discriminator(self.generator(z))
            g_loss = _bce(tf.ones((batch, 1)), logits)
        g_vars = self.generator.trainable_weights
        self.g_optimizer.apply(tape.gradient(g_loss, g_vars), g_vars)
        self.d_loss_tracker.update_state(d_loss)
        self.g_loss_tracker.update_state(g_loss)
        return {m.name: m.result() for m in self.metrics}


class FitRunner:
    """Times `fit` of a Keras model on the cached batch."""

    def __init__(self, model, dataset):
        self.model, self.dataset = model, dataset

    def run(self, iterator, steps):
        del iterator
        self.model.fit(self.dataset, epochs=1, steps_per_epoch=steps, verbose=0)
