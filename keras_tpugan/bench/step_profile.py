"""Where a training step's time goes: kernel time by op type, per mode.

`profile_modes` traces a few steps of each mode of `peers.MODES` with the
backend's own profiler (`tf.profiler.experimental` on TensorFlow,
`jax.profiler` on JAX; both write an XSpace protobuf) and sums the kernels'
durations over every compute thread, grouped by op type: TensorFlow's op
types (`_MklNativeConv2DBackpropInput`, `Mul`, ...) or XLA's HLO names with
their numbers dropped (`convolution-base-dilated`, `fusion`, ...). Reading
the XSpace takes a few lines here because TensorBoard's profile plugin,
which reads it otherwise, is a web app, not a library.

Used by `keras-tpugan bench --peers --profile`.
"""

import collections
import glob
import os
import re
import tempfile
import time

import keras

from keras_tpugan.bench import peers
from keras_tpugan.tf_import import tf

# Spans that contain kernels or wait for them rather than being one
# (executor and thread-pool bookkeeping), left out so that no time is
# counted twice; every "Class::method" span is one of these too.
_CONTAINERS = (
    "ThunkExecutor",
    "ParallelFor",
    "BlockUntilReady",
    "ExecutorDoneCallback",
    "RemoteCallOpDone",
)
# Compute threads: TensorFlow's executor, XLA in TensorFlow (Eigen pool) and
# XLA in JAX.
_COMPUTE_LINES = ("tf_Compute", "tf_numa", "tf_XLA")
_MATRIX = re.compile(r"conv|matmul|dot", re.IGNORECASE)


def profile_modes(
    batch_sizes=(16, 128),
    modes=None,
    steps=16,
    top=5,
    norm="layer",
    width=peers.WIDTH,
    printer=print,
):
    """Kernel time per step by op type, for modes of the peers benchmark.

    Args:
        batch_sizes: Batch sizes (one device).
        modes: Names from `peers.MODES` (default: every mode of
            `peers.backend_modes()`).
        steps: Steps traced per mode, after the mode is compiled.
        top: Op types listed per mode.
        norm: The generator's normalization.
        width: The networks' width.
        printer: Called with each line of output (None: print nothing).

    Returns:
        The rows: dicts with mode, batch_size, `wall_ms` (per step, under
        the profiler), `kernel_ms` (kernel time per step summed over
        threads), `matrix_share` (the part of it in convolutions and matrix
        products) and `top_ops` ("op type ms/step; ...").

    Example:

    ```python
    rows = profile_modes(batch_sizes=(16,), modes=["tutorial + XLA"], steps=4)
    ```
    """
    printer = printer or (lambda line: None)
    chosen = peers.chosen_modes(modes)
    if steps < 1:
        raise ValueError(f"Expected steps >= 1. Received: steps={steps}.")
    rows = []
    for batch in batch_sizes:
        images = peers.noise_batch(batch)
        for name, kind, policy, xla, spe, update in chosen:
            runner, iterator = peers.build_runner(
                kind, policy, xla, spe, update, batch, images, norm, width
            )
            n = -(-steps // spe) * spe
            with tempfile.TemporaryDirectory() as logdir:
                _start(logdir)
                start = time.perf_counter()
                runner.run(iterator, n)
                wall = time.perf_counter() - start
                _stop()
                kernels = _kernel_ms(logdir)
            rows.append(_row(name, batch, wall, kernels, n, top))
            printer(str(rows[-1]))
    return rows


def _row(name, batch, wall, kernels, steps, top):
    total = sum(kernels.values())
    matrix = sum(ms for op, ms in kernels.items() if _MATRIX.search(op))
    ranked = sorted(kernels.items(), key=lambda kv: -kv[1])[:top]
    return {
        "mode": name,
        "batch_size": batch,
        "wall_ms": round(1000 * wall / steps, 1),
        "kernel_ms": round(total / steps, 1),
        "matrix_share": round(matrix / total, 2) if total else None,
        "top_ops": "; ".join(f"{op} {ms / steps:.1f}" for op, ms in ranked),
    }


def _start(logdir):
    if keras.backend.backend() == "jax":
        import jax

        jax.profiler.start_trace(logdir)
    else:
        tf.profiler.experimental.start(logdir)


def _stop():
    if keras.backend.backend() == "jax":
        import jax

        jax.profiler.stop_trace()
    else:
        tf.profiler.experimental.stop()


def _kernel_ms(logdir):
    """Milliseconds by op type over the compute threads of the trace."""
    totals = collections.Counter()
    for path in glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True):
        for line_name, events in _trace_lines(path):
            if not line_name.startswith(_COMPUTE_LINES):
                continue  # Python, tf.data and other host threads
            for name, milliseconds in events:
                op = _op_type(name)
                if op is not None:
                    totals[op] += milliseconds
    return totals


def _trace_lines(path):
    """`(line name, [(event name, ms), ...])` of every line of an xplane file.

    Read with the profiler's own reader: JAX's `ProfileData` (no TensorFlow
    needed), TensorFlow's XSpace proto on TensorFlow.
    """
    if keras.backend.backend() == "jax":
        from jax.profiler import ProfileData

        data = ProfileData.from_file(path)
        for plane in data.planes:
            for line in plane.lines:
                yield line.name, [(e.name, e.duration_ns / 1e6) for e in line.events]
        return
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    for plane in space.planes:
        names = plane.event_metadata
        for line in plane.lines:
            yield (
                line.name,
                [(names[e.metadata_id].name, e.duration_ps / 1e9) for e in line.events],
            )


def _op_type(name):
    if any(name.startswith(c) for c in _CONTAINERS) or "::" in name:
        return None
    if ":" in name:  # TensorFlow: "scope/op_name:OpType"
        return name.rsplit(":", 1)[1]
    return re.sub(r"\.\d+$", "", name)  # XLA: "fusion.12"
