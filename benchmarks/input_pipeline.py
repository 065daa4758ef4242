"""How fast `load_images` feeds batches, and the memory it holds, in one run.

Usage:
    python benchmarks/input_pipeline.py
    python benchmarks/input_pipeline.py --batch-size 256 --epochs 5
    python benchmarks/input_pipeline.py --folder-images 4000
    python benchmarks/input_pipeline.py --tfds-images 4000

For the offline MNIST subset and for CIFAR-10- and CelebA-64-shaped uint8
arrays (random pixels, 50,000 and 20,000 images), it times full passes over
the dataset (each epoch a new permutation, as `fit` reads it) through both
of `load_images`'s input paths, the same batches each: tf.data (what it
returns on TensorFlow; measured when TensorFlow is installed) and
`EpochBatches` (what it returns on JAX: numpy, in the calling thread). It
prints images/s per pass after the first, the first pass's seconds (which
include building the pipeline), the bytes held in memory, and the ratio of
`EpochBatches` to tf.data. The folder case (`--folder-images`) and the
TFDS case (`--tfds-images`, TensorFlow only: a TFDS dataset of JPEG photos
written here in 8 files) compare the data held in memory with the data
streamed from its files (`stream=True`).
"""

import argparse
import os
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_tpugan import data  # noqa: E402
from keras_tpugan.data.epoch_batches import EpochBatches  # noqa: E402


def _passes(ds, epochs):
    """Seconds of each full pass, the epoch set before each as `fit` does."""
    seconds = []
    for epoch in range(epochs):
        data.set_epoch(epoch)
        started = time.perf_counter()
        if isinstance(ds, EpochBatches):
            for i in range(len(ds)):
                ds[i]
        else:
            for _ in ds:
                pass
        seconds.append(time.perf_counter() - started)
    data.set_epoch(0)
    return seconds


def _time(name, data_in, batch_size, epochs, **kwargs):
    images, labels, info = data.read_images(data_in, **kwargs.get("read", {}))
    paths = {}
    options = {"batch_size": batch_size, "xflip": kwargs.get("xflip", False)}
    if keras.backend.backend() == "tensorflow":
        paths["tf.data"] = data.load_images(images, **options)
    paths["EpochBatches"] = EpochBatches(images, **options)
    rates = {}
    for path, ds in paths.items():
        seconds = _passes(ds, epochs)
        used = len(images) // batch_size * batch_size
        rates[path] = used * (epochs - 1) / sum(seconds[1:])
        ratio = rates[path] / rates["tf.data"] if "tf.data" in rates else float("nan")
        print(
            f"| {name} | {path} | {info['image_shape']} | {len(images):,} | "
            f"{images.nbytes / 1e6:,.1f} MB | {seconds[0]:.2f} s | "
            f"{rates[path]:,.0f} | {ratio:.2f} |"
        )


def _photos(count, rng):
    """`count` photos of 178x218 (CelebA's size): smooth random colours."""
    rows, cols = np.mgrid[0:218, 0:178]
    for i in range(count):
        a, b, c = rng.uniform(0.01, 0.05, 3)
        pixels = np.stack(
            [np.sin(rows * a + i), np.cos(cols * b), np.sin((rows + cols) * c)], -1
        )
        yield ((pixels + 1) * 127.5).astype(np.uint8)


def _photo_folder(directory, count, rng):
    """`count` JPEG photos of 178x218 in a folder."""
    from PIL import Image

    os.makedirs(directory, exist_ok=True)
    for i, pixels in enumerate(_photos(count, rng)):
        Image.fromarray(pixels).save(os.path.join(directory, f"{i:06d}.jpg"))


def _photo_tfds(data_dir, count, rng):
    """A TFDS dataset of `count` JPEG photos of 178x218 in 8 tfrecord files."""
    import tensorflow_datasets as tfds

    class BenchmarkPhotos(tfds.core.GeneratorBasedBuilder):
        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            image = tfds.features.Image(shape=(218, 178, 3), encoding_format="jpeg")
            features = tfds.features.FeaturesDict({"image": image})
            return tfds.core.DatasetInfo(builder=self, features=features)

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples()}

        def _generate_examples(self):
            for i, pixels in enumerate(_photos(count, rng)):
                yield i, {"image": pixels}

    shards = tfds.download.DownloadConfig(num_shards=8)
    BenchmarkPhotos(data_dir=data_dir).download_and_prepare(download_config=shards)
    return BenchmarkPhotos.name


