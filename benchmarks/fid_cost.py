"""What the standard FID costs: images per second through the FID network.

Usage:
    python benchmarks/fid_cost.py                    # 1,000 images, 32x32x3
    python benchmarks/fid_cost.py --images 10000 --size 64
    KERAS_BACKEND=jax python benchmarks/fid_cost.py

It times `metrics.FIDInception.features` on random images (after one batch
that compiles), prints the images per second, the seconds 10,000 images
(the `fid` command's default) and 50,000 (the published protocol) would
take at that rate, and the share one scoring of `--score-images` generated
images would take of a run whose training takes `--train-seconds` between
two scorings and of a run of `--run-seconds` (defaults: the demo on a
2-core CPU).
"""

import argparse
import time

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--channels", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=50)
    parser.add_argument("--score-images", type=int, default=1000)
    parser.add_argument(
        "--train-seconds",
        type=float,
        default=11.0,
        help="training seconds between two scorings (the demo at width 64 on "
        "a 2-core CPU: about 2.2 s an epoch, scored every 5)",
    )
    parser.add_argument(
        "--run-seconds",
        type=float,
        default=546.0,
        help="a whole run's training seconds (the demo on a 2-core CPU)",
    )
    args = parser.parse_args()

    import keras

    from keras_tpugan.metrics import FIDInception

    shape = (args.images, args.size, args.size, args.channels)
    images = np.random.default_rng(0).uniform(-1, 1, shape).astype("float32")
    started = time.perf_counter()
    network = FIDInception(batch_size=args.batch_size)
    network.features(images[: args.batch_size])  # builds and compiles
    setup = time.perf_counter() - started
    started = time.perf_counter()
    network.features(images)
    seconds = time.perf_counter() - started
    rate = args.images / seconds
    score = args.score_images / rate
    print(f"backend {keras.backend.backend()}, images {shape}, batch {args.batch_size}")
    print(f"set-up and first batch: {setup:.1f} s")
    print(f"{args.images} images: {seconds:.1f} s, {rate:.1f} images/s")
    print(f"10,000 images: {10_000 / rate:.0f} s; 50,000: {50_000 / rate:.0f} s")
    share = score / (score + args.train_seconds)
    print(
        f"one scoring of {args.score_images} images: {score:.1f} s, "
        f"{share:.0%} of the time with {args.train_seconds:.0f} s of training "
        "between scorings"
    )
    print(
        f"one scoring: {score / args.run_seconds:.1%} of a {args.run_seconds:.0f} s "
        f"run's training; "
        + (
            f"over a tenth of the time between scorings, so `train` (its "
            f"quality_max_share 0.05) waits for {score * 19:.0f} s of training "
            f"between scores: one scheduled point in "
            f"{score * 19 / args.train_seconds:.0f}, and the last"
            if share > 0.1
            else "within a tenth of the time between scorings"
        )
    )


if __name__ == "__main__":
    main()
