"""`Snapshots`: the whole GAN saved every few epochs and after the last."""

import os
import tempfile

import keras

from keras_tpugan.runs import results


class Snapshots(keras.callbacks.Callback):
    """Saves the whole GAN every `every` epochs and after the last one.

    Every process of a run saves; only the chief's files are kept (the
    others write into a temporary folder that is deleted). Each file is
    written whole or not at all (`results.replaced_whole`).
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
        name = f"gan_epoch_{epoch:04d}.keras"
        if self.chief:
            os.makedirs(self.directory, exist_ok=True)
            path = os.path.join(self.directory, name)
            with results.replaced_whole(path) as partial:
                self.model.save(partial)
        else:
            with tempfile.TemporaryDirectory() as scratch:
                self.model.save(os.path.join(scratch, name))
        self._saved = epoch
