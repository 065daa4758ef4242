"""The accelerator benchmark: images/s, model FLOP utilisation and the seed's study.

One prepared run, on whatever JAX devices the process finds (TPU cores,
GPUs, or the CPU for `smoke=True`), within a time budget that each part
has a share of (`BUDGET_SHARES`), in this order:

1. **Throughput.** For the demo DCGAN (28x28x1) and a 64x64 RGB DCGAN,
   float32 and mixed_bfloat16, XLA on, global batch 64, 128, 256 and 512:
   images/s, and model FLOP utilisation: the FLOPs of a training step
   counted from the networks' layers (`flops.forward_flops`: 4 G + 8 D
   forward FLOPs per image, a lower bound) per second, against the chip's
   dense bf16 peak (`chips.CHIP_PEAK_TFLOPS`, vendor figures, when the chip is
   known) and against a large bf16 matmul measured in the same run. Each
   timed fit runs for at least `MIN_TIMED_SECONDS`.
2. **steps_per_execution**: the demo DCGAN, bfloat16, batch 256, with 1, 4
   and 16 steps per call.
3. **The seed's study**: MNIST (TFDS when on disk, else the offline
   subset), batch 64, 512, 128 and 256, bfloat16 + XLA: seconds per epoch
   of training steps, the fit's whole time (with compilation, validation,
   scoring, backups and grids), and the steps, images and seconds to a
   target FCD.
4. **The largest batch** per model and precision: doubling from 1,024
   until the device runs out of memory (or the budget does).
5. **The standard FID's cost**: images/s through the FID network
   (`metrics.FIDInception.stand_in`: the real network's computation with
   weights of its shapes, since the 87 MB weights file need not be on the
   device machine), 32x32 RGB images, batch 50 and 200, and the seconds
   10,000 and 50,000 images would take.
6. **The input path**: images/s that `EpochBatches` (what `load_images`
   gives on JAX) gathers and scales on this host, for each model's image
   shape at batch 256, to compare with the training images/s above (the
   throughput cells train on one repeated batch, so they do not include
   it).

It writes `accelerator.csv` (every row) and `accelerator.md` (the tables)
under `out_dir`. `benchmarks/accelerator.py` and `keras-tpugan bench
--accelerator` call `run_benchmark`.
"""

import dataclasses
import os
import platform
import time

import keras
import numpy as np

from keras_tpugan import distribute
from keras_tpugan.bench import flops, tables
from keras_tpugan.bench.accelerator_cells import (
    MODELS,
    measure_cell,
    skipped,
)
from keras_tpugan.bench.chips import chip_peak_tflops
from keras_tpugan.data.epoch_batches import EpochBatches
from keras_tpugan.runs.config import TrainConfig

BATCH_SIZES = (64, 128, 256, 512)
# The ends of the seed's range first: if the budget runs out, the time cut
# from 64 to 512 is measured.
STUDY_BATCH_SIZES = (64, 512, 128, 256)
# Epochs per study run: the seed's 30 do not fit a budget of minutes, but at
# batch 64 on MNIST these give the FCD a chance to reach its target.
STUDY_EPOCHS = 10
# Seconds of whole batches each FID cell times, after the batch that compiles.
FID_TIMED_SECONDS = 2.0
# Each part's share of the time budget, in the order the parts run. A part
# stops starting cells at the start plus its share and the shares before it,
# so the time a part leaves unused goes to the next; the search for the
# largest batch (the least needed) comes last. The input path runs whatever
# is left (seconds on the host).
BUDGET_SHARES = (
    ("throughput", 0.35),
    ("steps_per_execution", 0.10),
    ("study", 0.40),
    ("fid", 0.05),
    ("largest", 0.10),
)
FIELDS = (
    "part",
    "model",
    "precision",
    "batch_size",
    "steps_per_execution",
    "images_per_sec",
    "tflops_per_sec",
    "mfu_vs_chip_peak",
    "mfu_vs_matmul",
    "first_epoch_seconds",
    "seconds_per_epoch",
    "epochs",
    "final_fcd",
    "target_fcd",
    "steps_to_target",
    "images_to_target",
    "seconds_to_target",
    "fit_seconds",
    "note",
)


