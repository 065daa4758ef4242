"""Running on a chosen Keras backend, in a fresh process when this one differs.

Keras reads `KERAS_BACKEND` once, when it is first imported (for this
package: when `keras_tpugan` is imported), so running on another backend
takes another Python process. The CLI and the benchmark use these helpers.
"""

import json
import os
import subprocess
import sys

BACKENDS = ("tensorflow", "jax")


def runs_on(backend):
    """Whether this process's Keras runs on `backend` (None: any backend).

    Args:
        backend: `"tensorflow"`, `"jax"` or None.

    Returns:
        A bool.
    """
    import keras

    return backend is None or keras.backend.backend() == backend


def run_cli(backend, argv):
    """Runs `keras-tpugan ARGV` in a fresh process whose Keras runs `backend`.

    Args:
        backend: `"tensorflow"` or `"jax"`.
        argv: The command's arguments.

    Returns:
        The process's exit status.
    """
    cmd = [sys.executable, "-m", "keras_tpugan.cli", *argv]
    return subprocess.run(cmd, env=_env(backend), check=False).returncode


def call(backend, function, **kwargs):
    """Calls `function(**kwargs)` in a fresh process whose Keras runs `backend`.

    Args:
        backend: `"tensorflow"` or `"jax"`.
        function: `"package.module:name"` of a function of this package.
        **kwargs: JSON-serializable keyword arguments.

    Returns:
        The process's exit status (0 when the function returned).

    Example:

    ```python
    backends.call(
        "jax", "keras_tpugan.bench.throughput:throughput_matrix", batch_sizes=[64]
    )
    ```
    """
    module, _, name = function.partition(":")
    code = (
        "import importlib, json, sys; "
        f"getattr(importlib.import_module({module!r}), {name!r})"
        "(**json.loads(sys.argv[1]))"
    )
    cmd = [sys.executable, "-c", code, json.dumps(kwargs)]
    return subprocess.run(cmd, env=_env(backend), check=False).returncode


def _env(backend):
    if backend not in BACKENDS:
        raise ValueError(
            f"Expected a backend in {BACKENDS}. Received: backend={backend!r}."
        )
    return {**os.environ, "KERAS_BACKEND": backend}
