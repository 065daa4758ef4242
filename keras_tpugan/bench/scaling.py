"""Weak scaling over processes: `keras-tpugan bench --processes 1 2`.

For each process count N it starts N processes with `launcher.launch`
(localhost, each pinned to the same number of cores), each training the
GAN with the same per-process batch (a global batch of N times it, so each
process does the same work as the single one), and reports

    efficiency(N) = images/s(N) / (N x images/s(1)),

the weak-scaling efficiency. The processes synchronize every step, so
process 0's images/s are the run's. Images/s are the steady state: steps
timed from the end of a fit's first step to the end of its last, as
`fit`'s batch callbacks see them. What a fit spends outside its steps
(start-up, the first step, the end of the epoch) is reported beside them,
with the efficiency over whole fits, which counts it.

Beside each count above 1 it can run the same N processes unconnected
(each its own one-process run, concurrently): what the host gives N
processes that share nothing, the ceiling for the data-parallel row.
"""

import json
import os
import sys
import time

from keras_tpugan.launch import launcher
from keras_tpugan.runs import results

_MARK = "WEAK-SCALING "
COLUMNS = [
    ("processes", "processes", "d"),
    ("mode", "mode", "s"),
    ("cores_per_process", "cores each", "d"),
    ("xla", "XLA", "s"),
    ("all_reduce_dtype", "all-reduce", "s"),
    ("batch_per_process", "batch each", "d"),
    ("global_batch", "global batch", "d"),
    ("images_per_sec", "images/s", ",.1f"),
    ("images_per_sec_per_process", "images/s per process", ",.1f"),
    ("efficiency", "efficiency", ".1%"),
    ("fit_seconds_outside_steps", "s per fit outside steps", ".2f"),
    ("efficiency_whole_fit", "efficiency, whole fit", ".1%"),
]


