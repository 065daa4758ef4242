"""keras-tpugan: a Keras-native GAN trainer for TPUs and GPUs.

`import keras_tpugan` imports Keras (and TensorFlow on its backend) and the
package's public API. The `keras-tpugan` command is the one exception: it
parses its arguments first, so that `--help` and `--version` answer without
Keras, and imports the API when a command runs (any attribute of the
package read before then imports it too).
"""

import importlib
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_tpugan import native_logs  # noqa: E402

__version__ = "0.1.0"

# The public API: each name and the module that holds it.
_API = {
    "DiffAugment": "keras_tpugan.augment",
    "GAN": "keras_tpugan.gan",
    "GANOptimizer": "keras_tpugan.gan_optimizer",
    "KeyedDropout": "keras_tpugan.keyed_dropout",
    "LARS": "keras_tpugan.lars",
    "LinearWarmup": "keras_tpugan.warmup",
    "callbacks": None,
    "data": None,
    "distribute": None,
    "images": None,
    "large_batch": None,
    "losses": None,
    "metrics": None,
    "models": None,
    "penalties": None,
    "precision": None,
}

__all__ = [*_API, "__version__"]


def __getattr__(name):
    if name not in _API:
        raise AttributeError(f"module 'keras_tpugan' has no attribute {name!r}")
    native_logs.import_keras()
    module = importlib.import_module(_API[name] or f"keras_tpugan.{name}")
    value = module if _API[name] is None else getattr(module, name)
    globals()[name] = value
    return value


def _import_api():
    """Imports Keras and binds every public name (the command calls it when
    a command runs, so that Keras knows the package's saved classes)."""
    for name in _API:
        __getattr__(name)


if not native_logs.is_command_line():
    _import_api()
