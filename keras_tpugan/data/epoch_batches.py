"""`EpochBatches`: global batches of in-memory images, without TensorFlow."""

import keras
import numpy as np

from keras_tpugan.data.epochs import current_epoch
from keras_tpugan.data.image_files import FolderImages
from keras_tpugan.keyed_dropout import HASH_MULTIPLIERS


def hash_uint32(x):
    """`keyed_dropout.hash_uint32` in numpy: the same numbers, element-wise."""
    x = np.asarray(x, np.uint32)
    with np.errstate(over="ignore"):  # the multiplies wrap, as they should
        x = x ^ (x >> np.uint32(16))
        x = x * np.uint32(HASH_MULTIPLIERS[0])
        x = x ^ (x >> np.uint32(15))
        x = x * np.uint32(HASH_MULTIPLIERS[1])
        return x ^ (x >> np.uint32(16))


def epoch_keys(num_examples, seed, epoch, stream):
    """One uint32 per position: a hash of `(seed, epoch, stream, position)`.

    `keras_tpugan.data` computes the same numbers inside its tf.data
    pipeline with `keyed_dropout.hash_uint32` (integer arithmetic: exact on
    both).
    """
    key = np.uint32(0)
    for part in (int(seed) % 2**32, int(epoch) % 2**32, stream):
        key = hash_uint32(key ^ np.uint32(part))
    return hash_uint32(hash_uint32(np.arange(num_examples, dtype=np.uint32)) ^ key)


def epoch_order(num_examples, seed, epoch, shuffle=True, xflip=False):
    """The order and the mirror flags of one epoch of a dataset.

    Both input paths of `keras_tpugan.data.load_images` read their batches
    in this order (tf.data on TensorFlow, `EpochBatches` on JAX), so the
    same seed and epoch give the same batches on either backend: the order
    sorts the positions by `epoch_keys` (stream 0), and a position's image
    is flipped when the top bit of its stream-1 key is set.

    Args:
        num_examples: Size of the dataset.
        seed: Seed of the permutation and of the flips.
        epoch: The epoch (0-based).
        shuffle: If False, the stored order.
        xflip: If False, no image is flipped.

    Returns:
        `(order, flips)`: int64 indices, a permutation of
        `range(num_examples)` drawn from `(seed, epoch)` alone, and one
        bool per position (True: mirror that image), drawn from
        `(seed, epoch)` with probability 1/2.
    """
    if shuffle:
        keys = epoch_keys(num_examples, seed, epoch, 0).astype(np.int64)
        order = np.argsort(keys, kind="stable")
    else:
        order = np.arange(num_examples)
    if xflip:
        flips = (epoch_keys(num_examples, seed, epoch, 1) >> np.uint32(31)) == 1
    else:
        flips = np.zeros(num_examples, bool)
    return order.astype("int64"), flips


def scaled(pixels):
    """Stored images (uint8 pixels, or float32 in [-1, 1]) as float32 in [-1, 1]."""
    pixels = np.asarray(pixels)
    if pixels.dtype == np.uint8:
        return pixels.astype("float32") / 127.5 - 1.0
    return pixels.astype("float32")


