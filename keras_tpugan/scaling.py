"""Weak scaling over processes: `keras-tpugan bench --processes 1 2`.

For each process count N it starts N processes with `launcher.launch`
(localhost, each pinned to the same number of cores), each training the
GAN with the same per-process batch (a global batch of N times it, so each
process does the same work as the single one), and reports

    efficiency(N) = images/s(N) / (N x images/s(1)),

the weak-scaling efficiency. The processes synchronize every step, so
process 0's images/s are the run's.

Beside each count above 1 it can run the same N processes unconnected
(each its own one-process run, concurrently): what the host gives N
processes that share nothing, the ceiling for the data-parallel row.
"""

import json
import os
import sys

from keras_tpugan import launcher, reports

_MARK = "WEAK-SCALING "
COLUMNS = [
    ("processes", "processes", "d"),
    ("mode", "mode", "s"),
    ("cores_per_process", "cores each", "d"),
    ("batch_per_process", "batch each", "d"),
    ("global_batch", "global batch", "d"),
    ("images_per_sec", "images/s", ",.1f"),
    ("images_per_sec_per_process", "images/s per process", ",.1f"),
    ("efficiency", "efficiency", ".1%"),
]


def weak_scaling(
    processes=(1, 2),
    batch_size=64,
    precision="float32",
    xla=True,
    steps=20,
    repeats=3,
    width=64,
    latent_dim=64,
    cores_per_process=None,
    collective="auto",
    bytes_per_pack=0,
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
        xla: Compile the step with XLA.
        steps: Steps per timing.
        repeats: Timings per count (the median is reported).
        width: Model width.
        latent_dim: Latent size.
        cores_per_process: Cores pinned to each process (default: the
            cores split evenly over the largest count, so every count gets
            the same share).
        collective: The all-reduce across processes (TensorFlow; see
            `distribute.get_strategy`).
        bytes_per_pack: Its packing (TensorFlow; 0: TensorFlow decides).
        independent: Also run each count above 1 as unconnected processes
            (mode `"independent"`), the host's own ceiling.
        csv_path: If set, also write the rows there as CSV.
        printer: Called with each line of output.

    Returns:
        The rows: dicts with processes, batch_per_process, global_batch,
        mode (`"data-parallel"` or `"independent"`), images_per_sec
        (process 0's for independent processes, times N),
        images_per_sec_per_process and efficiency.

    Example:

    ```python
    from keras_tpugan.scaling import weak_scaling

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
    cores = len(os.sched_getaffinity(0))
    share = cores_per_process or max(1, cores // max(processes))
    printer(
        f"weak scaling: {share} core(s) per process of the {cores} here; batch "
        f"{batch_size} per process; {precision}, XLA {'on' if xla else 'off'}"
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
        )
        lines = []
        status = launcher.launch(
            [sys.executable, "-m", "keras_tpugan.scaling", json.dumps(settings)],
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
        rate = json.loads(result[0].split(_MARK, 1)[1])["images_per_sec"]
        if mode == "independent":
            rate *= n  # each process its own run; process 0's times N
        rows.append(
            {
                "processes": n,
                "mode": mode,
                "cores_per_process": share,
                "batch_per_process": batch_size,
                "global_batch": batch_size * n,
                "images_per_sec": round(rate, 1),
                "images_per_sec_per_process": round(rate / n, 1),
            }
        )
        printer(str(rows[-1]))
    base = rows[0]["images_per_sec_per_process"]  # the first count's
    for row in rows:
        row["efficiency"] = round(row["images_per_sec_per_process"] / base, 3)
    for line in reports.markdown_table(rows, COLUMNS):
        printer(line)
    if csv_path:
        reports.write_csv(rows, csv_path)
    return rows


def _measure_this_process(settings):
    """One rank: the GAN's images/s at the global batch, under the cluster."""
    from keras_tpugan import bench, distribute

    strategy = distribute.get_strategy(
        "cpu" if settings["independent"] else "auto",
        collective=settings["collective"],
        bytes_per_pack=settings["bytes_per_pack"],
    )
    rate, _ = bench.measure(
        settings["precision"],
        settings["jit_compile"],
        settings["batch_size"],
        settings["steps"],
        settings["width"],
        settings["latent_dim"],
        settings["repeats"],
        strategy,
    )
    print(_MARK + json.dumps({"images_per_sec": rate}), flush=True)


if __name__ == "__main__":
    _measure_this_process(json.loads(sys.argv[1]))