def run_benchmark(out_dir, smoke=False, budget_seconds=480.0, printer=print):
    """Runs the six parts on the JAX devices of this process.

    Args:
        out_dir: Folder for `accelerator.csv` and `accelerator.md`.
        smoke: A run of about a minute on a CPU: small networks in float32
            only, batch 8, a few steps, steps_per_execution 1 and 2, one
            study epoch at batch 64, XLA's CPU code generation at its lowest
            level (when JAX has not started yet). It checks the benchmark,
            not the machine.
        budget_seconds: Cells that would start after this much time are
            skipped (and listed as skipped); each part stops starting cells
            at the end of its share (`BUDGET_SHARES`).
        printer: Called with each line of output.

    Returns:
        The rows written to the CSV (dicts with `FIELDS`).

    Example:

    ```python
    rows = run_benchmark("runs/accelerator", smoke=True)
    ```
    """
    if keras.backend.backend() != "jax":
        raise ValueError(
            "Expected the JAX backend for the accelerator benchmark. Received: "
            f"KERAS_BACKEND={keras.backend.backend()!r}. Run it with "
            "KERAS_BACKEND=jax (benchmarks/accelerator.py sets it)."
        )
    if smoke:
        # XLA's CPU code generation at its lowest level (read when JAX starts
        # its CPU platform): compiling is most of a smoke run's time.
        flags = os.environ.get("XLA_FLAGS", "")
        if "xla_backend_optimization_level" not in flags:
            os.environ["XLA_FLAGS"] = f"{flags} --xla_backend_optimization_level=0"
    import jax

    started = time.perf_counter()
    deadlines, share = {}, 0.0
    for part, fraction in BUDGET_SHARES:
        share += fraction
        deadlines[part] = started + share * budget_seconds
    os.makedirs(out_dir, exist_ok=True)
    devices = jax.devices()
    kind = devices[0].device_kind
    peak = chip_peak_tflops(kind)
    matmul = flops.matmul_flops_per_sec("bfloat16", n=512 if smoke else 8192)
    header = [
        f"devices: {len(devices)} x {kind} ({devices[0].platform}); JAX "
        f"{jax.__version__}, Keras {keras.__version__}, Python "
        f"{platform.python_version()}; {time.strftime('%Y-%m-%d %H:%M %Z')}",
        "chip bf16 peak: "
        + (f"{peak:g} TFLOP/s per device" if peak else "unknown chip")
        + f"; measured bf16 matmul: {matmul / 1e12:.3g} TFLOP/s per device",
    ]
    for line in header:
        printer(line)
    peaks = {"chip": None if peak is None else peak * 1e12 * len(devices)}
    peaks["matmul"] = matmul * len(devices)
    rows = []

    def record(row):
        row = {field: row.get(field) for field in FIELDS}
        rows.append(row)
        printer(", ".join(f"{k}={v}" for k, v in row.items() if v is not None))

    strategy = distribute.get_strategy("auto")
    for row in _throughput(strategy, smoke, deadlines["throughput"], peaks):
        record(row)
    for row in _steps_per_execution(
        strategy, smoke, deadlines["steps_per_execution"], peaks
    ):
        record(row)
    for row in _study(out_dir, smoke, deadlines["study"]):
        record(row)
    for row in _fid(smoke, deadlines["fid"]):
        record(row)
    if not smoke:
        for row in _largest(strategy, deadlines["largest"], peaks):
            record(row)
    for row in _input_path(smoke):
        record(row)
    printer(f"total: {time.perf_counter() - started:.0f} s")
    tables.write_accelerator_results(rows, header, out_dir, printer)
    return rows


def _throughput(strategy, smoke, deadline, peaks):
    # The ends of the batch range first, for every model and precision, so
    # that a short budget still compares them all (the tables sort the rows).
    batches = (8,) if smoke else (BATCH_SIZES[-1], BATCH_SIZES[0], *BATCH_SIZES[1:-1])
    for batch in batches:
        for model in MODELS:
            for policy in ("float32",) if smoke else ("float32", "mixed_bfloat16"):
                if time.perf_counter() > deadline:
                    yield skipped("throughput", model, policy, batch)
                    continue
                yield measure_cell(
                    "throughput", model, policy, batch, strategy, smoke, peaks
                )
    keras.mixed_precision.set_global_policy("float32")


def _largest(strategy, deadline, peaks):
    """The largest batch that fits, per model and precision: doubling from
    twice the largest of `BATCH_SIZES` until the device runs out of memory."""
    for model in MODELS:
        for policy in ("float32", "mixed_bfloat16"):
            batch = 2 * BATCH_SIZES[-1]
            while batch <= 65_536:
                if time.perf_counter() > deadline:
                    yield skipped("largest", model, policy, batch)
                    break
                try:
                    row = measure_cell(
                        "largest", model, policy, batch, strategy, False, peaks
                    )
                except Exception as e:  # noqa: BLE001 - out of memory ends the search
                    if not distribute.is_out_of_memory(e):
                        raise
                    yield {
                        **skipped("largest", model, policy, batch),
                        "note": "out of memory",
                    }
                    break
                yield row
                batch *= 2
    keras.mixed_precision.set_global_policy("float32")


