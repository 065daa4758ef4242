"""How fast `load_images` feeds batches, and the memory it holds, in one run.

Usage:
    python benchmarks/input_pipeline.py
    python benchmarks/input_pipeline.py --batch-size 256 --epochs 5

For the offline MNIST subset and for CIFAR-10- and CelebA-64-shaped uint8
arrays (random pixels, 50,000 and 20,000 images), it times full passes over
the dataset (each epoch a new permutation, as `fit` reads it) and prints
images/s per pass after the first, the first pass's seconds (which includes
building the pipeline) and the bytes held in memory.
"""

import argparse
import time

import numpy as np

from keras_tpugan import data


def _time(name, data_in, batch_size, epochs, **kwargs):
    ds, info = data.load_images(
        data_in, batch_size=batch_size, return_info=True, **kwargs
    )
    seconds = []
    for epoch in range(epochs):
        data.set_epoch(epoch)
        started = time.perf_counter()
        batches = sum(1 for _ in ds)
        seconds.append(time.perf_counter() - started)
    images = batches * batch_size
    rate = images * (epochs - 1) / sum(seconds[1:])
    print(
        f"| {name} | {info['image_shape']} | {info['num_examples']:,} | "
        f"{info['memory_bytes'] / 1e6:,.1f} MB | {seconds[0]:.2f} s | {rate:,.0f} |"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=4, help="passes (>= 2)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print("| data | image shape | images | in memory | first pass | images/s |")
    print("|---|---|---:|---:|---:|---:|")
    _time("offline MNIST", "mnist", args.batch_size, args.epochs, source="offline")
    cifar = rng.integers(0, 256, (50_000, 32, 32, 3), dtype=np.uint8)
    _time("CIFAR-10-shaped", cifar, args.batch_size, args.epochs, xflip=True)
    celeba = rng.integers(0, 256, (20_000, 64, 64, 3), dtype=np.uint8)
    _time("CelebA-64-shaped", celeba, args.batch_size, args.epochs, xflip=True)


if __name__ == "__main__":
    main()
