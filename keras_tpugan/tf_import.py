"""TensorFlow where it is used: required on its backend, optional on JAX.

On the TensorFlow backend the package imports TensorFlow at once. On the
JAX backend nothing imports it until something that needs it is used (a
`tf.data.Dataset` input, TFDS, the TensorBoard images of `SampleGrid`):
`tf` here is a stand-in that imports TensorFlow on first use, and says in
one line what needs it and how to install it when it is missing. A JAX
install without TensorFlow (`pip install "keras-tpugan[jax]"`) trains from
arrays, the offline MNIST subset and image folders.

(Keras has a lazy module of its own, `keras.src.utils.module_utils`, but
it is private API and does not name what needed TensorFlow.)
"""

import importlib
import os
import sys

INSTALL = (
    "`pip install 'keras-tpugan[cpu]'` (or `[gpu]`, `[tpu]`; with JAX: `[cpu,jax]`)"
)


def tensorflow(purpose="this"):
    """Imports TensorFlow, or says in one line that `purpose` needs it.

    On the JAX backend, TensorFlow is kept off the accelerators (their
    memory is JAX's) the first time it is imported here.

    Args:
        purpose: What needs TensorFlow, for the error message.

    Returns:
        The `tensorflow` module.

    Raises:
        ImportError: When TensorFlow is not installed.
    """
    first = "tensorflow" not in sys.modules
    try:
        tf = importlib.import_module("tensorflow")
    except ImportError as e:
        raise ImportError(
            f"{purpose} needs TensorFlow, which is not installed "
            f"({e}). Install it: {INSTALL}."
        ) from e
    if first and os.environ.get("KERAS_BACKEND") == "jax":
        try:
            tf.config.set_visible_devices([], "GPU")
        except RuntimeError:  # TensorFlow already initialized its devices
            pass
    return tf


def is_dataset(x):
    """Whether `x` is a `tf.data.Dataset`, without importing TensorFlow.

    Args:
        x: Anything.

    Returns:
        A bool (False whenever TensorFlow was never imported: no dataset
        can exist then).
    """
    tf = sys.modules.get("tensorflow")
    data = getattr(tf, "data", None)
    return data is not None and isinstance(x, data.Dataset)


class _LazyTensorFlow:
    """`tensorflow`, imported when one of its attributes is first read."""

    def __getattr__(self, name):
        return getattr(tensorflow(f"keras_tpugan's use of `tf.{name}`"), name)


tf = _LazyTensorFlow()
