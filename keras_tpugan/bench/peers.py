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

from keras_tpugan import distribute
from keras_tpugan.bench import flops, tables, throughput
from keras_tpugan.bench.peer_loops import (
    LATENT_DIM,
    FitRunner,
    JaxLoop,
    KerasIOGAN,
    TutorialLoop,
)
from keras_tpugan.runs import results
from keras_tpugan.runs.config import TrainConfig
from keras_tpugan.tf_import import tf

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


def build_runner(kind, policy, xla, spe, update, batch, images, norm, width):
    """A warmed-up runner of one mode (traced and compiled)."""
    keras.config.set_dtype_policy(policy)
    if keras.backend.backend() == "jax":  # no TensorFlow needed
        dataset = throughput.RepeatedBatch(images)
        iterator = itertools.repeat(ops.convert_to_tensor(images))
    else:
        dataset = tf.data.Dataset.from_tensors(images).cache().repeat()
        iterator = iter(dataset)
    if kind == "tutorial" and keras.backend.backend() == "jax":
        runner = JaxLoop(norm, width, batch)
    elif kind == "tutorial":
        runner = TutorialLoop(norm, width, xla, batch)
    elif kind == "keras-io":
        model = KerasIOGAN(norm, width)
        model.compile(jit_compile=xla)
        runner = FitRunner(model, dataset)
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
        runner = FitRunner(*throughput.gan_on_one_batch(config, one_device))
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
    printer(f"device: {flops.device_and_versions()}, Keras {keras.__version__}")
    rows = []
    for batch in batch_sizes:
        images = noise_batch(batch)
        n = steps or max(8, -(-2048 // batch // 8) * 8)
        runners = {
            name: build_runner(
                kind, policy, xla, spe, update, batch, images, norm, width
            )
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
