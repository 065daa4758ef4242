"""Importing Keras, with TensorFlow's native start-up logs hidden in the command.

TensorFlow's C++ libraries print to the process's standard error while they
load (CUDA stubs, cuInit errors, oneDNN notices), some of them before their
logging is configured, so `TF_CPP_MIN_LOG_LEVEL` cannot hide them; the
command line hides them unless `--verbose` or `KERAS_TPUGAN_VERBOSE=1` asks
for them. The library itself, imported by a user, changes nothing.
"""

import contextlib
import functools
import os
import sys


def is_command_line():
    """Whether this process is the `keras-tpugan` command.

    Returns:
        A bool: True for the `keras-tpugan` script and for
        `python -m keras_tpugan.cli`.
    """
    argv = getattr(sys, "orig_argv", sys.argv)
    return os.path.basename(sys.argv[0]) == "keras-tpugan" or (
        "keras_tpugan.cli" in argv
    )


def quiet_command():
    """Whether this process is the `keras-tpugan` command without --verbose.

    Returns:
        A bool.
    """
    verbose = "--verbose" in sys.argv or os.environ.get(
        "KERAS_TPUGAN_VERBOSE", ""
    ).lower() in ("1", "true", "yes")
    return is_command_line() and not verbose


@contextlib.contextmanager
def hidden(hide=True):
    """Sends the process's standard error (fd 2) to /dev/null inside.

    Python exceptions raised inside still show: they are printed after the
    block, once fd 2 is back. `TF_CPP_MIN_LOG_LEVEL` is set to 3 (unless
    set) so the native logs of device start-up stay hidden too (errors
    that matter reach Python as exceptions).

    Args:
        hide: False makes this a no-op.

    Yields:
        None.
    """
    if not hide:
        yield
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


@functools.cache
def import_keras():
    """Imports Keras (TensorFlow first, on its backend) and checks the backend.

    In the `keras-tpugan` command without `--verbose` the native start-up
    logs are hidden (`hidden`). `import keras_tpugan` calls it; the command
    calls it when a command runs, after parsing its arguments. Once per
    process (each name of the package's API asks for it).

    Returns:
        The `keras` module.

    Raises:
        ImportError: For a backend other than TensorFlow and JAX, or the
            TensorFlow backend without TensorFlow installed.
    """
    with hidden(quiet_command()):
        if os.environ.get("KERAS_BACKEND", "tensorflow") == "tensorflow":
            # Needed at once (and said so when missing); on JAX TensorFlow is
            # imported only when something needs it (see keras_tpugan.tf_import).
            from keras_tpugan.tf_import import tensorflow

            tensorflow(
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
    return keras
