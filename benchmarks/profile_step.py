"""Where a training step's time goes on the device: a JAX profile of a few steps.

Usage:
    python benchmarks/profile_step.py --out runs/profile
    python benchmarks/profile_step.py --model dcgan-64x64x3 --batch-size 512

Builds one of the accelerator benchmark's GANs
(`keras_tpugan.bench.accelerator_cells.MODELS`) on one repeated batch,
compiles its step, then records `--steps` steps with
`jax.profiler.trace` (a Perfetto trace, `perfetto_trace.json.gz`, under
`--out`). It prints the steps' wall time and, for each device stream in the
trace, the time its kernels were busy and the kernels that took most of it:
a device busy for a small part of the wall time waits on the host (launches,
`fit`'s loop); a busy one shows which kernels to look at.
"""

import argparse
import collections
import glob
import gzip
import json
import os
import time

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import keras  # noqa: E402

from keras_tpugan import distribute  # noqa: E402
from keras_tpugan.bench import accelerator_cells


def kernel_table(trace_file, wall_seconds, top=8):
    """Busy time per device stream and its costliest kernels, as lines.

    Args:
        trace_file: A Perfetto trace (`.json.gz`) written by
            `jax.profiler.trace(..., create_perfetto_trace=True)`.
        wall_seconds: The traced steps' wall time, for the busy fraction.
        top: Kernels listed per stream.

    Returns:
        A list of printable lines.
    """
    with gzip.open(trace_file, "rt") as f:
        events = json.load(f)["traceEvents"]
    processes, threads = {}, {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            processes[e["pid"]] = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
    busy = collections.defaultdict(collections.Counter)
    counts = collections.Counter()
    for e in events:
        if e.get("ph") != "X" or "dur" not in e:
            continue
        process = processes.get(e["pid"], "")
        if "/host:" in process.lower() or "python" in process.lower():
            continue  # host threads: the device's streams are what we want
        key = (process, threads.get((e["pid"], e["tid"]), str(e["tid"])))
        busy[key][e["name"]] += float(e["dur"])
        counts[key] += 1
    lines = []
    for key, names in sorted(busy.items(), key=lambda kv: -sum(kv[1].values())):
        total = sum(names.values())
        lines.append(
            f"{key[0]} / {key[1]}: busy {total / 1e3:.2f} ms "
            f"({total / 1e4 / wall_seconds:.1f}% of the wall time) in "
            f"{counts[key]} events"
        )
        for name, us in names.most_common(top):
            share = 100 * us / total
            lines.append(f"    {us / 1e3:9.3f} ms  {share:5.1f}%  {name[:90]}")
    return lines or [f"no device streams in {trace_file} (host only)"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/profile")
    parser.add_argument(
        "--model", default="dcgan-28x28x1", choices=sorted(accelerator_cells.MODELS)
    )
    parser.add_argument(
        "--precision", default="mixed_bfloat16", choices=["float32", "mixed_bfloat16"]
    )
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args(argv)
    strategy = distribute.get_strategy("auto")
    gan, ds = accelerator_cells.one_batch_gan(
        args.model, args.precision, args.batch_size, strategy, smoke=False
    )
    for _ in range(2):  # compile, as the benchmark does
        gan.fit(ds, epochs=1, steps_per_epoch=2, verbose=0)
    os.makedirs(args.out, exist_ok=True)
    with jax.profiler.trace(args.out, create_perfetto_trace=True):
        start = time.perf_counter()
        gan.fit(ds, epochs=1, steps_per_epoch=args.steps, verbose=0)
        wall = time.perf_counter() - start
    keras.mixed_precision.set_global_policy("float32")
    print(
        f"{args.model}, {args.precision}, batch {args.batch_size}: {args.steps} "
        f"steps in {wall * 1e3:.1f} ms ({wall * 1e3 / args.steps:.2f} ms a step, "
        f"{args.steps * args.batch_size / wall:,.0f} images/s) on "
        f"{jax.devices()[0].device_kind}, under the profiler"
    )
    traces = glob.glob(os.path.join(args.out, "**", "*.json.gz"), recursive=True)
    if not traces:
        print(f"no Perfetto trace under {args.out}")
        return
    for line in kernel_table(max(traces, key=os.path.getmtime), wall):
        print(line)


if __name__ == "__main__":
    main()