def weak_scaling(
    processes=(1, 2),
    batch_size=64,
    precision="float32",
    xla="auto",
    steps=20,
    repeats=3,
    width=64,
    latent_dim=64,
    cores_per_process=None,
    collective="auto",
    bytes_per_pack=0,
    all_reduce_dtype="float32",
    independent=True,
    csv_path=None,
    printer=print,
):
    """Measures images/s for each process count at a fixed per-process batch.

    Args:
        processes: Process counts to run, in order (start with 1: the
            efficiencies are relative to the first count's images/s per
            process).
        batch_size: The batch of EACH process (the global batch is N times it).
        precision: The dtype policy.
        xla: Compile the step with XLA: True, False or `"auto"` (the
            library's choice for each process count; see
            `TrainConfig.jit_compile`).
        steps: Steps per timed fit (at least 2).
        repeats: Timings per count (the median is reported).
        width: Model width.
        latent_dim: Latent size.
        cores_per_process: Cores pinned to each process (default: the
            cores split evenly over the largest count, so every count gets
            the same share).
        collective: The all-reduce across processes (TensorFlow; see
            `distribute.get_strategy`).
        bytes_per_pack: Its packing (TensorFlow; 0: TensorFlow decides).
        all_reduce_dtype: The type the gradients cross the processes in
            (`"float32"` or `"bfloat16"`; see `GAN.compile`).
        independent: Also run each count above 1 as unconnected processes
            (mode `"independent"`), the host's own ceiling.
        csv_path: If set, also write the rows there as CSV.
        printer: Called with each line of output.

    Returns:
        The rows: dicts with processes, batch_per_process, global_batch,
        mode (`"data-parallel"` or `"independent"`), images_per_sec
        (process 0's for independent processes, times N),
        images_per_sec_per_process, efficiency, fit_seconds_outside_steps
        and efficiency_whole_fit.

    Example:

    ```python
    from keras_tpugan.bench.scaling import weak_scaling

    rows = weak_scaling(processes=(1, 2), batch_size=64)
    rows[1]["efficiency"]  # images/s(2) / (2 x images/s(1))
    ```
    """
    processes = list(processes)
    if not processes or any(
        isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in processes
    ):
        raise ValueError(
            "Expected process counts >= 1, for example --processes 1 2. "
            f"Received: {processes!r}."
        )
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 2:
        raise ValueError(
            "Expected at least 2 steps per timing (the steady state is timed "
            f"from the end of the first step). Received: steps={steps!r}."
        )
    cores = len(os.sched_getaffinity(0))
    share = cores_per_process or max(1, cores // max(processes))
    xla_name = {True: "on", False: "off"}.get(xla, xla)
    printer(
        f"weak scaling: {share} core(s) per process of the {cores} here; batch "
        f"{batch_size} per process; {precision}, XLA {xla_name}"
    )
    runs = [(n, "data-parallel") for n in processes]
    if independent:
        runs += [(n, "independent") for n in processes if n > 1]
    rows = []
    for n, mode in runs:
        settings = dict(
            independent=mode == "independent",
            # Unconnected processes each run their own batch; connected ones
            # share the global batch.
            batch_size=batch_size if mode == "independent" else batch_size * n,
            precision=precision,
            jit_compile=xla,
            width=width,
            latent_dim=latent_dim,
            steps=steps,
            repeats=repeats,
            collective=collective,
            bytes_per_pack=bytes_per_pack,
            all_reduce_dtype=all_reduce_dtype,
        )
        lines = []
        status = launcher.launch(
            [sys.executable, "-m", "keras_tpugan.bench.scaling", json.dumps(settings)],
            n,
            cores_per_process=share,
            printer=lines.append,
        )
        result = [line for line in lines if line.startswith(f"[rank 0] {_MARK}")]
        if status or not result:
            for line in lines[-20:]:
                printer(line)
            raise ValueError(
                f"Expected the {n}-process benchmark to finish. Received: exit "
                f"status {status} (its last lines are above)."
            )
        measured = json.loads(result[0].split(_MARK, 1)[1])
        rate, whole = measured["images_per_sec"], measured["images_per_sec_whole_fit"]
        if mode == "independent":
            # Each process its own run; process 0's times N.
            rate, whole = rate * n, whole * n
        rows.append(
            {
                "processes": n,
                "mode": mode,
                "cores_per_process": share,
                "xla": "on" if measured["xla"] else "off",
                "all_reduce_dtype": all_reduce_dtype,
                "batch_per_process": batch_size,
                "global_batch": batch_size * n,
                "images_per_sec": round(rate, 1),
                "images_per_sec_per_process": round(rate / n, 1),
                "fit_seconds_outside_steps": round(measured["outside_steps_s"], 3),
                "images_per_sec_whole_fit": round(whole, 1),
            }
        )
        printer(str(rows[-1]))
    base = rows[0]["images_per_sec_per_process"]  # the first count's
    base_whole = rows[0]["images_per_sec_whole_fit"]
    for row in rows:
        n = row["processes"]
        row["efficiency"] = round(row["images_per_sec_per_process"] / base, 3)
        row["efficiency_whole_fit"] = round(
            row["images_per_sec_whole_fit"] / n / base_whole, 3
        )
    for line in results.markdown_table(rows, COLUMNS):
        printer(line)
    if csv_path:
        results.write_csv(rows, csv_path)
    return rows


def _measure_this_process(settings):
    """One rank: the GAN's images/s at the global batch, under the cluster.

    Prints the medians over the timed fits of: images/s in the steady state
    (batch-end to batch-end), images/s over the whole `fit` call, and the
    seconds a fit spends outside the steps it times.
    """
    import keras
    import numpy as np

    from keras_tpugan import distribute
    from keras_tpugan.bench import throughput

    strategy = distribute.get_strategy(
        "cpu" if settings["independent"] else "auto",
        collective=settings["collective"],
        bytes_per_pack=settings["bytes_per_pack"],
    )
    gan, ds = throughput.compiled_gan_on_one_batch(
        settings["precision"],
        settings["jit_compile"],
        settings["batch_size"],
        settings["width"],
        settings["latent_dim"],
        strategy,
        all_reduce_dtype=settings["all_reduce_dtype"],
    )
    steps, batch = settings["steps"], settings["batch_size"]
    steady, whole, outside = [], [], []
    for _ in range(settings["repeats"]):
        ends = []
        stamp = keras.callbacks.LambdaCallback(
            on_train_batch_end=lambda batch, logs, ends=ends: ends.append(
                time.perf_counter()
            )
        )
        start = time.perf_counter()
        gan.fit(ds, epochs=1, steps_per_epoch=steps, verbose=0, callbacks=[stamp])
        wall = time.perf_counter() - start
        timed = ends[-1] - ends[0]  # steps 2..N
        steady.append((steps - 1) * batch / timed)
        whole.append(steps * batch / wall)
        outside.append(wall - timed * steps / (steps - 1))
    result = {
        "images_per_sec": float(np.median(steady)),
        "images_per_sec_whole_fit": float(np.median(whole)),
        "outside_steps_s": float(np.median(outside)),
        "xla": bool(gan.xla),
    }
    print(_MARK + json.dumps(result), flush=True)


if __name__ == "__main__":
    _measure_this_process(json.loads(sys.argv[1]))
