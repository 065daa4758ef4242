"""Searching the batch size (and learning rate) with keras-tuner."""

import csv
import dataclasses
import json
import math
import os
import time

import keras_tuner as kt
import numpy as np

from keras_tpugan import callbacks, data, distribute, images, large_batch
from keras_tpugan.config import TrainConfig
from keras_tpugan.train import build_gan

OBJECTIVES = {
    "fcd": "min",
    "time_to_fcd": "min",
    "images_per_sec": "max",
}
TUNERS = ("grid", "random", "bayesian", "hyperband")


class GANHyperModel(kt.HyperModel):
    """A keras-tuner `HyperModel` over the global batch size of a GAN.

    `build(hp)` builds and compiles a GAN (inside the strategy's scope) for
    `hp.Choice("batch_size", ...)` and `hp.Choice("learning_rate", ...)`,
    the rate scaled with the batch by `lr_scaling`. `fit(hp, model)`
    re-batches the data pipeline to the chosen batch size (`fit`'s own
    `batch_size` is ignored for datasets) and trains for a budget counted in
    IMAGES SEEN, so batch sizes are compared fairly, scoring the generator
    `evaluations` times on the way. It returns the objective:

    - `"fcd"`: the Frechet classifier distance at the end of the budget;
    - `"time_to_fcd"`: training seconds until the FCD reaches `target_fcd`
      (`time_cap` if it never does);
    - `"images_per_sec"`: training throughput after the compiling chunk.

    A trial that runs out of memory or diverges raises
    `keras_tuner.errors.FailedTrialError`, so the search goes on. Every
    trial's figures are kept in `records`.

    Args:
        data: A dataset name or anything `keras_tpugan.data.load_images`
            takes (unbatched images or `(images, labels)` arrays, a folder).
        batch_sizes: Global batch sizes to choose from (multiples of the
            replica count).
        learning_rates: Base learning rates to choose from.
        lr_scaling: `"none"`, `"linear"` or `"sqrt"` scaling of the rate from
            `base_batch_size` to the trial's batch size.
        base_batch_size: Batch size the base rates are meant for (default:
            the smallest of `batch_sizes`).
        objective: `"fcd"`, `"time_to_fcd"` or `"images_per_sec"`.
        image_budget: Images seen per trial.
        evaluations: Times the FCD is measured during a trial.
        target_fcd: The FCD that `"time_to_fcd"` waits for.
        time_cap: Seconds after which a `"time_to_fcd"` trial stops.
        config: The `TrainConfig` for everything else (default: the
            `"demo"` preset).
        strategy: A `tf.distribute.Strategy` or, on JAX, a
            `keras.distribution.DataParallel` (default: the config's).
        source: Data source for a dataset name (see `load_images`).
        quality_images: Generated images per FCD measurement.
        classifier_dir: Cache folder of the metric classifier.

    Example:

    ```python
    hypermodel = GANHyperModel("mnist", batch_sizes=[64, 256])
    tuner = keras_tuner.GridSearch(
        hypermodel, objective=keras_tuner.Objective("fcd", "min")
    )
    tuner.search()
    ```
    """

    def __init__(
        self,
        data="mnist",
        batch_sizes=(32, 64, 128, 256),
        learning_rates=(2e-4,),
        lr_scaling="linear",
        base_batch_size=None,
        objective="fcd",
        image_budget=64_000,
        evaluations=4,
        target_fcd=50.0,
        time_cap=600.0,
        config=None,
        strategy=None,
        source="auto",
        quality_images=500,
        classifier_dir=None,
    ):
        super().__init__(name="gan")
        if objective not in OBJECTIVES:
            raise ValueError(
                f"Expected objective in {tuple(OBJECTIVES)}. Received: {objective!r}."
            )
        if image_budget < 1 or evaluations < 1:
            raise ValueError(
                "Expected image_budget >= 1 and evaluations >= 1. Received: "
                f"image_budget={image_budget}, evaluations={evaluations}."
            )
        self.config = config or TrainConfig.preset("demo")
        self.strategy = strategy or distribute.get_strategy(self.config.strategy)
        for batch in batch_sizes:
            distribute.check_global_batch(batch, self.strategy)
        large_batch.scaled_learning_rate(1.0, 1, 1, lr_scaling)  # validates
        self.data = data
        self.batch_sizes = sorted(int(b) for b in batch_sizes)
        self.learning_rates = [float(r) for r in learning_rates]
        self.lr_scaling = lr_scaling
        self.base_batch_size = base_batch_size or self.batch_sizes[0]
        self.objective = objective
        self.image_budget = int(image_budget)
        self.evaluations = int(evaluations)
        self.target_fcd = float(target_fcd)
        self.time_cap = float(time_cap)
        self.source = source
        self.quality_images = quality_images
        self.classifier_dir = classifier_dir
        self.records = []
        # One pipeline per batch size, built once (the info comes with it).
        self._datasets = {}
        self.info = self._dataset(self.batch_sizes[0])[1]

    def _dataset(self, batch):
        if batch not in self._datasets:
            self._datasets[batch] = data_and_info(
                self.data, batch, self.config, self.source
            )
        return self._datasets[batch]

    def build(self, hp):
        batch = hp.Choice("batch_size", self.batch_sizes)
        base_lr = hp.Choice("learning_rate", self.learning_rates)
        config = dataclasses.replace(
            self.config,
            batch_size=batch,
            learning_rate=base_lr,
            lr_scaling=self.lr_scaling,
            base_batch_size=self.base_batch_size,
        )
        steps = (self.info["num_examples"] or 0) // batch or None
        with self.strategy.scope():
            return build_gan(
                config, self.info["image_shape"], self.info["num_classes"], steps
            )

    def fit(self, hp, model, *args, **kwargs):
        batch = hp.get("batch_size")
        record = {
            "trial": len(self.records),
            "batch_size": batch,
            "learning_rate": float(model.generator_optimizer.learning_rate.numpy()),
            "status": "ok",
        }
        self.records.append(record)
        # Hyperband grants a share of the budget through `epochs`.
        share = 1.0
        if "epochs" in kwargs:
            share = kwargs["epochs"] / max(1, kwargs.get("max_epochs", 1))
        try:
            value = self._train(model, batch, share, record)
        except kt.errors.FailedTrialError as e:
            record["status"] = f"failed: {e}"
            raise
        except Exception as e:
            if not distribute.is_out_of_memory(e):
                raise
            record["status"] = "failed: out of memory"
            raise kt.errors.FailedTrialError(f"out of memory at batch {batch}") from e
        record["objective"] = value
        return {self.objective: value}

    def _train(self, model, batch, share, record):
        ds, _ = self._dataset(batch)
        total_steps = max(1, math.ceil(self.image_budget * min(1.0, share) / batch))
        chunk = max(1, total_steps // self.evaluations)
        quality = callbacks.QualityMetrics(
            num_images=self.quality_images,
            classifier_dir=self.classifier_dir,
            seed=self.config.seed,
        )
        quality.set_model(model)
        quality.on_train_begin()
        curve, seconds, done, rates = [], 0.0, 0, []
        reached = None
        while done < total_steps:
            steps = min(chunk, total_steps - done)
            start = time.perf_counter()
            history = model.fit(ds.repeat(), epochs=1, steps_per_epoch=steps, verbose=0)
            elapsed = time.perf_counter() - start
            seconds += elapsed
            done += steps
            if done > steps:  # the first chunk compiles
                rates.append(steps * batch / elapsed)
            losses = [v[-1] for v in history.history.values()]
            if not np.isfinite(losses).all():
                raise kt.errors.FailedTrialError(
                    f"diverged (non-finite loss) at batch {batch}"
                )
            fcd = quality.score()["fcd"]
            curve.append((seconds, done * batch, fcd))
            if reached is None and fcd <= self.target_fcd:
                reached = seconds
            if self.objective == "time_to_fcd" and (
                reached is not None or seconds > self.time_cap
            ):
                break
        record.update(
            train_seconds=seconds,
            images_seen=done * batch,
            images_per_sec=float(np.mean(rates)) if rates else done * batch / seconds,
            fcd=curve[-1][2],
            time_to_target=reached,
            curve=curve,
        )
        if self.objective == "fcd":
            return record["fcd"]
        if self.objective == "images_per_sec":
            return record["images_per_sec"]
        return reached if reached is not None else self.time_cap


def data_and_info(source_data, batch_size, config, source):
    """Loads `source_data` batched to `batch_size`, with its info dict."""
    return data.load_images(
        source_data,
        batch_size=batch_size,
        labels=config.conditional,
        source=source,
        seed=config.seed,
        return_info=True,
    )


def search_batch_size(
    data="mnist",
    batch_sizes=(32, 64, 128, 256),
    learning_rates=(2e-4,),
    tuner="grid",
    objective="fcd",
    max_trials=None,
    strategy=None,
    directory="runs/tune",
    hypermodel=None,
    **hypermodel_kwargs,
):
    """Searches the batch size (and learning rate) that trains best.

    Writes `results.csv`, `results.md`, `results.json` and
    `quality_vs_time.png` (FCD against training seconds, one line per
    trial) under `directory`, beside keras-tuner's own trial records.

    Args:
        data: A dataset name or anything `load_images` takes.
        batch_sizes: Global batch sizes to try.
        learning_rates: Base learning rates to try.
        tuner: `"grid"`, `"random"`, `"bayesian"` or `"hyperband"`.
        objective: `"fcd"`, `"time_to_fcd"` or `"images_per_sec"`.
        max_trials: Trials for the random and Bayesian tuners (default:
            every combination).
        strategy: A `tf.distribute.Strategy` (or, on JAX, a
            `keras.distribution.DataParallel`).
        directory: Output directory.
        hypermodel: A ready `GANHyperModel` (then the arguments above that
            build one are not used).
        **hypermodel_kwargs: More `GANHyperModel` arguments (image_budget,
            lr_scaling, config, ...).

    Returns:
        `(best_hyperparameters, rows)`: a dict such as
        `{"batch_size": 64, "learning_rate": 0.0002}` and the result rows.

    Example:

    ```python
    best, rows = search_batch_size("mnist", batch_sizes=[64, 128, 256])
    ```
    """
    if tuner not in TUNERS:
        raise ValueError(f"Expected tuner in {TUNERS}. Received: tuner={tuner!r}.")
    hypermodel = hypermodel or GANHyperModel(
        data,
        batch_sizes=batch_sizes,
        learning_rates=learning_rates,
        objective=objective,
        strategy=strategy,
        **hypermodel_kwargs,
    )
    objective = hypermodel.objective
    combinations = len(hypermodel.batch_sizes) * len(hypermodel.learning_rates)
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
    _write_results(rows, best, objective, directory)
    return best, rows


def _rows(records):
    keys = (
        "trial",
        "batch_size",
        "learning_rate",
        "status",
        "objective",
        "train_seconds",
        "images_seen",
        "images_per_sec",
        "fcd",
        "time_to_target",
    )
    return [
        {k: r.get(k) for k in keys} | {"curve": r.get("curve", [])} for r in records
    ]


def _write_results(rows, best, objective, directory):
    os.makedirs(directory, exist_ok=True)
    keys = [k for k in rows[0] if k != "curve"] if rows else []
    with open(os.path.join(directory, "results.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    with open(os.path.join(directory, "results.json"), "w") as f:
        json.dump({"best": best, "objective": objective, "trials": rows}, f, indent=2)
    lines = [
        "| trial | batch | lr | status | "
        + objective
        + " | train s | images/s | FCD |",
        "|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:

        def fmt(value, spec):
            return "-" if value is None else format(value, spec)

        lines.append(
            f"| {r['trial']} | {r['batch_size']} | {r['learning_rate']:.2e} "
            f"| {r['status']} | {fmt(r['objective'], '.3f')} "
            f"| {fmt(r['train_seconds'], '.1f')} | {fmt(r['images_per_sec'], '.0f')} "
            f"| {fmt(r['fcd'], '.2f')} |"
        )
    lines.append("")
    lines.append(f"Best ({objective}): {best}")
    with open(os.path.join(directory, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    curves = {}
    for r in rows:
        if r["curve"]:
            seconds, _, fcd = zip(*r["curve"], strict=True)
            curves[f"trial {r['trial']}: batch {r['batch_size']}"] = (seconds, fcd)
    images.save_quality_plot(
        curves,
        os.path.join(directory, "quality_vs_time.png"),
        title="Quality vs wall time per trial",
    )
