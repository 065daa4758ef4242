"""An RGB benchmark that runs offline: painted digits at 32x32x3.

Usage:
    python benchmarks/rgb_digits.py                      # 8 minutes of training
    python benchmarks/rgb_digits.py --minutes 2 --out runs/rgb-digits
    python benchmarks/rgb_digits.py --set architecture=resnet
    python benchmarks/rgb_digits.py --fid-images 0      # no standard FID
    python benchmarks/rgb_digits.py --smoke              # seconds: plumbing only

The offline MNIST subset (4,000 train digits), each digit padded to 32x32
and painted: a random foreground colour on a random background colour
(at least 0.5 apart in mean RGB, so the digit stays readable), drawn from
the seed. The images are written as PNGs into one subfolder per class
(`OUT/data/0` .. `9`), so the run reads them as a user's folder does,
and `keras-tpugan train --data OUT/data --image-size 32` (the `images`
preset, with `--set` overrides) trains on them with a training time budget.
The quality figures are those of any labelled folder: the Frechet
distance and classifier score on a classifier trained on these painted
digits (`metrics.data_classifier`), KID, precision and recall, with the
real-vs-real floor. Beside them, the standard FID (`keras-tpugan fid`: the
run's generator against the painted digits, `--fid-images` a side, the
real side's statistics cached), which compares with published FIDs of
other data only loosely but with any run on these digits. It prints one
Markdown table of the last scored epoch and the path of the last sample
grid.
"""

import argparse
import json
import os
import sys

import numpy as np
from PIL import Image

from keras_tpugan import data as data_lib

MIN_CONTRAST = 0.5


def paint_digits(images, seed=0):
    """Paints grey digits: a random foreground on a random background colour.

    Args:
        images: uint8 `(n, 28, 28, 1)` digits (white on black).
        seed: Seed of the colours.

    Returns:
        uint8 `(n, 32, 32, 3)`: each digit padded by 2 pixels on each side,
        its ink in one colour and its background in another, the two at
        least `MIN_CONTRAST` apart in mean RGB (in [0, 1]).
    """
    images = np.asarray(images)
    if images.ndim != 4 or images.shape[1:] != (28, 28, 1):
        raise ValueError(
            "Expected uint8 digits of shape (n, 28, 28, 1). Received: shape "
            f"{images.shape}."
        )
    rng = np.random.default_rng(seed)
    n = len(images)
    foreground = rng.uniform(size=(n, 3))
    background = rng.uniform(size=(n, 3))
    # Too close in brightness: move the background's brightness to exactly
    # MIN_CONTRAST from the foreground's, on the side that has room.
    fg, bg = foreground.mean(1), background.mean(1)
    close = np.abs(fg - bg) < MIN_CONTRAST
    darker = close & (fg >= 0.5)  # a light digit: darken the background
    background[darker] *= ((fg[darker] - MIN_CONTRAST) / bg[darker])[:, None]
    lighter = close & (fg < 0.5)  # a dark digit: lighten it
    room = (1.0 - fg[lighter] - MIN_CONTRAST) / (1.0 - bg[lighter])
    background[lighter] = 1.0 - (1.0 - background[lighter]) * room[:, None]
    ink = np.pad(images[..., 0], ((0, 0), (2, 2), (2, 2))).astype("float32") / 255.0
    ink = ink[..., None]
    painted = (
        ink * foreground[:, None, None, :]
        + (1.0 - ink) * (background[:, None, None, :])
    )
    return np.round(painted * 255.0).astype("uint8")


def write_folder(directory, images, labels):
    """Writes images as PNGs, one subfolder per label; returns the count."""
    for label in np.unique(labels):
        os.makedirs(os.path.join(directory, str(label)), exist_ok=True)
    for i, (image, label) in enumerate(zip(images, labels, strict=True)):
        Image.fromarray(image).save(os.path.join(directory, str(label), f"{i:05d}.png"))
    return len(images)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=8.0, help="training budget")
    parser.add_argument("--out", default="runs/rgb-digits")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting of the images preset (repeatable)",
    )
    parser.add_argument(
        "--fid-images",
        type=int,
        default=2000,
        help="images a side of the standard FID after the run (0: none; about "
        "4 minutes for 2,000 on a 2-core CPU)",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="200 digits, a tiny model, one epoch: checks that it runs",
    )
    args = parser.parse_args(argv)
    from keras_tpugan.cli import main as cli

    images, labels = data_lib.offline_mnist("train")
    overrides = ["epochs=1000", "quality_every=5", f"seed={args.seed}"]
    if args.smoke:
        images, labels = images[:200], labels[:200]
        overrides += ["epochs=1", "width=16", "latent_dim=16", "quality_every=1"]
        overrides += ["quality_images=50", "batch_size=20", "num_samples=4"]
    folder = os.path.join(args.out, "data")
    if not os.path.isdir(folder):
        count = write_folder(folder, paint_digits(images, args.seed), labels)
        print(f"wrote {count} painted digits to {folder}/")
    command = ["train", "--data", folder, "--image-size", "32", "--quiet"]
    for item in overrides + args.set:
        command += ["--set", item]
    command += ["--time-budget", str(args.minutes * 60), "--out", args.out + "/run"]
    print("keras-tpugan " + " ".join(command), flush=True)
    status = cli.main(command)
    if status:
        return status
    with open(os.path.join(args.out, "run", "summary.json")) as f:
        summary = json.load(f)
    fid = None
    fid_images = min(args.fid_images, 16) if args.smoke else args.fid_images
    if fid_images:
        from keras_tpugan.runs.fid_between import fid_between

        fid = fid_between(
            os.path.join(args.out, "run"), folder, num=fid_images, seed=args.seed
        )
    print(table(summary, fid))
    grids = sorted(os.listdir(os.path.join(args.out, "run", "samples")))
    grids = [g for g in grids if g.endswith(".png")]
    print(f"last grid: {os.path.join(args.out, 'run', 'samples', grids[-1])}")
    return 0


def table(summary, fid=None):
    """One Markdown table of a run's last scored epoch (and its real floors),
    with the standard FID of `fid_between`'s result `fid` (None: none)."""
    scored = summary.get("quality_schedule") or []
    last = scored[-1] if scored else {}
    final = summary["final"]
    steps = last.get("step")
    rows = [
        ("scored after epoch", steps and steps // summary["steps_per_epoch"]),
        ("steps", steps),
        ("training seconds then", last.get("seconds")),
        ("training seconds in all", summary["train_seconds"]),
        ("FD (own classifier)", last.get("fcd")),
        ("FD, real vs real", final.get("fcd_real_floor")),
        ("classifier score", last.get("classifier_score")),
        ("classifier score, real", final.get("classifier_score_real")),
        ("KID", last.get("kid")),
        ("precision", last.get("precision")),
        ("recall", last.get("recall")),
    ]
    if fid is not None:
        generated, real = fid["images"]
        name = f"FID, standard network ({generated} vs {real} images)"
        rows.append((name, fid["fid"]))
    lines = ["| figure | value |", "|---|---:|"]
    for name, value in rows:
        if value is None:
            continue
        text = f"{value:.4g}" if isinstance(value, float) else str(value)
        lines.append(f"| {name} | {text} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
