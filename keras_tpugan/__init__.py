"""keras-tpugan: a Keras-native GAN trainer for TPUs and GPUs."""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_tpugan import native_logs  # noqa: E402

with native_logs.hidden(native_logs.quiet_command()):
    if os.environ["KERAS_BACKEND"] == "tensorflow":
        # Needed at once (and said so when missing); on JAX TensorFlow is
        # imported only when something needs it (see keras_tpugan.tf_import).
        from keras_tpugan.tf_import import tensorflow as _tensorflow

        _tensorflow(
            "The TensorFlow backend (the default; KERAS_BACKEND=jax trains "
            "without TensorFlow)"
        )
    import keras

if keras.backend.backend() not in ("tensorflow", "jax"):
    raise ImportError(
        "keras_tpugan supports the TensorFlow and JAX backends of Keras 3. "
        f"Received: KERAS_BACKEND={keras.backend.backend()!r}. Set "
        "KERAS_BACKEND=jax or KERAS_BACKEND=tensorflow before importing keras."
    )

from keras_tpugan import (
    callbacks,  # noqa: E402
    data,  # noqa: E402
    distribute,  # noqa: E402
    images,  # noqa: E402
    large_batch,  # noqa: E402
    losses,  # noqa: E402
    metrics,  # noqa: E402
    models,  # noqa: E402
    penalties,  # noqa: E402
    precision,  # noqa: E402
)
from keras_tpugan.augment import DiffAugment  # noqa: E402
from keras_tpugan.gan import GAN  # noqa: E402
from keras_tpugan.gan_optimizer import GANOptimizer  # noqa: E402
from keras_tpugan.keyed_dropout import KeyedDropout  # noqa: E402
from keras_tpugan.lars import LARS  # noqa: E402
from keras_tpugan.warmup import LinearWarmup  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "DiffAugment",
    "GAN",
    "GANOptimizer",
    "KeyedDropout",
    "LARS",
    "LinearWarmup",
    "callbacks",
    "data",
    "distribute",
    "images",
    "large_batch",
    "losses",
    "metrics",
    "models",
    "penalties",
    "precision",
    "__version__",
]
