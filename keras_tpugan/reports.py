"""Results tables and plots of the sweep, the tuner and the benchmark.

One writer for every tool: `write_results` saves rows as `results.csv`,
`results.json` and a Markdown `results.md`; `markdown_table` formats rows
by a column spec; the plots are matplotlib figures saved as PNG.
"""

import csv
import json
import math
import os

import numpy as np


def fmt(value, spec=".2f"):
    """Formats a cell: `-` for None and non-finite floats.

    Args:
        value: The value.
        spec: A format spec for numbers.

    Returns:
        A string.
    """
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return format(value, spec)
    return str(value)


def first_line(error, limit=200):
    """The first line of an error's message (its type's name if empty).

    Args:
        error: An exception.
        limit: Most characters kept (None: all).

    Returns:
        A string.
    """
    lines = str(error).strip().splitlines()
    return lines[0][:limit] if lines else type(error).__name__


def markdown_table(rows, columns):
    """Formats rows as Markdown table lines.

    Args:
        rows: Dicts.
        columns: `(key, header, spec)` triples; `spec` is a format spec, or
            a function from the row to the cell's text. A column with a
            spec other than `"s"` is right-aligned.

    Returns:
        A list of lines.
    """
    header = "| " + " | ".join(h for _, h, _ in columns) + " |"
    rule = "|" + "".join("---|" if s == "s" else "---:|" for _, _, s in columns)
    lines = [header, rule]
    for row in rows:
        cells = [
            spec(row) if callable(spec) else fmt(row.get(key), spec)
            for key, _, spec in columns
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def write_results(directory, rows, columns, payload=None, footer=()):
    """Writes `results.csv`, `results.json` and `results.md` under `directory`.

    Args:
        directory: Output folder (created if missing).
        rows: Result dicts; the CSV holds the columns' keys.
        columns: The table's `(key, header, spec)` triples (see
            `markdown_table`).
        payload: What `results.json` holds (default: the rows).
        footer: Lines written below the Markdown table.

    Returns:
        The path of `results.md`.
    """
    os.makedirs(directory, exist_ok=True)
    keys = [key for key, _, _ in columns]
    with open(os.path.join(directory, "results.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        writer.writeheader()
        writer.writerows({k: _csv_cell(row.get(k)) for k in keys} for row in rows)
    with open(os.path.join(directory, "results.json"), "w") as f:
        json.dump(rows if payload is None else payload, f, indent=2)
    path = os.path.join(directory, "results.md")
    lines = markdown_table(rows, columns)
    if footer:
        lines += ["", *footer]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def _csv_cell(value):
    return "" if value is None else value


def read_history(path):
    """Reads a `history.csv` (as `LossCurves` writes it) into float arrays.

    Args:
        path: The CSV file.

    Returns:
        A dict from column name to a float numpy array (NaN for blanks).
    """
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return {
        key: np.array([float(r[key]) if r[key] else np.nan for r in rows])
        for key in rows[0]
    }


def save_quality_plot(
    curves, path, title="Quality vs wall time", xlabel="training seconds", target=None
):
    """Plots FCD against training seconds (or images), one line per run.

    Args:
        curves: A dict from label to `(x, fcd)` sequences.
        path: Output PNG path.
        title: Plot title.
        xlabel: What the x values are.
        target: A target FCD, drawn as a dashed line (None: none).

    Returns:
        The path.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.subplots()
    for label, (seconds, fcd) in curves.items():
        ax.plot(seconds, fcd, marker="o", label=label)
    if target is not None:
        ax.axhline(target, color="gray", linestyle="--", label=f"target {target:g}")
    ax.set(
        xlabel=xlabel,
        ylabel="FCD (lower is better)",
        title=title,
        yscale="log",
    )
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend()
    fig.savefig(path, dpi=90)
    return path


def save_learning_curves(histories, path):
    """Plots G and D losses per epoch and per image seen, one line per run.

    Args:
        histories: A dict from label to `(history, images_per_epoch)`, the
            history as `read_history` returns it.
        path: Output PNG path.

    Returns:
        The path.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 8), layout="constrained")
    axes = fig.subplots(2, 2)
    for label, (h, images_per_epoch) in histories.items():
        epochs = h["epoch"]
        for col, key in enumerate(("g_loss", "d_loss")):
            axes[0, col].plot(epochs, h[key], marker="o", markersize=3, label=label)
            axes[1, col].plot(epochs * images_per_epoch, h[key], label=label)
    for col, key in enumerate(("generator loss", "discriminator loss")):
        axes[0, col].set(title=f"{key} per epoch", xlabel="epoch")
        axes[1, col].set(title=f"{key} per image seen", xlabel="images seen")
    for ax in axes.flat:
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend()
    fig.savefig(path, dpi=90)
    return path


def save_epoch_time_plot(batch_sizes, epoch_seconds, path):
    """Plots seconds per epoch against the global batch size.

    Args:
        batch_sizes: Global batch sizes.
        epoch_seconds: Mean epoch seconds (compile excluded), one per batch.
        path: Output PNG path.

    Returns:
        The path.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.subplots()
    seconds = [np.nan if s is None else s for s in epoch_seconds]
    ax.plot(batch_sizes, seconds, marker="o")
    ax.set(
        xscale="log",
        xlabel="global batch size",
        ylabel="seconds per epoch",
        title="Time per epoch (compile excluded)",
    )
    ax.set_xticks(list(batch_sizes), [str(b) for b in batch_sizes])
    ax.grid(alpha=0.3)
    fig.savefig(path, dpi=90)
    return path


def write_csv(rows, path):
    """Writes dicts as a CSV file, columns in the first row's key order.

    Args:
        rows: Dicts with the same keys.
        path: Output file.

    Returns:
        The path.
    """
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def read_throughput_csv(path):
    """Reads the CSV that `bench.throughput_matrix` writes, typed back.

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
