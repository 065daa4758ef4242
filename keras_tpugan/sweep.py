"""The batch-size study: one training run per batch size, compared."""

import csv
import dataclasses
import json
import math
import os

import keras
import numpy as np

from keras_tpugan import images
from keras_tpugan.config import TrainConfig
from keras_tpugan.train import train

COLUMNS = (
    "batch_size",
    "learning_rate",
    "steps_per_epoch",
    "mean_epoch_seconds",
    "total_seconds",
    "time_reduction_pct",
    "images_per_sec",
    "d_loss",
    "g_loss",
    "fcd",
    "classifier_score",
    "status",
)


def run_sweep(
    batch_sizes,
    out_dir,
    preset="demo",
    epochs=None,
    lr_scaling="none",
    optimizer=None,
    warmup_epochs=None,
    overrides=(),
    strategy=None,
    verbose=0,
):
    """Trains one GAN per batch size with the same seed and data; compares them.

    Writes, under `out_dir`: one run directory per batch size
    (`batch_0064/`, ...), `results.csv`, `results.json`, `results.md` (the
    table) and the plots `learning_curves.png` (G and D losses per epoch and
    per image seen, one line per batch size), `epoch_time.png` (time per
    epoch vs batch size) and `quality_vs_time.png` (FCD vs wall time). A run
    that fails (out of memory, bad setting) is recorded with its error and
    the sweep goes on.

    Args:
        batch_sizes: Global batch sizes to compare.
        out_dir: Output directory.
        preset: The `TrainConfig` preset every run starts from.
        epochs: Epochs per run (default: the preset's).
        lr_scaling: `"none"`, `"linear"` or `"sqrt"` scaling of the learning
            rate, relative to the smallest batch size.
        optimizer: `"adam"`, `"lars"` or `"lamb"` (default: the preset's).
        warmup_epochs: Epochs of linear learning-rate warm-up (default: the
            preset's).
        overrides: `key=value` strings applied to the preset.
        strategy: A `tf.distribute.Strategy` or, on JAX, a
            `keras.distribution.DataParallel` (default: the config's).
        verbose: Passed to `fit`.

    Returns:
        The list of result rows (dicts with `COLUMNS`).

    Example:

    ```python
    rows = run_sweep([64, 128, 256, 512], "runs/sweep", preset="demo", epochs=30)
    ```
    """
    if not batch_sizes or any(int(b) < 1 for b in batch_sizes):
        raise ValueError(
            f"Expected positive batch sizes. Received: batch_sizes={batch_sizes}."
        )
    batch_sizes = sorted(int(b) for b in batch_sizes)
    base = TrainConfig.preset(preset).override(overrides)
    for key, value in (
        ("epochs", epochs),
        ("optimizer", optimizer),
        ("warmup_epochs", warmup_epochs),
    ):
        if value is not None:
            base = base.override([f"{key}={value}"])
    base = base.override(
        [f"lr_scaling={lr_scaling}", f"base_batch_size={batch_sizes[0]}"]
    )
    os.makedirs(out_dir, exist_ok=True)
    rows, curves = [], {}
    progress = keras.utils.Progbar(
        len(batch_sizes), unit_name="run", stateful_metrics=["batch"]
    )
    for i, batch in enumerate(batch_sizes):
        config = dataclasses.replace(base, batch_size=batch)
        run_dir = os.path.join(out_dir, f"batch_{batch:04d}")
        row = {
            "batch_size": batch,
            "learning_rate": config.scaled_learning_rate,
            "status": "ok",
        }
        try:
            summary = train(config, run_dir, strategy=strategy, verbose=verbose)
            row.update(_row_from_summary(summary))
            curves[batch] = _read_history(os.path.join(run_dir, "history.csv"))
        except Exception as e:  # noqa: BLE001 - a failed run must not end the sweep
            row["status"] = f"failed: {type(e).__name__}: {_first_line(e)}"
        rows.append(row)
        progress.update(i + 1, values=[("batch", batch)])
    _add_reductions(rows)
    _write_tables(rows, out_dir)
    _plot(rows, curves, out_dir)
    return rows