def _steps_per_execution(strategy, smoke, deadline, peaks):
    model = "dcgan-28x28x1"
    policy = "float32" if smoke else "mixed_bfloat16"
    batch = 8 if smoke else 256
    for spe in (1, 2) if smoke else (1, 4, 16):
        if time.perf_counter() > deadline:
            yield skipped("steps_per_execution", model, policy, batch, spe)
            continue
        yield measure_cell(
            "steps_per_execution", model, policy, batch, strategy, smoke, peaks, spe
        )
    keras.mixed_precision.set_global_policy("float32")


def _study(out_dir, smoke, deadline):
    """The seed's study: `train` per batch size, bfloat16 + XLA."""
    from keras_tpugan.runs.train import train

    base = TrainConfig.preset("mnist-tpu")
    base = dataclasses.replace(
        base,
        source="auto",
        validation_split=None,
        target_fcd=None if smoke else 60.0,
        quality_every=1,
    )
    if smoke:
        base = dataclasses.replace(
            base,
            width=8,
            latent_dim=8,
            epochs=1,
            quality_images=64,
            precision="float32",
            source="offline",  # no TFDS probe (which imports TensorFlow)
        )
    else:
        base = dataclasses.replace(base, epochs=STUDY_EPOCHS)
    for batch in (64,) if smoke else STUDY_BATCH_SIZES:
        if time.perf_counter() > deadline:
            yield skipped("study", "dcgan-28x28x1", base.precision, batch)
            continue
        config = dataclasses.replace(base, batch_size=batch)
        summary = train(config, os.path.join(out_dir, f"study_b{batch}"), verbose=0)
        yield {
            "part": "study",
            "model": "dcgan-28x28x1",
            "precision": config.precision,
            "batch_size": batch,
            "steps_per_execution": 1,
            "images_per_sec": summary.get("images_per_sec"),
            "first_epoch_seconds": summary.get("first_epoch_seconds"),
            "seconds_per_epoch": summary.get("mean_epoch_seconds"),
            "epochs": config.epochs,
            "final_fcd": (summary.get("final") or {}).get("fcd"),
            "target_fcd": config.target_fcd,
            "steps_to_target": summary.get("steps_to_target"),
            "images_to_target": summary.get("images_to_target"),
            "seconds_to_target": summary.get("seconds_to_target"),
            "fit_seconds": summary.get("train_seconds"),
            "note": f"data: {summary.get('data_source')}",
        }


def _fid(smoke, deadline):
    """Images/s through the FID network, per batch size, after compiling."""
    from keras_tpugan.metrics import FIDInception

    size, shape = 32, "fid-inception-32x32x3"
    for batch in (4,) if smoke else (50, 200):
        if time.perf_counter() > deadline:
            yield skipped("fid", shape, "float32", batch)
            continue
        images = np.random.default_rng(0).uniform(-1, 1, (batch, size, size, 3))
        images = images.astype("float32")
        started = time.perf_counter()
        network = FIDInception.stand_in(batch_size=batch)
        network.features(images)  # builds and compiles
        setup = time.perf_counter() - started
        # Whole batches for at least FID_TIMED_SECONDS (one in a smoke run).
        count, started = 0, time.perf_counter()
        while count == 0 or (
            not smoke and time.perf_counter() - started < FID_TIMED_SECONDS
        ):
            network.features(images)
            count += batch
        rate = round(count / (time.perf_counter() - started), 1)
        yield {
            "part": "fid",
            "model": shape,
            "precision": "float32",
            "batch_size": batch,
            "images_per_sec": rate,
            "note": (
                f"stand-in weights; set-up {setup:.1f} s; 10,000 images "
                f"{10_000 / rate:.0f} s, 50,000 {50_000 / rate:.0f} s"
            ),
        }


def _input_path(smoke):
    """Images/s of `EpochBatches` on this host, per model image shape."""
    from keras_tpugan import data

    batch, count, epochs = (16, 64, 3) if smoke else (256, 10_240, 3)
    for model, spec in MODELS.items():
        images = np.random.default_rng(0).integers(
            0, 256, (count, *spec["image_shape"]), dtype=np.uint8
        )
        ds = EpochBatches(images, batch_size=batch, xflip=True)
        seconds = []
        for epoch in range(epochs):
            data.set_epoch(epoch)
            start = time.perf_counter()
            for i in range(len(ds)):
                ds[i]
            seconds.append(time.perf_counter() - start)
        data.set_epoch(0)
        # The first epoch left out (it draws the order and warms the caches).
        rate = len(ds) * batch * (epochs - 1) / sum(seconds[1:])
        yield {
            "part": "input",
            "model": model,
            "precision": "uint8 -> float32",
            "batch_size": batch,
            "images_per_sec": round(rate, 1),
            "note": "EpochBatches, one thread",
        }