class EpochBatches(keras.utils.PyDataset):
    """Global batches of images held in memory, one permutation per epoch.

    What `keras_tpugan.data.load_images` returns on the JAX backend, where
    it needs no TensorFlow: the images stay in memory as they came (uint8
    pixels are a quarter of float32's memory) and each batch is gathered
    and scaled to float32 [-1, 1] as it is read. The order of an epoch is a
    function of `(seed, epoch)` alone (`epoch_order`), the epoch being the
    one `keras_tpugan.data.set_epoch` last set (`GAN.fit` sets it at the
    start of every epoch), so a resumed run sees the batches of an
    uninterrupted one, on any number of replicas. The last partial batch is
    dropped: every batch has `batch_size` images, as replicas need.

    With several JAX processes, each process yields its own rows of every
    global batch (rows `p * b / n` to `(p + 1) * b / n` of process `p` of
    `n`), which Keras assembles into the global batch: every example is
    read by exactly one process.

    Args:
        images: uint8 pixels `(n, h, w, c)`, float32 images in [-1, 1], or
            an `image_files.FolderImages` (a folder read batch by batch).
        labels: int32 class ids `(n,)`, or None (the batches are images
            only).
        batch_size: The GLOBAL batch size.
        shuffle: A new permutation every epoch; False: the stored order.
        seed: Seed of the permutation and of `xflip`.
        xflip: Mirror each image left-right with probability 1/2.

    Example:

    >>> import numpy as np
    >>> images = np.zeros((10, 8, 8, 1), "uint8")
    >>> ds = EpochBatches(images, batch_size=4)
    >>> len(ds), ds[0].shape
    (2, (4, 8, 8, 1))
    """

    def __init__(
        self, images, labels=None, batch_size=256, shuffle=True, seed=0, xflip=False
    ):
        super().__init__()
        if not isinstance(images, FolderImages):  # a folder streamed from disk
            images = np.asarray(images)
        if images.ndim != 4 or images.dtype not in (np.uint8, np.float32):
            raise ValueError(
                "Expected images of shape (n, h, w, c), uint8 or float32 in "
                f"[-1, 1]. Received: shape {images.shape}, dtype {images.dtype}. "
                "`keras_tpugan.data.read_images` stores any data so."
            )
        if labels is not None and len(labels) != len(images):
            raise ValueError(
                f"Expected one label per image ({len(images)}). Received: "
                f"{len(labels)} labels."
            )
        if not 1 <= batch_size <= len(images):
            raise ValueError(
                f"Expected 1 <= batch_size <= the {len(images)} images. "
                f"Received: batch_size={batch_size}."
            )
        self.images = images
        self.labels = None if labels is None else np.asarray(labels, "int32")
        self.batch_size = int(batch_size)
        self.shuffle = shuffle
        self.seed = seed
        self.xflip = xflip
        self._order = (None, None)

    # Each process yields its own rows (see `distribute.sharded_by_the_data`).
    process_rows = True

    def __len__(self):
        return len(self.images) // self.batch_size

    @property
    def image_shape(self):
        """The shape of one image, `(h, w, c)`."""
        return tuple(self.images.shape[1:])

    def __getitem__(self, index):
        return self.batch_at(index, current_epoch())

    def batch_at(self, index, epoch):
        """Batch `index` of the order of `epoch` (this process's rows).

        Args:
            index: The batch's position in the epoch.
            epoch: The epoch whose order to read.

        Returns:
            float32 images in [-1, 1], with int32 labels when the dataset
            has them.
        """
        if not 0 <= index < len(self):
            raise IndexError(f"batch {index} of {len(self)}")
        order, flips = self._epoch(epoch)
        rows = slice(index * self.batch_size, (index + 1) * self.batch_size)
        rows = _process_rows(rows, self.batch_size)
        batch = scaled(self.images[order[rows]])
        batch = np.where(flips[rows, None, None, None], batch[:, :, ::-1], batch)
        if self.labels is None:
            return batch
        return batch, self.labels[order[rows]]

    def repeated(self):
        """This dataset without end: pass after pass, each read as a new epoch.

        Each pass takes the order of the epoch set (`set_epoch`) when the
        pass starts, as a repeated `load_images` tf.data dataset does: for
        `fit(..., steps_per_epoch=...)` over more steps than one pass.

        Returns:
            A `keras.utils.PyDataset` with no end (`num_batches` None).
        """
        return _Repeated(self)

    def skip(self, count):
        """The batches of each pass after the first `count`, as tf.data's
        `Dataset.skip` gives them: for the rest of an epoch that a backup
        from its middle resumes (`runs.timed_backup.TimedBackup`).

        Args:
            count: Batches to leave out, `0 <= count < len(self)`.

        Returns:
            A `keras.utils.PyDataset` of `len(self) - count` batches.
        """
        if isinstance(count, bool) or not 0 <= count < len(self):
            raise ValueError(
                f"Expected 0 <= count < the {len(self)} batches of a pass. "
                f"Received: count={count!r}."
            )
        return _Skipped(self, int(count))

    def _epoch(self, epoch):
        if self._order[0] != epoch:
            self._order = (
                epoch,
                epoch_order(
                    len(self.images), self.seed, epoch, self.shuffle, self.xflip
                ),
            )
        return self._order[1]


def underlying(data):
    """The `EpochBatches` that `data` is (or repeats), else None."""
    if isinstance(data, EpochBatches):
        return data
    if isinstance(data, (_Repeated, _Skipped)):
        return data.batches
    return None


class _Skipped(keras.utils.PyDataset):
    """`EpochBatches.skip(count)`: each pass after its first `count` batches."""

    process_rows = True

    def __init__(self, batches, count):
        super().__init__()
        self.batches, self.count = batches, count
        self.batch_size = batches.batch_size

    def __len__(self):
        return len(self.batches) - self.count

    def __getitem__(self, index):
        if not 0 <= index < len(self):
            raise IndexError(f"batch {index} of {len(self)}")
        return self.batches.batch_at(self.count + index, current_epoch())


class _Repeated(keras.utils.PyDataset):
    """`EpochBatches.repeated()`: the passes one after the other, no end."""

    process_rows = True

    def __init__(self, batches):
        super().__init__()
        self.batches = batches
        self.batch_size = batches.batch_size
        self._pass = (None, None)  # (pass, the epoch it reads)

    @property
    def num_batches(self):
        return None

    def __getitem__(self, index):
        this_pass, position = divmod(index, len(self.batches))
        if self._pass[0] != this_pass:
            self._pass = (this_pass, current_epoch())
        return self.batches.batch_at(position, self._pass[1])


def _process_rows(rows, batch_size):
    """This process's part of the global batch's rows (JAX, several processes)."""
    if keras.backend.backend() != "jax":
        return rows
    import jax

    processes = jax.process_count()
    if processes == 1:
        return rows
    size = batch_size // processes
    start = rows.start + jax.process_index() * size
    return slice(start, start + size)
