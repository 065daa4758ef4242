"""`keras-tpugan fid A B`: the standard FID between two sets of images.

Each side is a folder of images, a TFDS name, or a generator (a run folder
of `keras-tpugan train`, or a `.keras` file of a generator or GAN). Data is
read at `image_size` (a generator's own size when one side is a generator);
a generator draws `num` images from a fixed seed. Each side's feature
statistics are cached (`metrics.cache_dir()/fid_statistics/`), keyed by
what was read (a folder's file names, sizes and times; a model file's
SHA-256), the size, the number of images and the weights' checksum, so a
second comparison against the same data reads nothing again.
"""

import dataclasses
import hashlib
import json
import os
import time

import numpy as np

from keras_tpugan import data as data_lib
from keras_tpugan import metrics
from keras_tpugan.callbacks.quality_reference import read_subset
from keras_tpugan.runs.sample import generate, latest_model, load_generator
from keras_tpugan.whole_files import file_sha256, replaced_whole


def fid_between(
    a,
    b,
    num=10_000,
    image_size=None,
    channels=None,
    kid=False,
    seed=0,
    batch_size=50,
    weights=None,
    cache=True,
    network=None,
):
    """The FID between two sets of images, on the standard FID network.

    Args:
        a: A folder of images, a TFDS name, a run folder, a `.keras` file,
            or a `keras_tpugan.data.ImageSource` (read as it says:
            `image_size` and `channels` apply to the other kinds).
        b: The same kinds.
        num: Images per side: a generator draws this many; of data, at most
            this many are read (a subset drawn from `seed`).
        image_size: The size data is read at (None: a generator side's own
            size; required when both sides are data).
        channels: Channels to read data with (None: as stored).
        kid: Also compute KID (both sides' features are then computed
            whatever the cache holds).
        seed: Seed of the generated images' latents and of the data subsets.
        batch_size: Images per batch through the network.
        weights: The FID network's weights file (None: looked for as
            `metrics.fid_weights_path` does).
        cache: Read and write each side's statistics in the cache (data held
            in memory, arrays or a `tf.data.Dataset`, is never cached).
        network: A `metrics.FIDInception` to use (None: one is built from
            `weights`).

    Returns:
        A dict: `fid`, `kid` (None without `kid`), `images` (per side),
        `cached` (per side), `seconds` and `images_per_sec` (of the images
        put through the network, 0 when both sides came from the cache).

    Example:

    ```python
    result = fid_between("runs/photos", "photos/", num=5000)
    print(result["fid"])
    ```
    """
    if not isinstance(num, int) or num < 2:
        raise ValueError(
            f"Expected num >= 2 (a covariance needs 2 images). Received: num={num!r}."
        )
    if network is None:
        network = metrics.FIDInception(weights, batch_size=batch_size)
    models = [_model_path(a), _model_path(b)]
    if image_size is None:
        image_size = next((_generated_size(path) for path in models if path), None)
    started, computed = time.perf_counter(), 0
    sides = []
    for side, model_path in zip((a, b), models, strict=True):
        path = _statistics_path(side, model_path, num, image_size, channels, seed)
        statistics, features = None, None
        if cache and not kid and path is not None:
            statistics = read_statistics(path)
        if statistics is None:
            features = _features(
                side, model_path, network, num, (image_size, channels), seed
            )
            computed += len(features)
            statistics = (*metrics.feature_statistics(features), len(features))
            if cache and path is not None:
                _write(path, statistics)
        sides.append((statistics, features))
    seconds = time.perf_counter() - started
    (stats_a, features_a), (stats_b, features_b) = sides
    return {
        "fid": metrics.frechet_distance_of(stats_a[:2], stats_b[:2]),
        "kid": metrics.kernel_distance(features_a, features_b) if kid else None,
        "images": [int(stats_a[2]), int(stats_b[2])],
        "cached": [features_a is None, features_b is None],
        "seconds": seconds,
        "images_per_sec": computed / seconds if computed else 0.0,
    }


