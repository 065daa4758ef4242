"""keras_tpugan against what users write instead: images/s, same models, one run.

Two peers, each written here in the usual form of its source and trained on
the same networks (`models.dcgan_generator` / `dcgan_discriminator`), the
same non-saturating loss, Adam(2e-4, beta_1=0.5) and the same batch:

- `tutorial`: the TensorFlow DCGAN tutorial's loop, one joint step under
  `tf.function` (one generator forward shared by both losses, both
  optimizers applied in the same step), driven by a Python loop. On JAX
  the same step as the keras-io guide "Writing a training loop from
  scratch in JAX" writes one: `stateless_call`, one `jax.vjp` for both
  losses and `optimizer.stateless_apply` under `jax.jit`;
- `keras-io`: the keras-io "GAN overriding train_step" pattern, a
  `keras.Model` whose `train_step` trains D on real and generated images
  concatenated, then G, through `fit`. It is written with
  `tf.GradientTape` and has no JAX form, so it runs on TensorFlow only;

beside keras_tpugan's `GAN` in float32 (with and without XLA) and
mixed_bfloat16, with the default alternating update and with
`update="simultaneous"` (the tutorial's step), and with
`steps_per_execution=8`, on one device (with and without XLA on
TensorFlow; JAX always compiles, so its modes are the XLA ones). Every
mode is
built and compiled first; then rounds go through the modes in turn
(interleaved, so a slow spell of a shared machine hits them all), each
timing `steps` steps on one cached batch; a mode's figure is its best round.

Used by `keras-tpugan bench --peers` and `benchmarks/peers.py`.
"""

import itertools
import time

import keras
import numpy as np
from keras import ops

from keras_tpugan import distribute, models
from keras_tpugan.bench import tables, throughput
from keras_tpugan.runs import results
from keras_tpugan.runs.config import TrainConfig
from keras_tpugan.tf_import import tf

LATENT_DIM = 128
WIDTH = 128
# Modes: (name, builder key, precision, XLA, steps_per_execution, update).
MODES = (
    ("tutorial", "tutorial", "float32", False, 1, None),
    ("tutorial + XLA", "tutorial", "float32", True, 1, None),
    ("keras-io", "keras-io", "float32", False, 1, None),
    ("keras-io + XLA", "keras-io", "float32", True, 1, None),
    ("keras_tpugan float32", "keras_tpugan", "float32", False, 1, "alternating"),
    ("keras_tpugan float32 + XLA", "keras_tpugan", "float32", True, 1, "alternating"),
    (
        "keras_tpugan float32, 8 steps/execution",
        "keras_tpugan",
        "float32",
        False,
        8,
        "alternating",
    ),
    (
        "keras_tpugan float32 + XLA, 8 steps/execution",
        "keras_tpugan",
        "float32",
        True,
        8,
        "alternating",
    ),
    (
        "keras_tpugan mixed_bfloat16 + XLA",
        "keras_tpugan",
        "mixed_bfloat16",
        True,
        1,
        "alternating",
    ),
    (
        "keras_tpugan simultaneous float32",
        "keras_tpugan",
        "float32",
        False,
        1,
        "simultaneous",
    ),
    (
        "keras_tpugan simultaneous float32, 8 steps/execution",
        "keras_tpugan",
        "float32",
        False,
        8,
        "simultaneous",
    ),
    (
        "keras_tpugan simultaneous float32 + XLA",
        "keras_tpugan",
        "float32",
        True,
        1,
        "simultaneous",
    ),
    (
        "keras_tpugan simultaneous float32 + XLA, 8 steps/execution",
        "keras_tpugan",
        "float32",
        True,
        8,
        "simultaneous",
    ),
)
PEERS = ("tutorial", "keras-io")


def backend_modes():
    """The names of `MODES` that run on the current backend.

    Returns:
        A list: every mode on TensorFlow; on JAX, the compiled modes less the
        keras-io pattern (a `tf.GradientTape` program).

    Example:

    >>> "keras-io" in backend_modes()  # on TensorFlow
    True
    """
    if keras.backend.backend() != "jax":
        return [m[0] for m in MODES]
    return [m[0] for m in MODES if m[3] and m[1] != "keras-io"]


def _networks(norm, width):
    generator = models.dcgan_generator(latent_dim=LATENT_DIM, width=width, norm=norm)
    return generator, models.dcgan_discriminator(width=width)


def _adam():
    return keras.optimizers.Adam(2e-4, beta_1=0.5)


def _bce(labels, logits):
    return tf.reduce_mean(
        tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
    )


class _TutorialLoop:
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


def chosen_modes(modes=None):
    """The `MODES` entries named in `modes` (None: all of `backend_modes()`).

    Args:
        modes: Mode names, or None.

    Returns:
        A list of `MODES` tuples, in `MODES` order.

    Raises:
        ValueError: For a name that is not a mode of this backend.
    """
    known = backend_modes()
    if modes is not None and (unknown := sorted(set(modes) - set(known))):
        raise ValueError(
            f"Expected modes among {known} on the {keras.backend.backend()} "
            f"backend. Received: unknown modes {unknown}. The keras-io "
            "pattern and the modes without XLA run on TensorFlow only."
        )
    return [m for m in MODES if m[0] in (known if modes is None else modes)]


