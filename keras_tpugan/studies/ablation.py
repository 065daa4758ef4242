"""`run_ablation`: one training run per setting and seed, compared with spread."""

import dataclasses
import itertools
import os
import re

import numpy as np

from keras_tpugan.runs import results
from keras_tpugan.runs.config import TrainConfig
from keras_tpugan.runs.train import train

# The per-setting table: (key, header, format).
COLUMNS = (
    ("setting", "setting", "s"),
    ("runs", "runs", "d"),
    ("images_seen", "images", "d"),
    ("fcd_mean", "FCD mean", ".1f"),
    ("fcd_spread", "FCD min-max", "s"),
    ("classifier_score_mean", "classifier score", ".2f"),
    ("kid_mean", "KID", ".2f"),
    ("train_seconds_mean", "train s", ".0f"),
    ("status", "status", "s"),
)
# The per-run table (`runs.csv`).
RUN_COLUMNS = (
    ("setting", "setting", "s"),
    ("seed", "seed", "d"),
    ("images_seen", "images", "d"),
    ("fcd", "FCD", ".1f"),
    ("classifier_score", "classifier score", ".2f"),
    ("kid", "KID", ".2f"),
    ("train_seconds", "train s", ".0f"),
    ("status", "status", "s"),
)
SCORES = ("fcd", "classifier_score", "kid")


def parse_grid(items, option="--grid"):
    """`["augment=none,translation", "d_norm=none,spectral"]` as a dict.

    Values are comma-separated; inside one value `+` stands for a comma
    (`augment=translation+cutout`). Each key must be a `TrainConfig` field.

    Args:
        items: `key=value,value` strings.
        option: The command-line option they came from, for error messages.

    Returns:
        A dict from field name to the list of its values (strings, as
        `TrainConfig.override` takes them).
    """
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    grid = {}
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        if not sep or not values.strip():
            raise ValueError(
                f"Expected key=value,value,... Received: {item!r}. For example "
                f"{option} augment=none,translation+cutout"
            )
        if key not in fields:
            raise ValueError(
                f"Unknown setting {key!r} in {option}. Valid settings: "
                f"{', '.join(sorted(fields))}."
            )
        if key in grid:
            raise ValueError(
                f"Expected each key once in {option}. Received: {key!r} twice."
            )
        grid[key] = [
            v.strip().replace("+", ",") for v in values.split(",") if v.strip()
        ]
    return grid


def run_ablation(config, grid, out_dir, seeds=(0, 1), strategy=None, verbose=0):
    """Trains every combination of `grid` with every seed; compares them.

    Every setting trains `config.epochs` epochs of the same data, so all
    see the same number of images (a fixed image budget), and each runs
    once per seed: GANs are noisy, and the table gives the mean and the
    range over seeds. A run's scores are those of its last scored epoch.

    Writes under `out_dir`: one run directory per setting and seed,
    `runs.csv` (one row per run), `results.csv`, `results.json`,
    `results.md` (one row per setting), `fcd_vs_images.png` (mean FCD over
    seeds against images seen, one line per setting, the range shaded) and
    `samples.png` (the last sample grid of each setting's first seed, side
    by side). A failed run is recorded and the ablation goes on.

    Args:
        config: The `TrainConfig` every run starts from (its quality
            metrics must be on: `quality_every` > 0).
        grid: A dict from `TrainConfig` field to the values to try (strings
            as `--set` takes them, or values), as `parse_grid` returns.
        out_dir: Output directory.
        seeds: The seeds of each setting (at least one).
        strategy: Passed to `train`.
        verbose: Passed to `fit`.

    Returns:
        The per-setting rows (dicts keyed by `COLUMNS`).

    Example:

    ```python
    grid = parse_grid(["augment=none,translation+cutout", "d_norm=none,spectral"])
    rows = run_ablation(TrainConfig.preset("demo"), grid, "runs/ablation")
    ```
    """
    if not isinstance(config, TrainConfig):
        raise ValueError(
            "Expected `config` to be a keras_tpugan.runs.config.TrainConfig. "
            f"Received: {type(config).__name__}."
        )
    if not grid:
        raise ValueError("Expected a grid of at least one setting. Received: {}.")
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("Expected at least one seed. Received: seeds=[].")
    if not config.quality_every:
        raise ValueError(
            "Expected quality metrics on (quality_every > 0): the ablation "
            "compares FCD. Received: quality_every=0."
        )
    settings = [
        dict(zip(grid, values, strict=True))
        for values in itertools.product(*(grid[k] for k in grid))
    ]
    # Every setting is checked before the first run trains.
    configs = [config.override([f"{k}={v}" for k, v in s.items()]) for s in settings]
    os.makedirs(out_dir, exist_ok=True)
    runs, curves, grids = [], {}, {}
    for setting, setting_config in zip(settings, configs, strict=True):
        label = " ".join(f"{k}={v}" for k, v in setting.items())
        for seed in seeds:
            run_dir = os.path.join(out_dir, _dirname(setting), f"seed_{seed}")
            row = {"setting": label, "seed": seed, "status": "ok"}
            try:
                run_config = dataclasses.replace(setting_config, seed=seed)
                summary = train(run_config, run_dir, strategy=strategy, verbose=verbose)
                history = results.read_history(os.path.join(run_dir, "history.csv"))
                row.update(_scores(summary, history))
                curves.setdefault(label, []).append(_fcd_curve(summary, history))
                if label not in grids:
                    grids[label] = _last_grid(run_dir)
            except Exception as e:  # noqa: BLE001 - a failed run must not end the study
                row["status"] = f"failed: {type(e).__name__}: {results.first_line(e)}"
            runs.append(row)
    rows = _per_setting(runs)
    _write_runs(out_dir, runs)
    results.write_results(
        out_dir,
        rows,
        COLUMNS,
        footer=[
            f"{len(seeds)} seed(s) per setting ({', '.join(map(str, seeds))}); "
            "FCD, classifier score and KID of each run's last scored epoch.",
        ],
    )
    _plot_curves(curves, os.path.join(out_dir, "fcd_vs_images.png"))
    _plot_grids(grids, rows, os.path.join(out_dir, "samples.png"))
    return rows


