"""The keras-tuner search over batch sizes and settings: `search_batch_size`
runs it and writes its results; `best_per_batch_size` picks each batch's
best trial."""

import os

import keras_tuner as kt

from keras_tpugan.runs import results
from keras_tpugan.studies import plots
from keras_tpugan.studies.projection import projection, projection_lines
from keras_tpugan.studies.tuning import OBJECTIVES, GANHyperModel

TUNERS = ("grid", "random", "bayesian", "hyperband")


def search_batch_size(
    config=None,
    batch_sizes=(32, 64, 128, 256),
    learning_rates=None,
    tuner="grid",
    objective="time_to_fcd",
    max_trials=None,
    strategy=None,
    directory="runs/tune",
    hypermodel=None,
    data=None,
    **hypermodel_kwargs,
):
    """Searches the batch size (and learning rate) that trains best.

    Writes `results.csv`, `results.md`, `results.json`,
    `quality_vs_time.png` and `quality_vs_images.png` (FCD against
    training seconds and images seen, one line per trial; the rows give the
    steps, images and seconds to `target_fcd` and the best FCD) under
    `directory`, beside keras-tuner's own trial records. The
    rows record the precision and seed each trial ran in.

    Args:
        config: The `TrainConfig` every trial starts from (default: the
            `"demo"` preset).
        batch_sizes: Global batch sizes to try.
        learning_rates: Base learning rates to try (default: the config's).
        tuner: `"grid"`, `"random"`, `"bayesian"` or `"hyperband"`.
        objective: `"fcd"`, `"fid"`, `"time_to_fcd"`, `"steps_to_fcd"` or
            `"images_per_sec"`.
        max_trials: Trials for the random and Bayesian tuners (default:
            every combination).
        strategy: A `tf.distribute.Strategy` (or, on JAX, a
            `keras.distribution.DataParallel`).
        directory: Output directory.
        hypermodel: A ready `GANHyperModel` (then the other arguments that
            build one are not used).
        data: Anything `keras_tpugan.data.load_images` takes, in place of
            `config.dataset` (see `GANHyperModel`).
        **hypermodel_kwargs: More `GANHyperModel` arguments (image_budget,
            lr_scaling, evaluations, ...).

    Returns:
        `(best_hyperparameters, rows)`: a dict such as
        `{"batch_size": 64, "learning_rate": 0.0002}` and the result rows.

    Example:

    ```python
    config = TrainConfig.preset("demo")
    best, rows = search_batch_size(config, batch_sizes=[64, 128, 256])

    # Your own labelled folder at 32x32 RGB:
    config = TrainConfig.preset("images").override(["image_size=32"])
    best, rows = search_batch_size(config, data="photos/", batch_sizes=[64, 128])
    ```
    """
    if tuner not in TUNERS:
        raise ValueError(f"Expected tuner in {TUNERS}. Received: tuner={tuner!r}.")
    hypermodel = hypermodel or GANHyperModel(
        config,
        data=data,
        batch_sizes=batch_sizes,
        learning_rates=learning_rates,
        objective=objective,
        strategy=strategy,
        **hypermodel_kwargs,
    )
    objective = hypermodel.objective
    combinations = hypermodel.combinations
    common = dict(
        hypermodel=hypermodel,
        objective=kt.Objective(objective, OBJECTIVES[objective]),
        directory=directory,
        project_name="search",
        overwrite=True,
        max_consecutive_failed_trials=combinations,
    )
    if tuner == "grid":
        search = kt.GridSearch(max_trials=max_trials or combinations, **common)
    elif tuner == "random":
        search = kt.RandomSearch(
            max_trials=max_trials or combinations, seed=0, **common
        )
    elif tuner == "bayesian":
        search = kt.BayesianOptimization(
            max_trials=max_trials or combinations, seed=0, **common
        )
    else:
        search = kt.Hyperband(max_epochs=4, factor=2, seed=0, **common)
    search.search(max_epochs=4)
    rows = _rows(hypermodel.records)
    best = search.get_best_hyperparameters(1)[0].values
    _write_results(rows, best, objective, directory, list(hypermodel.space))
    return best, rows


def best_per_batch_size(rows, objective):
    """The best finished trial of each batch size, by `objective`.

    Args:
        rows: Result rows of `search_batch_size`.
        objective: A key of `OBJECTIVES`.

    Returns:
        A dict from batch size to its best row.
    """
    sign = 1 if OBJECTIVES[objective] == "min" else -1
    best = {}
    for row in rows:
        if row["status"] != "ok" or row["objective"] is None:
            continue
        held = best.get(row["batch_size"])
        if held is None or sign * row["objective"] < sign * held["objective"]:
            best[row["batch_size"]] = row
    return dict(sorted(best.items()))


ROW_KEYS = (
    "trial",
    "batch_size",
    "learning_rate",
    "precision",
    "seed",
    "status",
    "objective",
    "train_seconds",
    "images_seen",
    "images_per_sec",
    "fcd",
    "best_fcd",
    "fid",
    "best_fid",
    "steps_to_target",
    "images_to_target",
    "seconds_to_target",
)


def _rows(records):
    return [
        {k: r.get(k) for k in ROW_KEYS}
        | r.get("settings", {})
        | {"curve": r.get("curve", [])}
        for r in records
    ]


def _write_results(rows, best, objective, directory, space_keys=()):
    per_batch = best_per_batch_size(rows, objective)
    columns = [
        ("trial", "trial", "d"),
        ("batch_size", "batch", "d"),
        ("learning_rate", "lr", ".2e"),
        *[(key, key, "s") for key in space_keys],
        ("precision", "precision", "s"),
        ("seed", "seed", "d"),
        ("status", "status", "s"),
        ("objective", objective, ".3f"),
        ("train_seconds", "train s", ".1f"),
        ("images_seen", "images seen", "d"),
        ("images_per_sec", "images/s", ".0f"),
        ("fcd", "FCD", ".2f"),
        ("best_fcd", "best FCD", ".2f"),
        ("fid", "FID", ".2f"),
        ("best_fid", "best FID", ".2f"),
        ("steps_to_target", "steps to target", "d"),
        ("images_to_target", "images to target", "d"),
        ("seconds_to_target", "s to target", ".1f"),
    ]
    results.write_results(
        directory,
        rows,
        columns,
        payload={
            "best": best,
            "objective": objective,
            "trials": rows,
            "projection": projection(per_batch),
        },
        footer=[f"Best ({objective}): {best}"]
        + [
            f"Best at batch {batch}: trial {row['trial']}, {objective} "
            f"{row['objective']:.4g}"
            + "".join(f", {key}={row[key]}" for key in space_keys)
            for batch, row in per_batch.items()
        ]
        + projection_lines(per_batch),
    )
    curves = {
        f"trial {r['trial']}: batch {r['batch_size']}"
        + "".join(f" {key}={r[key]}" for key in space_keys): (
            [c[0] for c in r["curve"]],
            [c[2] for c in r["curve"]],
        )
        for r in rows
        if r["curve"]
    }
    plots.save_quality_plot(
        curves,
        os.path.join(directory, "quality_vs_time.png"),
        title="Quality vs wall time per trial",
    )
    by_images = {
        label: ([c[1] for c in r["curve"]], fcd)
        for (label, (_, fcd)), r in zip(
            curves.items(), [r for r in rows if r["curve"]], strict=True
        )
    }
    plots.save_quality_plot(
        by_images,
        os.path.join(directory, "quality_vs_images.png"),
        title="Quality vs images seen per trial",
        xlabel="images seen",
    )
