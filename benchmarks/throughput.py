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

Usage:
    python benchmarks/throughput.py                       # the README table
    python benchmarks/throughput.py --batch-sizes 64 --steps 5 --csv out.csv
"""

import argparse
import csv
import itertools
import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_tpugan import precision  # noqa: E402
from keras_tpugan.config import TrainConfig  # noqa: E402
from keras_tpugan.train import build_gan  # noqa: E402

IMAGE_SHAPE = (28, 28, 1)


def forward_flops(model):
    """Forward FLOPs per example of a functional model's conv/dense layers."""
    total = 0
    for layer in model.layers:
        if isinstance(layer, keras.layers.Conv2DTranspose):
            _, h, w, c_in = layer.input.shape
            k = np.prod(layer.kernel_size)
            total += 2 * h * w * c_in * k * layer.filters
        elif isinstance(layer, keras.layers.Conv2D):
            _, h, w, c_out = layer.output.shape
            k = np.prod(layer.kernel_size)
            total += 2 * h * w * c_out * k * layer.input.shape[-1]
        elif isinstance(layer, keras.layers.Dense):
            total += 2 * layer.input.shape[-1] * layer.units
    return int(total)


def matmul_flops_per_sec(dtype, n=2048, repeats=10):
    """FLOP/s of an n x n matmul chain: the better of TF's kernel and XLA's."""
    a = tf.cast(tf.random.normal([n, n]), dtype)
    best = 0.0
    for xla in (False, True):

        @tf.function(jit_compile=xla)
        def chain(x):
            for _ in range(repeats):
                x = tf.matmul(x, a) * 0.01
            return x

        chain(a).numpy()  # trace and compile
        start = time.perf_counter()
        chain(a).numpy()
        best = max(best, 2 * n**3 * repeats / (time.perf_counter() - start))
    return best


def measure(policy, xla, batch_size, steps, width, latent_dim, repeats):
    """Median images/s over `repeats` timed fits, and FLOPs per image."""
    precision.configure(policy)
    config = TrainConfig(
        precision=policy,
        jit_compile=xla,
        batch_size=batch_size,
        width=width,
        latent_dim=latent_dim,
    )
    gan = build_gan(config, IMAGE_SHAPE)
    images = np.random.default_rng(0).uniform(-1, 1, (batch_size, *IMAGE_SHAPE))
    ds = tf.data.Dataset.from_tensors(images.astype("float32")).repeat().prefetch(2)
    gan.fit(ds, epochs=1, steps_per_epoch=2, verbose=0)  # trace and compile
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        gan.fit(ds, epochs=1, steps_per_epoch=steps, verbose=0)
        rates.append(steps * batch_size / (time.perf_counter() - start))
    flops = 4 * forward_flops(gan.generator) + 8 * forward_flops(gan.discriminator)
    return float(np.median(rates)), flops


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--steps", type=int, default=10, help="steps per timing")
    parser.add_argument(
        "--repeats", type=int, default=3, help="timings per cell (median reported)"
    )
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--latent-dim", type=int, default=128)
    parser.add_argument("--csv", default=None, help="also write the table as CSV")
    args = parser.parse_args(argv)

    device = tf.config.list_logical_devices()[0].name
    peak = {
        "float32": matmul_flops_per_sec("float32"),
        "mixed_bfloat16": matmul_flops_per_sec("bfloat16"),
    }
    print(f"device: {device}; TF {tf.__version__}, Keras {keras.__version__}")
    for policy, value in peak.items():
        print(f"matmul 2048^2 peak for {policy}: {value / 1e9:.1f} GFLOP/s")
    rows = []
    for policy, xla, batch in itertools.product(
        ("float32", "mixed_bfloat16"), (False, True), args.batch_sizes
    ):
        rate, flops = measure(
            policy, xla, batch, args.steps, args.width, args.latent_dim, args.repeats
        )
        achieved = rate * flops
        rows.append(
            {
                "precision": policy,
                "xla": xla,
                "batch_size": batch,
                "images_per_sec": round(rate, 1),
                "gflops_per_sec": round(achieved / 1e9, 2),
                "fraction_of_matmul": round(achieved / peak[policy], 4),
            }
        )
        print(rows[-1], flush=True)
    base = {
        r["batch_size"]: r["images_per_sec"]
        for r in rows
        if r["precision"] == "float32" and not r["xla"]
    }
    print("\n| precision | XLA | batch | images/s | vs float32 no-XLA |", end="")
    print(" GFLOP/s | of matmul |\n|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        speedup = r["images_per_sec"] / base[r["batch_size"]]
        print(
            f"| {r['precision']} | {'on' if r['xla'] else 'off'} | {r['batch_size']} "
            f"| {r['images_per_sec']:.0f} | {speedup:.2f}x "
            f"| {r['gflops_per_sec']:.1f} | {100 * r['fraction_of_matmul']:.1f}% |"
        )
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