def _dirname(setting):
    text = "__".join(f"{k}-{v}" for k, v in setting.items())
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)


def _scores(summary, history):
    row = {
        "images_seen": summary["steps_per_epoch"]
        * summary["batch_size"]
        * len(history["epoch"]),
        "train_seconds": summary["train_seconds"],
    }
    for name in SCORES:
        values = history.get(name)
        if values is not None:
            finite = values[np.isfinite(values)]
            row[name] = float(finite[-1]) if finite.size else None
    return row


def _fcd_curve(summary, history):
    per_epoch = summary["steps_per_epoch"] * summary["batch_size"]
    fcd = history.get("fcd", np.array([]))
    keep = np.isfinite(fcd)
    return history["epoch"][keep] * per_epoch, fcd[keep]


def _last_grid(run_dir):
    samples = os.path.join(run_dir, "samples")
    names = sorted(n for n in os.listdir(samples) if n.startswith("epoch_"))
    return os.path.join(samples, names[-1]) if names else None


def _per_setting(runs):
    rows = []
    for label in dict.fromkeys(r["setting"] for r in runs):
        own = [r for r in runs if r["setting"] == label]
        ok = [r for r in own if r["status"] == "ok" and r.get("fcd") is not None]
        row = {"setting": label, "runs": len(ok)}
        row["status"] = "ok" if len(ok) == len(own) else f"{len(own) - len(ok)} failed"
        if ok:
            row["images_seen"] = ok[0]["images_seen"]
            for name in (*SCORES, "train_seconds"):
                values = [r[name] for r in ok if r.get(name) is not None]
                if values:
                    row[f"{name}_mean"] = float(np.mean(values))
            fcd = [r["fcd"] for r in ok]
            row["fcd_spread"] = f"{min(fcd):.1f}-{max(fcd):.1f}"
        rows.append(row)
    return rows


def _write_runs(out_dir, runs):
    keys = [key for key, _, _ in RUN_COLUMNS]
    results.write_csv(
        [{k: r.get(k) for k in keys} for r in runs], os.path.join(out_dir, "runs.csv")
    )


def _plot_curves(curves, path):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.subplots()
    for label, runs in curves.items():
        length = min(len(fcd) for _, fcd in runs)
        if length == 0:
            continue
        images = runs[0][0][:length]
        stack = np.stack([fcd[:length] for _, fcd in runs])
        (line,) = ax.plot(images, stack.mean(0), marker="o", markersize=3, label=label)
        if len(runs) > 1:
            ax.fill_between(
                images, stack.min(0), stack.max(0), color=line.get_color(), alpha=0.15
            )
    ax.set(
        xlabel="images seen",
        ylabel="FCD (lower is better)",
        yscale="log",
        title="FCD over training: mean over seeds, range shaded",
    )
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=7)
    fig.savefig(path, dpi=90)
    return path


def _plot_grids(grids, rows, path):
    from matplotlib.figure import Figure
    from PIL import Image

    shown = [(label, p) for label, p in grids.items() if p and os.path.exists(p)]
    if not shown:
        return None
    means = {r["setting"]: r.get("fcd_mean") for r in rows}
    columns = min(4, len(shown))
    lines = -(-len(shown) // columns)
    fig = Figure(figsize=(3.2 * columns, 3.5 * lines), layout="constrained")
    axes = np.atleast_1d(fig.subplots(lines, columns)).ravel()
    for ax, (label, image_path) in zip(axes, shown, strict=False):
        ax.imshow(np.asarray(Image.open(image_path).convert("L")), cmap="gray")
        ax.set_title(f"{label}\nFCD {results.fmt(means.get(label), '.1f')}", fontsize=8)
    for ax in axes:
        ax.axis("off")
    fig.savefig(path, dpi=90)
    return path