def noise_batch(batch):
    """One batch of uniform noise images in [-1, 1], the same for every mode.

    A TensorFlow tensor on TensorFlow, a numpy array on JAX.
    """
    images = np.random.default_rng(0).uniform(-1, 1, (batch, 28, 28, 1))
    images = images.astype("float32")
    return tf.constant(images) if keras.backend.backend() == "tensorflow" else images


class _JaxLoop:
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


class _KerasIOGAN(keras.Model):
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


class _FitRunner:
    """Times `fit` of a Keras model on the cached batch."""

    def __init__(self, model, dataset):
        self.model, self.dataset = model, dataset

    def run(self, iterator, steps):
        del iterator
        self.model.fit(self.dataset, epochs=1, steps_per_epoch=steps, verbose=0)


def _build(kind, policy, xla, spe, update, batch, images, norm, width):
    """A warmed-up runner of one mode (traced and compiled)."""
    keras.config.set_dtype_policy(policy)
    if keras.backend.backend() == "jax":  # no TensorFlow needed
        dataset = throughput.RepeatedBatch(images)
        iterator = itertools.repeat(ops.convert_to_tensor(images))
    else:
        dataset = tf.data.Dataset.from_tensors(images).cache().repeat()
        iterator = iter(dataset)
    if kind == "tutorial" and keras.backend.backend() == "jax":
        runner = _JaxLoop(norm, width, batch)
    elif kind == "tutorial":
        runner = _TutorialLoop(norm, width, xla, batch)
    elif kind == "keras-io":
        model = _KerasIOGAN(norm, width)
        model.compile(jit_compile=xla)
        runner = _FitRunner(model, dataset)
    else:
        config = TrainConfig(
            precision=policy,
            jit_compile=xla,
            batch_size=batch,
            width=width,
            latent_dim=LATENT_DIM,
            norm=norm,
            update=update,
            steps_per_execution=spe,
        )
        one_device = distribute.get_strategy("auto", num_replicas=1)
        runner = _FitRunner(*throughput.gan_on_one_batch(config, one_device))
    for _ in range(2):  # trace and compile
        runner.run(iterator, max(2, spe))
    keras.config.set_dtype_policy("float32")
    return runner, iterator


def peers_table(
    batch_sizes=(16, 64, 128, 512),
    steps=None,
    rounds=3,
    norm="layer",
    width=WIDTH,
    modes=None,
    csv_path=None,
    printer=print,
):
    """Measures images/s of the peers and keras_tpugan's modes, interleaved.

    Args:
        batch_sizes: Batch sizes (one device).
        steps: Steps per timing (default: 2,048 images' worth, at least 8,
            a multiple of 8 for `steps_per_execution`).
        rounds: Interleaved rounds; each mode's figure is its best.
        norm: The generator's normalization, the same in every mode.
        width: The networks' width (`models.dcgan_generator`'s).
        modes: Names from `MODES` to run (default: all of `backend_modes()`).
        csv_path: If set, also write the rows there as CSV.
        printer: Called with each line of output (None: print nothing).

    Returns:
        The rows: dicts with mode, batch_size, images_per_sec and the ratios
        to the best tutorial and keras-io modes of the same batch.

    Example:

    ```python
    rows = peers_table(batch_sizes=(16,), rounds=1, modes=["keras-io"])
    ```
    """
    printer = printer or (lambda line: None)
    chosen = chosen_modes(modes)
    printer(f"device: {throughput._device_and_versions()}, Keras {keras.__version__}")
    rows = []
    for batch in batch_sizes:
        images = noise_batch(batch)
        n = steps or max(8, -(-2048 // batch // 8) * 8)
        runners = {
            name: _build(kind, policy, xla, spe, update, batch, images, norm, width)
            for name, kind, policy, xla, spe, update in chosen
        }
        best = dict.fromkeys(runners, 0.0)
        for _ in range(rounds):
            for name, (runner, iterator) in runners.items():
                start = time.perf_counter()
                runner.run(iterator, n)
                rate = n * batch / (time.perf_counter() - start)
                best[name] = max(best[name], rate)
        rows += _rows(best, batch)
        for row in rows[-len(best) :]:
            printer(str(row))
    for line in tables.peers_table(rows):
        printer(line)
    if csv_path:
        results.write_csv(rows, csv_path)
    return rows


def _rows(best, batch):
    def best_of(prefix):
        rates = [r for name, r in best.items() if name.startswith(prefix)]
        return max(rates) if rates else None

    tutorial, keras_io = best_of("tutorial"), best_of("keras-io")
    rows = []
    for name, rate in best.items():
        rows.append(
            {
                "mode": name,
                "batch_size": batch,
                "images_per_sec": round(rate, 1),
                "vs_best_tutorial": round(rate / tutorial, 2) if tutorial else None,
                "vs_best_keras_io": round(rate / keras_io, 2) if keras_io else None,
            }
        )
    return rows