def _row_from_summary(summary):
    final = summary["final"]
    steps = summary["num_examples"] // summary["batch_size"]
    return {
        "steps_per_epoch": steps,
        "mean_epoch_seconds": summary["mean_epoch_seconds"],
        "total_seconds": summary["train_seconds"],
        "images_per_sec": summary["images_per_sec"],
        "d_loss": final.get("d_loss"),
        "g_loss": final.get("g_loss"),
        "fcd": final.get("fcd"),
        "classifier_score": final.get("classifier_score"),
    }


def _add_reductions(rows):
    done = [r for r in rows if r["status"] == "ok"]
    reference = done[0]["total_seconds"] if done else None
    for row in rows:
        if row["status"] == "ok" and reference:
            row["time_reduction_pct"] = 100.0 * (1.0 - row["total_seconds"] / reference)


def _first_line(error):
    text = str(error).strip().splitlines()
    return text[0][:200] if text else ""


def _read_history(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return {
        key: np.array([float(r[key]) if r[key] else np.nan for r in rows])
        for key in rows[0]
    }


def _fmt(value, digits=2):
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _write_tables(rows, out_dir):
    with open(os.path.join(out_dir, "results.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows({k: row.get(k, "") for k in COLUMNS} for row in rows)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(rows, f, indent=2)
    header = (
        "| batch | lr | steps/epoch | epoch s (no compile) | total s "
        "| time vs smallest | images/s | d_loss | g_loss | FCD | classifier score "
        "| status |"
    )
    lines = [header, "|" + "---:|" * 11 + "---|"]
    for r in rows:
        reduction = r.get("time_reduction_pct")
        lines.append(
            f"| {r['batch_size']} | {r['learning_rate']:.2e} "
            f"| {_fmt(r.get('steps_per_epoch'))} | {_fmt(r.get('mean_epoch_seconds'))} "
            f"| {_fmt(r.get('total_seconds'), 1)} "
            f"| {'-' if reduction is None else f'{0.0 - reduction:+.1f}%'} "
            f"| {_fmt(r.get('images_per_sec'), 0)} | {_fmt(r.get('d_loss'), 3)} "
            f"| {_fmt(r.get('g_loss'), 3)} | {_fmt(r.get('fcd'))} "
            f"| {_fmt(r.get('classifier_score'))} | {r['status']} |"
        )
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def _plot(rows, curves, out_dir):
    from matplotlib.figure import Figure

    ok = [r for r in rows if r["status"] == "ok" and r["batch_size"] in curves]
    fig = Figure(figsize=(12, 8), layout="constrained")
    axes = fig.subplots(2, 2)
    for r in ok:
        h = curves[r["batch_size"]]
        epochs = h["epoch"]
        seen = epochs * r["steps_per_epoch"] * r["batch_size"]
        label = f"batch {r['batch_size']}"
        for col, key in enumerate(("g_loss", "d_loss")):
            axes[0, col].plot(epochs, h[key], marker="o", markersize=3, label=label)
            axes[1, col].plot(seen, h[key], label=label)
    for col, key in enumerate(("generator loss", "discriminator loss")):
        axes[0, col].set(title=f"{key} per epoch", xlabel="epoch")
        axes[1, col].set(title=f"{key} per image seen", xlabel="images seen")
    for ax in axes.flat:
        ax.grid(alpha=0.3)
        ax.legend()
    fig.savefig(os.path.join(out_dir, "learning_curves.png"), dpi=90)

    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.subplots()
    ax.plot(
        [r["batch_size"] for r in ok],
        [r["mean_epoch_seconds"] or np.nan for r in ok],
        marker="o",
    )
    ax.set(
        xscale="log",
        xlabel="global batch size",
        ylabel="seconds per epoch",
        title="Time per epoch (compile excluded)",
    )
    ax.set_xticks([r["batch_size"] for r in ok], [str(r["batch_size"]) for r in ok])
    ax.grid(alpha=0.3)
    fig.savefig(os.path.join(out_dir, "epoch_time.png"), dpi=90)

    quality = {}
    for r in ok:
        h = curves[r["batch_size"]]
        if "fcd" in h:
            seconds = np.cumsum(h["step_time_ms"] * r["steps_per_epoch"] / 1000.0)
            keep = np.isfinite(h["fcd"])
            quality[f"batch {r['batch_size']}"] = (seconds[keep], h["fcd"][keep])
    images.save_quality_plot(quality, os.path.join(out_dir, "quality_vs_time.png"))
