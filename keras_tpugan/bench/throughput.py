"""Training throughput of the default MNIST GAN: images/s and FLOP/s.

Measures, in one run on one machine, images/s (the median of a few timings:
shared machines are noisy) for several batch sizes, with and without XLA, in
float32 and mixed_bfloat16, and the achieved FLOP/s as a fraction of a
large matmul's FLOP/s measured in the same run (float32 matmul for float32
runs, bfloat16 matmul for mixed_bfloat16 runs; the better of TensorFlow's
own kernel and XLA's).

FLOPs per image are counted from the layer shapes (multiply-adds x 2 of the
convolutions and dense layers; Keras has no FLOP counter). Backward
passes cost about twice the forward one, so the discriminator update costs
G + 2 x 3 D (forward and backward on real and generated images) and the
generator update 3 G + 2 D (D's backward needs input gradients only):
4 G + 8 D per image in all, a lower bound on the work done.

The numbers are those of the Keras backend the process runs on
(`KERAS_BACKEND`); `keras-tpugan bench --backend tensorflow jax` measures
both, one process each, one after the other, and prints them side by side.

Used by `keras-tpugan bench` and `benchmarks/throughput.py`.
"""

import itertools
import os
import tempfile
import time

import keras
import numpy as np

from keras_tpugan import distribute
from keras_tpugan.bench import tables
from keras_tpugan.bench.flops import (
    device_and_versions,
    forward_flops,
    matmul_flops_per_sec,
)
from keras_tpugan.launch import backends as backends_lib
from keras_tpugan.runs import results
from keras_tpugan.runs.config import TrainConfig
from keras_tpugan.runs.prepared_run import prepare
from keras_tpugan.tf_import import tf

IMAGE_SHAPE = (28, 28, 1)


def gan_on_one_batch(config, strategy=None):
    """The GAN a config describes and one batch of noise images, repeated.

    The run is set up by `prepared_run.prepare`, as a training run is, on one
    global batch of uniform noise images, cached and repeated so that
    timings hold the training step alone, not the input pipeline.

    Args:
        config: A `TrainConfig`; its `batch_size` is the batch made.
        strategy: The strategy (default: `config.strategy`'s).

    Returns:
        `(gan, dataset)`: the compiled GAN and an endless dataset of the batch.

    Example:

    ```python
    gan, ds = gan_on_one_batch(TrainConfig(batch_size=16, width=16))
    gan.fit(ds, epochs=1, steps_per_epoch=4, verbose=0)
    ```
    """
    shape = (config.batch_size, *IMAGE_SHAPE)
    images = np.random.default_rng(0).uniform(-1, 1, shape)
    run = prepare(config, strategy, data=images.astype("float32"))
    if keras.backend.backend() == "jax":  # an EpochBatches: no TensorFlow
        # (with several processes, this process's rows of the batch)
        return run.build_gan(), RepeatedBatch(run.dataset[0], process_rows=True)
    dataset = run.dataset.take(1).cache().repeat()
    # Nothing to tune in one cached batch, and tf.data's autotuning thread
    # competed with the step for a core: on one pinned core whole fits ran
    # at half speed, at random (21 or 42 ms a step, TensorFlow, batch 64).
    options = tf.data.Options()
    options.autotune.enabled = False
    return run.build_gan(), dataset.with_options(options)


class RepeatedBatch(keras.utils.PyDataset):
    """One batch, again and again (for `fit` with `steps_per_epoch`).

    Timings of `fit` on it hold the training step alone, not the input.

    Args:
        batch: The batch (an array, or a tuple of arrays).
        process_rows: True when `batch` is this process's part of the global
            batch (JAX, several processes; see
            `distribute.sharded_by_the_data`).
    """

    def __init__(self, batch, process_rows=False):
        super().__init__()
        self.batch = batch
        self.process_rows = process_rows

    def __len__(self):
        return 1_000_000  # more than any timing takes

    def __getitem__(self, index):
        return self.batch


def compiled_gan_on_one_batch(
    policy,
    xla,
    batch_size,
    width,
    latent_dim,
    strategy,
    all_reduce_dtype="float32",
):
    """`gan_on_one_batch` for these settings, traced and compiled.

    Args:
        policy: The dtype policy.
        xla: `jit_compile`: True, False or `"auto"`.
        batch_size: The global batch.
        width: Model width.
        latent_dim: Latent size.
        strategy: The strategy (or, on JAX, the distribution).
        all_reduce_dtype: The type the gradients cross the replicas in.

    Returns:
        `(gan, dataset)`, as `gan_on_one_batch`, after two short fits.

    Example:

    ```python
    gan, ds = compiled_gan_on_one_batch("float32", True, 16, 16, 16, None)
    ```
    """
    config = TrainConfig(
        precision=policy,
        jit_compile=xla,
        batch_size=batch_size,
        width=width,
        latent_dim=latent_dim,
        all_reduce_dtype=all_reduce_dtype,
    )
    gan, ds = gan_on_one_batch(config, strategy)
    # Trace and compile. Twice: on JAX the second fit compiles once more, for
    # the shardings of the state the first one returned.
    for _ in range(2):
        gan.fit(ds, epochs=1, steps_per_epoch=2, verbose=0)
    return gan, ds


def measure(policy, xla, batch_size, steps, width, latent_dim, repeats, strategy):
    """Median images/s over `repeats` timed fits, and FLOPs per image.

    The GAN trains on `gan_on_one_batch`: the training step alone is timed.
    """
    gan, ds = compiled_gan_on_one_batch(
        policy, xla, batch_size, width, latent_dim, strategy
    )
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        gan.fit(ds, epochs=1, steps_per_epoch=steps, verbose=0)
        rates.append(steps * batch_size / (time.perf_counter() - start))
    flops = 4 * forward_flops(gan.generator) + 8 * forward_flops(gan.discriminator)
    return float(np.median(rates)), flops


