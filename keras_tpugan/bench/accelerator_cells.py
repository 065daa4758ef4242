"""One cell of the accelerator benchmark: a GAN of one of its models on one
batch, timed, with the FLOP/s it achieves against the device's peaks."""

import time

import keras
import numpy as np

from keras_tpugan.bench import flops, throughput
from keras_tpugan.runs.config import TrainConfig
from keras_tpugan.runs.prepared_run import build_gan

MODELS = {
    # The demo preset's networks, on MNIST's shape.
    "dcgan-28x28x1": {"image_shape": (28, 28, 1), "width": 64, "latent_dim": 64},
    # A 64x64 RGB DCGAN (CelebA's shape).
    "dcgan-64x64x3": {"image_shape": (64, 64, 3), "width": 128, "latent_dim": 128},
}
# A timed fit lasts at least this long (steps are added until it does), so
# that `fit`'s fixed cost per call stays small against the steps on a fast
# device.
MIN_TIMED_SECONDS = 0.5


def one_batch_gan(model, policy, batch_size, strategy, smoke=False, spe=1):
    """A compiled GAN of one of the benchmark's models, and one batch repeated.

    Sets the global dtype policy to `policy` (the caller restores it).

    Args:
        model: A key of `MODELS`.
        policy: The dtype policy, `"float32"` or `"mixed_bfloat16"`.
        batch_size: The global batch.
        strategy: The distribution it is built under.
        smoke: Small networks (width 16, 8 latents), for a CPU.
        spe: `steps_per_execution`.

    Returns:
        `(gan, dataset)`: the GAN, compiled with XLA, and a
        `throughput.RepeatedBatch` of uniform images in [-1, 1].
    """
    spec = MODELS[model]
    width = 16 if smoke else spec["width"]
    config = TrainConfig(
        latent_dim=8 if smoke else spec["latent_dim"],
        width=width,
        batch_size=batch_size,
        precision=policy,
        jit_compile=True,
        steps_per_execution=spe,
    )
    keras.mixed_precision.set_global_policy(policy)
    with strategy.scope():
        gan = build_gan(config, spec["image_shape"])
    images = np.random.default_rng(0).uniform(-1, 1, (batch_size, *spec["image_shape"]))
    return gan, throughput.RepeatedBatch(images.astype("float32"))


def timed_images_per_sec(gan, ds, steps, repeats, min_seconds=0.0):
    """Median images/s of `repeats` fits, after two compiling fits.

    Each timed fit runs `steps` steps, or more (a multiple of
    `steps_per_execution`) where `steps` would take under `min_seconds`.
    """
    spe = gan.steps_per_execution
    for _ in range(2):  # trace and compile (JAX compiles again for the shardings)
        gan.fit(ds, epochs=1, steps_per_epoch=2 * spe, verbose=0)
    batch = len(ds.batch)

    def seconds_for(count):
        start = time.perf_counter()
        gan.fit(ds, epochs=1, steps_per_epoch=count, verbose=0)
        return time.perf_counter() - start

    first = seconds_for(steps)
    if min_seconds and first < min_seconds:
        steps = int(np.ceil(steps * min_seconds / max(first, 1e-6) / spe)) * spe
    rates = [steps * batch / seconds_for(steps) for _ in range(repeats)]
    return float(np.median(rates))


def measure_cell(part, model, policy, batch, strategy, smoke, peaks, spe=1):
    """One row of the benchmark: images/s and FLOP/s of one GAN and batch."""
    steps = 4 if smoke else 20
    gan, ds = one_batch_gan(model, policy, batch, strategy, smoke, spe)
    steps = max(steps // spe, 1) * spe
    rate = timed_images_per_sec(
        gan,
        ds,
        steps,
        repeats=1 if smoke else 3,
        min_seconds=0.0 if smoke else MIN_TIMED_SECONDS,
    )
    per_image = 4 * flops.forward_flops(gan.generator) + 8 * flops.forward_flops(
        gan.discriminator
    )
    achieved = rate * per_image
    return {
        **cell_key(part, model, policy, batch, spe),
        "images_per_sec": round(rate, 1),
        "tflops_per_sec": float(f"{achieved / 1e12:.4g}"),
        "mfu_vs_chip_peak": (
            None if peaks["chip"] is None else float(f"{achieved / peaks['chip']:.3g}")
        ),
        "mfu_vs_matmul": float(f"{achieved / peaks['matmul']:.3g}"),
    }


def cell_key(part, model, policy, batch, spe):
    """The fields that name a row."""
    return {
        "part": part,
        "model": model,
        "precision": policy,
        "batch_size": batch,
        "steps_per_execution": spe,
    }


def skipped(part, model, policy, batch, spe=1, why="time budget"):
    """A row that was not measured, saying why."""
    return {**cell_key(part, model, policy, batch, spe), "note": f"skipped: {why}"}
