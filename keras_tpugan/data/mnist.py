"""The offline MNIST subset: 5,000 real digits shipped in the package.

`offline_mnist` reads them (4,000 train / 1,000 test, split once with a
fixed permutation); `load_images("mnist", source="offline")` trains on them
without TFDS or a network.
"""

import functools
import os
import re

import numpy as np

# The offline subset: 5,000 real MNIST digits (500 per class) shipped in the
# package (assets/mnist_5k.csv.gz, one row of 784 pixels and the label per
# image; see assets/MNIST_NOTICE.txt), split once with a fixed permutation
# into 4,000 train / 1,000 test.
OFFLINE_MNIST_FILE = os.path.join(
    os.path.dirname(os.path.dirname(__file__)), "assets", "mnist_5k.csv.gz"
)
OFFLINE_SPLITS = {
    "train": slice(0, 4000),
    "test": slice(4000, 5000),
    "all": slice(None),
}


def offline_mnist(split="all"):
    """The offline MNIST subset as numpy arrays.

    Args:
        split: `"train"` (4,000 images), `"test"` (1,000) or `"all"`
            (5,000), or a slice of one as TFDS writes it: `"train[:1024]"`,
            `"test[-100:]"`, `"train[:10%]"`, `"train[10%:20%]"`
            (percentages of the split, rounded to the closest image).

    Returns:
        `(images, labels)`: uint8 `(n, 28, 28, 1)` and int32 `(n,)`.

    Example:

    >>> images, labels = offline_mnist("train[:1024]")
    >>> images.shape
    (1024, 28, 28, 1)
    """
    x, y = _offline_mnist_arrays()
    part = _offline_rows(split, len(y))
    if not len(part):
        raise ValueError(
            "Expected a split of the offline MNIST subset with at least one "
            f"image. Received: split={split!r} (no image). Widen the slice."
        )
    return x[part].copy(), y[part].copy()


def _offline_rows(split, count):
    """The rows of the offline subset a split name, or a TFDS-style slice of
    one, selects (TFDS's own parser needs TensorFlow; this needs nothing)."""
    match = re.fullmatch(r"(\w+)(?:\[(-?\d+%?)?:(-?\d+%?)?\])?", str(split))
    if match is None or match[1] not in OFFLINE_SPLITS:
        raise ValueError(
            f"Expected split in {tuple(OFFLINE_SPLITS)} for the offline MNIST "
            "subset, or a slice of one such as 'train[:1024]' or "
            f"'train[:10%]'. Received: split={split!r}."
        )
    rows = np.arange(count)[OFFLINE_SPLITS[match[1]]]

    def bound(text):
        if text is None:
            return None
        if text.endswith("%"):
            return round(int(text[:-1]) * len(rows) / 100)
        return int(text)

    return rows[bound(match[2]) : bound(match[3])]


@functools.cache
def _offline_mnist_arrays():
    # Read as uint8, once a process: a float parse is 20-40x slower
    # (docs/design/notes.md).
    table = np.loadtxt(OFFLINE_MNIST_FILE, delimiter=",", dtype=np.uint8)
    order = np.random.RandomState(0).permutation(len(table))
    table = table[order]
    x = table[:, :-1].reshape(-1, 28, 28, 1)
    y = table[:, -1].astype("int32")
    x.flags.writeable = y.flags.writeable = False
    return x, y