def _time_tfds(name, data_dir, batch_size, epochs):
    options = {"batch_size": batch_size, "image_size": 64, "xflip": True}
    base = None
    for stream in (False, True):
        how = "streamed" if stream else "held"
        started = time.perf_counter()
        ds, info = data.load_images(
            name, data_dir=data_dir, stream=stream, return_info=True, **options
        )
        read = time.perf_counter() - started
        seconds = _passes(ds, epochs)
        used = info["num_examples"] // batch_size * batch_size
        rate = used * (epochs - 1) / sum(seconds[1:])
        base = base or rate
        print(
            f"| TFDS jpg, {how} (reading: {read:.1f} s) | tf.data | "
            f"{info['image_shape']} | {info['num_examples']:,} | "
            f"{info['memory_bytes'] / 1e6:,.1f} MB | {seconds[0]:.2f} s | "
            f"{rate:,.0f} | {rate / base:.2f} |"
        )


def _time_folder(directory, batch_size, epochs):
    options = {"batch_size": batch_size, "image_size": 64, "xflip": True}
    rates = {}
    for stream in (False, True):
        how = "streamed" if stream else "held"
        started = time.perf_counter()
        images, _, info = data.read_images(directory, image_size=64, stream=stream)
        read = time.perf_counter() - started
        paths = {}
        if keras.backend.backend() == "tensorflow":
            paths["tf.data"] = data.load_images(directory, stream=stream, **options)
        paths["EpochBatches"] = EpochBatches(images, batch_size=batch_size, xflip=True)
        for path, ds in paths.items():
            seconds = _passes(ds, epochs)
            used = len(images) // batch_size * batch_size
            rates[path, how] = used * (epochs - 1) / sum(seconds[1:])
            base = rates.get(("tf.data", "held"), float("nan"))
            print(
                f"| jpg folder, {how} (listing/reading: {read:.1f} s) | {path} | "
                f"{info['image_shape']} | {len(images):,} | "
                f"{info['memory_bytes'] / 1e6:,.1f} MB | {seconds[0]:.2f} s | "
                f"{rates[path, how]:,.0f} | {rates[path, how] / base:.2f} |"
            )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=4, help="passes (>= 2)")
    parser.add_argument(
        "--folder-images",
        type=int,
        default=2000,
        help="JPEG photos in the folder case (0: skip it)",
    )
    parser.add_argument(
        "--tfds-images",
        type=int,
        default=2000,
        help="JPEG photos in the TFDS case (0: skip it; TensorFlow only)",
    )
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(
        "| data | input path | image shape | images | in memory | first pass | "
        "images/s | vs tf.data |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|")
    offline = {"read": {"source": "offline"}}
    _time("offline MNIST", "mnist", args.batch_size, args.epochs, **offline)
    cifar = rng.integers(0, 256, (50_000, 32, 32, 3), dtype=np.uint8)
    _time("CIFAR-10-shaped", cifar, args.batch_size, args.epochs, xflip=True)
    celeba = rng.integers(0, 256, (20_000, 64, 64, 3), dtype=np.uint8)
    _time("CelebA-64-shaped", celeba, args.batch_size, args.epochs, xflip=True)
    if args.folder_images:
        with tempfile.TemporaryDirectory() as directory:
            _photo_folder(directory, args.folder_images, rng)
            _time_folder(directory, args.batch_size, args.epochs)
    if args.tfds_images and keras.backend.backend() == "tensorflow":
        with tempfile.TemporaryDirectory() as data_dir:
            name = _photo_tfds(data_dir, args.tfds_images, rng)
            _time_tfds(name, data_dir, args.batch_size, args.epochs)


if __name__ == "__main__":
    main()
