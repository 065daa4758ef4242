"""Hiding TensorFlow's native start-up logs in the `keras-tpugan` command.

TensorFlow's C++ libraries print to the process's standard error while they
load (CUDA stubs, cuInit errors, oneDNN notices), some of them before their
logging is configured, so `TF_CPP_MIN_LOG_LEVEL` cannot hide them; the
command line hides them unless `--verbose` or `KERAS_TPUGAN_VERBOSE=1` asks
for them. The library itself, imported by a user, changes nothing.
"""

import contextlib
import os
import sys


def quiet_command():
    """Whether this process is the `keras-tpugan` command without --verbose.

    Returns:
        A bool.
    """
    argv = getattr(sys, "orig_argv", sys.argv)
    command = os.path.basename(sys.argv[0]) == "keras-tpugan" or (
        "keras_tpugan.cli" in argv
    )
    verbose = "--verbose" in sys.argv or os.environ.get(
        "KERAS_TPUGAN_VERBOSE", ""
    ).lower() in ("1", "true", "yes")
    return command and not verbose


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
