"""`GANCallback`: the checks every keras_tpugan callback shares."""

import os
import tempfile

import keras


class GANCallback(keras.callbacks.Callback):
    """Base class: checks the model and the output directory up front.

    At `on_train_begin` it checks that the model is a `keras_tpugan.GAN`
    and that `directory` can be written (so a bad path fails before an hour
    of training, not after). Only the chief writes files.

    Callbacks that add values to the logs set `log_order` (an int): `GAN.fit`
    runs them first, in that order, before every other callback whatever
    the order of the list, so the others (History, EarlyStopping, a CSV
    logger, ...) see the values in the same epoch.

    Args:
        directory: Output directory, created if missing (None: no files).
    """

    log_order = None

    def __init__(self, directory=None):
        super().__init__()
        self.directory = None if directory is None else os.fspath(directory)

    def on_train_begin(self, logs=None):
        from keras_tpugan.gan import GAN

        if not isinstance(self.model, GAN):
            raise ValueError(
                f"{type(self).__name__} expects a keras_tpugan.GAN. Received: "
                f"a {type(self.model).__name__}. Attach it to GAN.fit."
            )
        self.chief = self.model.placement.chief
        if self.directory is not None and self.chief:
            try:
                os.makedirs(self.directory, exist_ok=True)
                tempfile.TemporaryFile(dir=self.directory).close()
            except OSError as e:
                raise ValueError(
                    f"{type(self).__name__} cannot write to {self.directory!r}: "
                    f"{e.strerror}. Pass a writable directory."
                ) from e

    def due(self, epoch, every_n_epochs):
        """Whether `epoch` (0-based) is every `every_n_epochs`-th, or the last."""
        last = epoch + 1 == self.params.get("epochs")
        return (epoch + 1) % every_n_epochs == 0 or last

    def path(self, name):
        """Returns `directory/name`."""
        return os.path.join(self.directory, name)


# PNG compression for files written while training: zlib's fastest level
# (Pillow's default, 6, took 16 ms for a 448x448 sample grid here, this
# 2.5 ms, for a file a tenth larger).
FAST_PNG = {"compress_level": 1}


def show_inline(path, display_id):
    """Shows (or refreshes in place) an image in a notebook cell's output.

    Does nothing outside a Jupyter/Colab kernel.

    Args:
        path: PNG file to show.
        display_id: Identifies the output to update in place.
    """
    try:
        from IPython import get_ipython
        from IPython.display import Image, display, update_display
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or not hasattr(shell, "kernel"):
        return
    image = Image(filename=path)
    if display_id in _shown:
        update_display(image, display_id=display_id)
    else:
        display(image, display_id=display_id)
        _shown.add(display_id)


_shown = set()