def statistics_path(side, num, image_size=None, channels=None, seed=0):
    """Where the statistics of a side of `fid_between` are cached.

    Args:
        side: As `fid_between`'s `a`.
        num: Images of the side.
        image_size: As `fid_between`'s.
        channels: As `fid_between`'s.
        seed: As `fid_between`'s.

    Returns:
        The `.npz` path (present or not), or None for data that is never
        cached.
    """
    return _statistics_path(side, _model_path(side), num, image_size, channels, seed)


def _statistics_path(side, model_path, num, image_size, channels, seed):
    key = _key(side, model_path, image_size, channels, num, seed)
    if key is None:
        return None
    return os.path.join(metrics.cache_dir(), "fid_statistics", f"{key}.npz")


def _model_path(side):
    """The model file a side names, or None for data."""
    if isinstance(side, data_lib.ImageSource):
        return None
    side = os.fspath(side)
    if side.endswith(".keras"):
        return side
    if os.path.isdir(side) and (
        os.path.isdir(os.path.join(side, "snapshots"))
        or os.path.isfile(os.path.join(side, "generator.keras"))
    ):
        return latest_model(side)
    return None


def _generated_size(path):
    model = cached_generator(path)
    generator = getattr(model, "generator", model)  # a GAN's, or the generator
    return tuple(generator.output_shape[1:3])


_MODELS = {}


def cached_generator(path):
    """The generator (or GAN) in `path`, loaded once per version of the file."""
    stat = os.stat(path)  # a file written again is loaded again
    key = (os.path.abspath(path), stat.st_size, stat.st_mtime_ns)
    if key not in _MODELS:
        _MODELS[key] = load_generator(path)
    return _MODELS[key]


def _features(side, model_path, network, num, reading, seed):
    if model_path is not None:
        model = cached_generator(model_path)
        out = []
        # In chunks: 10,000 generated images at 256x256 would not fit.
        for start in range(0, num, 1000):
            count = min(1000, num - start)
            images, _ = generate(model, count, seed=seed + start)
            out.append(network.features(images))
        return np.concatenate(out)
    image_size, channels = reading
    # Streamed: a folder decodes, a TFDS split reads, only the subset.
    source = side
    if not isinstance(side, data_lib.ImageSource):
        source = data_lib.ImageSource.of(
            side, image_size=image_size, channels=channels, stream=True
        )
    images, _, _ = read_subset(source, seed, num)
    out = []
    for start in range(0, len(images), 1000):
        chunk = np.asarray(images[start : start + 1000])
        out.append(network.features(data_lib.to_unit(chunk)))
    return np.concatenate(out)


def _key(side, model_path, image_size, channels, num, seed):
    if isinstance(side, data_lib.ImageSource):
        if side.kind not in ("folder", "name"):
            return None  # in memory: nothing to know it again by
        options = dataclasses.asdict(side)
        options.pop("data")
        what = [_what(side.data), options]
        image_size = channels = None  # the source's own
    else:
        what = ["model", file_sha256(model_path)] if model_path else _what(side)
    described = [what, image_size, channels, num, seed, metrics.FID_WEIGHTS_SHA256]
    text = json.dumps(described, sort_keys=True, default=list)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _what(side):
    """What a folder or a dataset name holds, as far as a key needs."""
    if os.path.isdir(side):
        listing = []
        for root, _, files in sorted(os.walk(side)):
            for name in sorted(files):
                stat = os.stat(os.path.join(root, name))
                listing.append(
                    [
                        os.path.relpath(os.path.join(root, name), side),
                        stat.st_size,
                        stat.st_mtime_ns,
                    ]
                )
        return ["folder", os.path.abspath(side), listing]
    return ["dataset", str(side)]


def read_statistics(path):
    """`(mean, covariance, count)` cached at `path`, or None when it is
    absent or damaged (computed again)."""
    try:
        with np.load(path) as stored:
            return stored["mean"], stored["covariance"], int(stored["count"])
    except (OSError, ValueError, KeyError):
        return None


def _write(path, statistics):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    mean, covariance, count = statistics
    with replaced_whole(path) as partial:
        with open(partial, "wb") as file:
            np.savez(file, mean=mean, covariance=covariance, count=count)
