"""The batch-size study: one training run per batch size, compared."""

import dataclasses
import os

import keras

from keras_tpugan.runs import results
from keras_tpugan.runs.config import TrainConfig
from keras_tpugan.runs.train import train
from keras_tpugan.studies import plots


def _time_vs_smallest(row):
    reduction = row.get("time_reduction_pct")
    return "-" if reduction is None else f"{0.0 - reduction:+.1f}%"


# The table: (key, header, format); the CSV holds the keys in this order.
COLUMNS = (
    ("batch_size", "batch", "d"),
    ("learning_rate", "lr", ".2e"),
    ("steps_per_epoch", "steps/epoch", "d"),
    ("mean_epoch_seconds", "epoch s (no compile)", ".2f"),
    ("total_seconds", "total s", ".1f"),
    ("time_reduction_pct", "time vs smallest", _time_vs_smallest),
    ("images_per_sec", "images/s", ".0f"),
    ("d_loss", "d_loss", ".3f"),
    ("g_loss", "g_loss", ".3f"),
    ("fcd", "FCD", ".2f"),
    ("classifier_score", "classifier score", ".2f"),
    ("best_fcd", "best FCD", ".2f"),
    ("steps_to_target", "steps to target", "d"),
    ("images_to_target", "images to target", "d"),
    ("seconds_to_target", "s to target", ".1f"),
    ("status", "status", "s"),
)


def run_sweep(config, batch_sizes, out_dir, strategy=None, verbose=0):
    """Trains one GAN per batch size with the same seed and data; compares them.

    Every run is `train(config with batch_size=b)`. With
    `config.lr_scaling` "linear" or "sqrt" the learning rate is scaled from
    the smallest batch size (`config.learning_rate` is the rate for it).

    Writes, under `out_dir`: one run directory per batch size
    (`batch_0064/`, ...), `results.csv`, `results.json`, `results.md` (the
    table) and the plots `learning_curves.png` (G and D losses per epoch and
    per image seen, one line per batch size), `epoch_time.png` (time per
    epoch vs batch size), `quality_vs_time.png` and `quality_vs_images.png`
    (FCD against training seconds and images seen). With
    `config.target_fcd`, every batch size is scored after the same numbers
    of images (every `quality_every` epochs' worth of the dataset) and the
    table gives the steps, images and seconds to reach the target (empty
    when never) and the best FCD. A run that fails (out of memory, bad
    setting) is recorded with its error and the sweep goes on.

    Args:
        config: The `TrainConfig` every run starts from.
        batch_sizes: Global batch sizes to compare.
        out_dir: Output directory.
        strategy: A `tf.distribute.Strategy` or, on JAX, a
            `keras.distribution.DataParallel` (default: the config's).
        verbose: Passed to `fit`.

    Returns:
        The list of result rows (dicts keyed by `COLUMNS`).

    Example:

    ```python
    config = TrainConfig.preset("demo")
    config = dataclasses.replace(config, epochs=30, lr_scaling="sqrt")
    rows = run_sweep(config, [64, 128, 256, 512], "runs/sweep")
    ```
    """
    if not isinstance(config, TrainConfig):
        raise ValueError(
            "Expected `config` to be a keras_tpugan.runs.config.TrainConfig. "
            f"Received: {type(config).__name__}. Build one with "
            "TrainConfig.preset(name)."
        )
    if not batch_sizes or any(int(b) < 1 for b in batch_sizes):
        raise ValueError(
            "Expected one or more positive batch sizes. Received: "
            f"batch_sizes={batch_sizes}."
        )
    batch_sizes = sorted(int(b) for b in batch_sizes)
    base = dataclasses.replace(config, base_batch_size=batch_sizes[0])
    os.makedirs(out_dir, exist_ok=True)
    rows, histories = [], {}
    progress = keras.utils.Progbar(
        len(batch_sizes), unit_name="run", stateful_metrics=["batch"]
    )
    for i, batch in enumerate(batch_sizes):
        row = {"batch_size": batch, "status": "ok"}
        try:
            run_config = dataclasses.replace(base, batch_size=batch)
            row["learning_rate"] = run_config.scaled_learning_rate
            run_dir = os.path.join(out_dir, f"batch_{batch:04d}")
            summary = train(run_config, run_dir, strategy=strategy, verbose=verbose)
            row.update(_row_from_summary(summary))
            row["target_fcd"] = run_config.target_fcd
            histories[batch] = results.read_history(
                os.path.join(run_dir, "history.csv")
            )
        except Exception as e:  # noqa: BLE001 - a failed run must not end the sweep
            row["status"] = f"failed: {type(e).__name__}: {results.first_line(e)}"
        rows.append(row)
        progress.update(i + 1, values=[("batch", batch)])
    _add_reductions(rows)
    results.write_results(out_dir, rows, COLUMNS)
    _plot(rows, histories, out_dir)
    return rows


def _row_from_summary(summary):
    final = summary["final"]
    return {
        "steps_per_epoch": summary["steps_per_epoch"],
        "mean_epoch_seconds": summary["mean_epoch_seconds"],
        "total_seconds": summary["train_seconds"],
        "images_per_sec": summary["images_per_sec"],
        "d_loss": final.get("d_loss"),
        "g_loss": final.get("g_loss"),
        "fcd": final.get("fcd"),
        "classifier_score": final.get("classifier_score"),
        "best_fcd": summary.get("best_fcd"),
        "steps_to_target": summary.get("steps_to_target"),
        "images_to_target": summary.get("images_to_target"),
        "seconds_to_target": summary.get("seconds_to_target"),
        "quality_schedule": summary.get("quality_schedule", []),
    }


def _add_reductions(rows):
    done = [r for r in rows if r["status"] == "ok"]
    reference = done[0]["total_seconds"] if done else None
    for row in rows:
        if row["status"] == "ok" and reference:
            row["time_reduction_pct"] = 100.0 * (1.0 - row["total_seconds"] / reference)


def _plot(rows, histories, out_dir):
    ok = [r for r in rows if r["status"] == "ok" and r["batch_size"] in histories]
    plots.save_learning_curves(
        {
            f"batch {r['batch_size']}": (
                histories[r["batch_size"]],
                r["steps_per_epoch"] * r["batch_size"],
            )
            for r in ok
        },
        os.path.join(out_dir, "learning_curves.png"),
    )
    plots.save_epoch_time_plot(
        [r["batch_size"] for r in ok],
        [r["mean_epoch_seconds"] for r in ok],
        os.path.join(out_dir, "epoch_time.png"),
    )
    by_seconds, by_images = {}, {}
    for r in ok:
        schedule = r.get("quality_schedule") or []
        if schedule:
            label = f"batch {r['batch_size']}"
            fcd = [p["fcd"] for p in schedule]
            by_seconds[label] = ([p["seconds"] for p in schedule], fcd)
            by_images[label] = ([p["images"] for p in schedule], fcd)
    target = rows[0].get("target_fcd") if rows else None
    plots.save_quality_plot(
        by_seconds, os.path.join(out_dir, "quality_vs_time.png"), target=target
    )
    plots.save_quality_plot(
        by_images,
        os.path.join(out_dir, "quality_vs_images.png"),
        title="Quality vs images seen",
        xlabel="images seen",
        target=target,
    )
