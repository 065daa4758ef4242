"""`Snapshots`: the whole GAN saved every few epochs and after the last.

`snapshot_path`, `snapshot_epoch` and `latest_snapshot` are the one place that knows the
snapshots' names (`snapshots/gan_epoch_NNNN.keras`).
"""

import os
import re
import tempfile

import keras

from keras_tpugan.whole_files import replaced_whole


class Snapshots(keras.callbacks.Callback):
    """Saves the whole GAN every `every` epochs and after the last one.

    Every process of a run saves; only the chief's files are kept (the
    others write into a temporary folder that is deleted). Each file is
    written whole or not at all (`whole_files.replaced_whole`).
    """

    def __init__(self, directory, every, chief=True):
        super().__init__()
        self.directory = directory
        self.every = every
        self.chief = chief

    def on_train_begin(self, logs=None):
        self._done = self._saved = None

    def on_epoch_end(self, epoch, logs=None):
        self._done = epoch + 1
        if self.every and self._done % self.every == 0:
            self._save(self._done)

    def on_train_end(self, logs=None):
        if self._done is not None and self._done != self._saved:
            self._save(self._done)

    def _save(self, epoch):
        if self.chief:
            os.makedirs(self.directory, exist_ok=True)
            with replaced_whole(snapshot_path(self.directory, epoch)) as path:
                self.model.save(path)
        else:
            with tempfile.TemporaryDirectory() as scratch:
                self.model.save(snapshot_path(scratch, epoch))
        self._saved = epoch


def snapshot_path(directory, epoch):
    """The snapshot of the GAN after `epoch` epochs, in `directory`."""
    return os.path.join(directory, f"gan_epoch_{epoch:04d}.keras")


def snapshot_epoch(path):
    """The epoch of the snapshot at `path` (from its name), or None when the
    name is not a snapshot's."""
    match = re.fullmatch(r"gan_epoch_(\d+)\.keras", os.path.basename(path))
    return int(match.group(1)) if match else None


def latest_snapshot(directory):
    """`(path, epochs)` of the latest snapshot in `directory` (by its epoch),
    or None when it holds none (or does not exist)."""
    names = os.listdir(directory) if os.path.isdir(directory) else ()
    epochs = [epoch for name in names if (epoch := snapshot_epoch(name)) is not None]
    if not epochs:
        return None
    return snapshot_path(directory, max(epochs)), max(epochs)
