"""The benchmarks' tables: throughput, peers and profiles as Markdown, the
throughput CSV read back, and the accelerator benchmark's files."""

import csv
import os

from keras_tpugan.runs.results import fmt, markdown_table, write_csv


def read_throughput_csv(path):
    """Reads the CSV that `throughput.throughput_matrix` writes, typed back.

    Args:
        path: The CSV file.

    Returns:
        The rows, with bools, ints and floats (None for failed cells).
    """

    def number(text):
        return None if text in ("", "None") else float(text)

    with open(path, newline="") as f:
        return [
            {
                **row,
                "xla": row["xla"] == "True",
                "replicas": int(row["replicas"]),
                "batch_size": int(row["batch_size"]),
                "images_per_sec": number(row["images_per_sec"]),
                "gflops_per_sec": number(row["gflops_per_sec"]),
                "fraction_of_matmul": number(row["fraction_of_matmul"]),
                "peak_host_mib": number(row.get("peak_host_mib", "")),
                "peak_device_mib": number(row.get("peak_device_mib", "")),
            }
            for row in csv.DictReader(f)
        ]


def throughput_table(rows):
    """Returns the rows as Markdown table lines, with ratios.

    "vs float32 no-XLA" compares a cell with the float32, XLA-off cell of
    the same backend, replicas and batch; "vs tensorflow" (when the rows
    hold several backends) with the same cell measured on TensorFlow.
    """

    def rate(backend, precision, xla, replicas, batch):
        return cells.get((backend, precision, xla, replicas, batch))

    cells = {
        (
            r.get("backend", "tensorflow"),
            r["precision"],
            r["xla"],
            r["replicas"],
            r["batch_size"],
        ): r["images_per_sec"]
        for r in rows
    }
    several = len({key[0] for key in cells}) > 1
    lines = [
        "",
        "| backend | precision | XLA | replicas | batch | images/s "
        "| vs float32 no-XLA |"
        + (" vs tensorflow |" if several else "")
        + " GFLOP/s | of matmul | peak host MiB | peak device MiB |",
        "|---|---|---|---:|---:|---:|---:|"
        + ("---:|" if several else "")
        + "---:|---:|---:|---:|",
    ]
    for r in rows:
        backend = r.get("backend", "tensorflow")
        head = (
            f"| {backend} | {r['precision']} | {'on' if r['xla'] else 'off'} "
            f"| {r['replicas']} | {r['batch_size']} "
        )
        if r["images_per_sec"] is None:
            lines.append(
                head
                + "| failed | - |"
                + (" - |" if several else "")
                + " - | - | - | - |"
            )
            continue
        key = (r["replicas"], r["batch_size"])
        base = rate(backend, "float32", False, *key)
        ratios = [f"{r['images_per_sec'] / base:.2f}x" if base else "-"]
        if several:
            tf_rate = rate("tensorflow", r["precision"], r["xla"], *key)
            ratios.append(f"{r['images_per_sec'] / tf_rate:.2f}x" if tf_rate else "-")
        lines.append(
            head
            + f"| {r['images_per_sec']:.0f} | "
            + " | ".join(ratios)
            + f" | {r['gflops_per_sec']:.1f} | {100 * r['fraction_of_matmul']:.1f}% "
            + f"| {fmt(r.get('peak_host_mib'), '.0f')} "
            + f"| {fmt(r.get('peak_device_mib'), '.0f')} |"
        )
    return lines


def peers_table(rows):
    """Returns `peers.peers_table`'s rows as Markdown table lines.

    One line per mode and batch, with images/s and the ratios to the best
    tutorial and keras-io modes measured at the same batch in the same run.
    """
    columns = [
        ("batch_size", "batch", "d"),
        ("mode", "mode", "s"),
        ("images_per_sec", "images/s", ".1f"),
        ("vs_best_tutorial", "vs best tutorial", ".2f"),
        ("vs_best_keras_io", "vs best keras-io", ".2f"),
    ]
    return ["", *markdown_table(rows, columns)]


def profile_table(rows):
    """Returns `step_profile.profile_modes`'s rows as Markdown table lines.

    One line per mode and batch: wall time and kernel time per step, the
    share of the kernel time in convolutions and matrix products, and the
    op types that took the most.
    """
    columns = [
        ("batch_size", "batch", "d"),
        ("mode", "mode", "s"),
        ("wall_ms", "wall ms/step", ".1f"),
        ("kernel_ms", "kernel ms/step (all threads)", ".1f"),
        ("matrix_share", "conv + matmul share", ".2f"),
        ("top_ops", "top op types (ms/step)", "s"),
    ]
    return ["", *markdown_table(rows, columns)]


# The accelerator benchmark's two Markdown tables: `(key, header, format)` columns for
# `results.markdown_table`, and the parts each shows.
ACCELERATOR_SPEED_TABLE = (
    ("throughput", "largest", "steps_per_execution", "fid", "input"),
    (
        ("part", "part", "s"),
        ("model", "model", "s"),
        ("precision", "precision", "s"),
        ("batch_size", "batch", "d"),
        ("steps_per_execution", "steps/call", "d"),
        ("images_per_sec", "images/s", ",.0f"),
        ("tflops_per_sec", "TFLOP/s", ".4g"),
        ("mfu_vs_chip_peak", "of chip peak", ".3g"),
        ("mfu_vs_matmul", "of matmul", ".3g"),
        ("note", "note", "s"),
    ),
)
ACCELERATOR_STUDY_TABLE = (
    ("study",),
    (
        ("batch_size", "batch", "d"),
        ("images_per_sec", "images/s", ",.0f"),
        ("first_epoch_seconds", "first epoch s", ".1f"),
        ("seconds_per_epoch", "s/epoch", ".1f"),
        ("epochs", "epochs", "d"),
        ("final_fcd", "final FCD", ".1f"),
        ("target_fcd", "target FCD", ".1f"),
        ("steps_to_target", "steps to target", "d"),
        ("images_to_target", "images to target", ",d"),
        ("seconds_to_target", "s to target", ".1f"),
        ("fit_seconds", "fit s (all)", ".1f"),
        ("note", "note", "s"),
    ),
)


def write_accelerator_results(rows, header, out_dir, printer):
    """Writes the accelerator benchmark's rows as `accelerator.csv` and its
    tables as `accelerator.md` under `out_dir`, and prints the tables.

    Args:
        rows: The benchmark's rows (dicts with `bench.accelerator.FIELDS`).
        header: Lines above the tables (device, versions, peaks).
        out_dir: An existing folder.
        printer: Called with each line of the tables.
    """
    write_csv(rows, os.path.join(out_dir, "accelerator.csv"))
    lines = [*header, ""]
    for parts, columns in (ACCELERATOR_SPEED_TABLE, ACCELERATOR_STUDY_TABLE):
        shown = sorted(
            (row for row in rows if row["part"] in parts),
            key=lambda row: (
                parts.index(row["part"]),
                row["model"],
                row["precision"],
                row["batch_size"],
                row["steps_per_execution"] or 0,
            ),
        )
        lines += [*markdown_table(shown, columns), ""]
    with open(os.path.join(out_dir, "accelerator.md"), "w") as f:
        f.write("\n".join(lines))
    for line in lines:
        printer(line)