def reset_peak_memory():
    """Starts a new peak for `peak_memory_mib` (host RSS and the device's)."""
    try:  # Linux: "5" resets the process's peak resident set (VmHWM)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    if keras.backend.backend() == "tensorflow":
        for gpu in tf.config.list_logical_devices("GPU"):
            tf.config.experimental.reset_memory_stats(gpu.name)


def peak_memory_mib():
    """`(host, device)` peak memory in MiB since `reset_peak_memory`.

    Host: the process's peak resident set (`VmHWM`; Linux only, else None),
    which includes the frameworks' own memory. Device: the first
    accelerator's peak allocation (TensorFlow's `get_memory_info`, JAX's
    `memory_stats`; None on CPUs, which do not report one). JAX reports a
    peak since the process started, never reset.
    """
    host = None
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    host = int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    device = None
    if keras.backend.backend() == "jax":
        import jax

        stats = jax.devices()[0].memory_stats() or {}
        if "peak_bytes_in_use" in stats:
            device = stats["peak_bytes_in_use"] / 2**20
    else:
        gpus = tf.config.list_logical_devices("GPU")
        if gpus:
            device = (
                tf.config.experimental.get_memory_info(gpus[0].name)["peak"] / 2**20
            )
    return (
        None if host is None else round(host, 1),
        None if device is None else round(device, 1),
    )


def throughput_matrix(
    batch_sizes=(64, 128, 256),
    replicas=(1,),
    precisions=("float32", "mixed_bfloat16"),
    xla=(False, True),
    steps=10,
    repeats=3,
    width=128,
    latent_dim=128,
    csv_path=None,
    printer=print,
):
    """Measures images/s over precision x XLA x batch size x replicas.

    Args:
        batch_sizes: Global batch sizes.
        replicas: Replica counts (devices of the local accelerator, or
            logical CPUs).
        precisions: Dtype policies.
        xla: XLA settings.
        steps: Steps per timing.
        repeats: Timings per cell (the median is reported).
        width: Model width.
        latent_dim: Latent size.
        csv_path: If set, also write the rows there as CSV.
        printer: Called with each line of output.

    Returns:
        The rows: dicts with precision, xla, replicas, batch_size,
        images_per_sec, gflops_per_sec, fraction_of_matmul, and the peak
        memory of the cell in MiB, peak_host_mib and peak_device_mib (see
        `peak_memory_mib`).
    """
    distribute.split_host_devices(max(replicas))
    backend = keras.backend.backend()
    peak = {
        p: matmul_flops_per_sec("bfloat16" if "16" in p else "float32")
        for p in precisions
    }
    printer(
        f"backend: {backend}; device: {device_and_versions()}, "
        f"Keras {keras.__version__}"
    )
    for policy, value in peak.items():
        printer(f"matmul 2048^2 reference for {policy}: {value / 1e9:.1f} GFLOP/s")
    rows = []
    for n, policy, use_xla, batch in itertools.product(
        replicas, precisions, xla, batch_sizes
    ):
        strategy = distribute.get_strategy("auto", num_replicas=n)
        row = {
            "backend": backend,
            "precision": policy,
            "xla": use_xla,
            "replicas": n,
            "batch_size": batch,
        }
        reset_peak_memory()
        try:
            rate, flops = measure(
                policy, use_xla, batch, steps, width, latent_dim, repeats, strategy
            )
        except Exception as e:
            if not _expected_failure(e):
                raise
            row.update(
                images_per_sec=None,
                gflops_per_sec=None,
                fraction_of_matmul=None,
                peak_host_mib=None,
                peak_device_mib=None,
            )
            printer(f"{row}: failed: {str(e).splitlines()[0]}")
            rows.append(row)
            continue
        achieved = rate * flops
        row.update(
            images_per_sec=round(rate, 1),
            gflops_per_sec=round(achieved / 1e9, 2),
            # Three significant digits: tiny models on a CPU reach 1e-5.
            fraction_of_matmul=float(f"{achieved / peak[policy]:.3g}"),
        )
        row["peak_host_mib"], row["peak_device_mib"] = peak_memory_mib()
        rows.append(row)
        printer(str(row))
    for line in tables.throughput_table(rows):
        printer(line)
    if csv_path:
        results.write_csv(rows, csv_path)
    return rows


def throughput_across_backends(backends, csv_path=None, printer=print, **kwargs):
    """Runs `throughput_matrix` once per backend, each in its own process.

    Args:
        backends: Backends to measure, one after the other.
        csv_path: If set, also write all rows there as CSV.
        printer: Called with each line of the merged table.
        **kwargs: `throughput_matrix` arguments (JSON-serializable).

    Returns:
        The rows of every backend.
    """
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend in backends:
            path = os.path.join(tmp, f"{backend}.csv")
            function = "keras_tpugan.bench.throughput:throughput_matrix"
            if backends_lib.call(backend, function, csv_path=path, **kwargs):
                raise ValueError(
                    f"Expected the {backend} benchmark to finish. Received: a "
                    "failed process (its output is above)."
                )
            rows += tables.read_throughput_csv(path)
    printer("\nAll backends, measured one after the other in this run:")
    for line in tables.throughput_table(rows):
        printer(line)
    if csv_path:
        results.write_csv(rows, csv_path)
    return rows


def _expected_failure(error):
    """Too big a batch, or one the replicas cannot split: a failed cell."""
    return isinstance(error, ValueError) or distribute.is_out_of_memory(error)
