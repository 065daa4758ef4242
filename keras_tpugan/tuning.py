"""Searching the batch size, learning rate and any setting with keras-tuner."""

import dataclasses
import itertools
import math
import os

import keras
import keras_tuner as kt

from keras_tpugan import callbacks, distribute, reports
from keras_tpugan.config import TrainConfig
from keras_tpugan.epoch_batches import EpochBatches
from keras_tpugan.prepared_run import prepare

OBJECTIVES = {
    "fcd": "min",
    "time_to_fcd": "min",
    "steps_to_fcd": "min",
    "images_per_sec": "max",
}
TUNERS = ("grid", "random", "bayesian", "hyperband")
# The reference study's step-time model of a TPU v3-8: a step at 8x the
# batch (512 vs 64) took 1.68x as long, since small per-core batches are
# bound by per-step overhead. Used to project steps to target into time
# where no accelerator was measured.
TPU_STEP_TIME_RATIO = 1.68
TPU_BATCH_FACTOR = 8


class GANHyperModel(kt.HyperModel):
    """A keras-tuner `HyperModel` over the global batch size and settings of a GAN.

    Every trial starts from `config` and is set up by
    `keras_tpugan.prepared_run.prepare`, as `train` sets up a run: seeded
    with `config.seed`, in `config.precision`, on `data` (default: the
    config's dataset). `build(hp)`
    builds and compiles the GAN for `hp.Choice("batch_size", ...)` and
    `hp.Choice("learning_rate", ...)`, the rate scaled with the batch by
    `lr_scaling`, and one `hp.Choice` per entry of `space` (any other
    `TrainConfig` setting: warm-up, Adam's betas, EMA, discriminator steps,
    the optimizer, ...). `fit(hp, model)` trains for a budget counted in IMAGES
    SEEN (rounded down to whole evaluation chunks), so batch sizes are
    compared fairly, with the same callbacks `train` uses: `Throughput`
    times it, `QualityMetrics.for_data` scores the generator after each of
    the `evaluations` chunks (MNIST against the shipped classifier, other
    labelled data against a classifier of its own classes, trained once
    before the first trial and cached) and `DivergenceGuard` stops a
    diverging trial. It returns the objective:

    - `"fcd"`: the Frechet classifier distance at the end of the budget;
    - `"time_to_fcd"`: training seconds until the FCD reaches `target_fcd`
      (`time_cap` if it never does);
    - `"steps_to_fcd"`: training steps until the FCD reaches `target_fcd`
      (one more than the budget's steps if it never does), the measure
      that carries over to an accelerator whose step time hardly grows
      with the batch;
    - `"images_per_sec"`: training throughput after the compiling chunk
      (the only objective for data without labels, whose trials are not
      scored).

    A trial that runs out of memory or diverges raises
    `keras_tuner.errors.FailedTrialError`, so the search goes on. Every
    trial's figures, with the precision and seed it ran in, are kept in
    `records`.

    Args:
        config: The `TrainConfig` every trial starts from (default: the
            `"demo"` preset). Its data, precision, seed and model are used.
        batch_sizes: Global batch sizes to choose from (multiples of the
            replica count).
        learning_rates: Base learning rates to choose from (default: the
            config's).
        lr_scaling: `"none"`, `"linear"`, `"sqrt"` or `"sqrt-adam"` scaling
            of the rate from `base_batch_size` to the trial's batch size
            (a `space` entry `lr_scaling` searches it instead).
        base_batch_size: Batch size the base rates are meant for (default:
            the smallest of `batch_sizes`).
        objective: `"fcd"`, `"time_to_fcd"`, `"steps_to_fcd"` or
            `"images_per_sec"`.
        space: A dict from `TrainConfig` field to the values to search
            (strings as `--set` takes them, or typed values), for example
            `{"warmup_epochs": [0, 2], "discriminator_steps": [1, 2]}`.
        image_budget: Images seen per trial.
        evaluations: Times the FCD is measured during a trial.
        target_fcd: The FCD that `"time_to_fcd"` and `"steps_to_fcd"` wait
            for (every objective reports the steps, images and seconds to it).
        time_cap: Seconds after which a `"time_to_fcd"` trial stops.
        strategy: A `tf.distribute.Strategy` or, on JAX, a
            `keras.distribution.DataParallel` (default: the config's).
        quality_images: Generated images per FCD measurement.
        classifier_dir: Cache folder of the shipped MNIST classifier.
        data: Anything `keras_tpugan.data.load_images` takes (a folder, a
            TFDS name, `(images, labels)` arrays), in place of
            `config.dataset`; read with the config's `image_size`,
            `channels` and `resize`.

    Raises:
        ValueError: An objective other than `"images_per_sec"` on data
            without labels of at least 2 classes (no classifier to score
            it with).

    Example:

    ```python
    hypermodel = GANHyperModel(TrainConfig.preset("demo"), batch_sizes=[64, 256])
    tuner = keras_tuner.GridSearch(
        hypermodel, objective=keras_tuner.Objective("fcd", "min")
    )
    tuner.search()

    # Your own labelled folder (one subfolder per class), at 32x32 RGB:
    config = TrainConfig.preset("images").override(["image_size=32"])
    hypermodel = GANHyperModel(config, data="photos/", objective="fcd")
    ```
    """

    def __init__(
        self,
        config=None,
        batch_sizes=(32, 64, 128, 256),
        learning_rates=None,
        lr_scaling="linear",
        base_batch_size=None,
        objective="time_to_fcd",
        space=None,
        image_budget=64_000,
        evaluations=4,
        target_fcd=50.0,
        time_cap=600.0,
        strategy=None,
        quality_images=500,
        classifier_dir=None,
        data=None,
    ):
        super().__init__(name="gan")
        self.config = config or TrainConfig.preset("demo")
        if not isinstance(self.config, TrainConfig):
            raise ValueError(
                "Expected `config` to be a keras_tpugan.config.TrainConfig. "
                f"Received: {type(self.config).__name__}. Build one with "
                "TrainConfig.preset(name)."
            )
        if objective not in OBJECTIVES:
            raise ValueError(
                f"Expected objective in {tuple(OBJECTIVES)}. Received: {objective!r}."
            )
        if image_budget < 1 or evaluations < 1:
            raise ValueError(
                "Expected image_budget >= 1 and evaluations >= 1. Received: "
                f"image_budget={image_budget}, evaluations={evaluations}."
            )
        if not batch_sizes:
            raise ValueError(
                "Expected at least one batch size. Received: batch_sizes=()."
            )
        self.batch_sizes = sorted(int(b) for b in batch_sizes)
        self.learning_rates = [
            float(r) for r in (learning_rates or [self.config.learning_rate])
        ]
        self.base_batch_size = base_batch_size or self.batch_sizes[0]
        # Every setting a trial uses is checked here, once, by TrainConfig
        # (and the batch against the replicas), before any trial runs.
        self.lr_scaling = lr_scaling
        self.space = _check_space(space or {})
        for batch, rate in itertools.product(self.batch_sizes, self.learning_rates):
            self._trial_config(batch, rate)
        for key, values in self.space.items():
            for value in values:
                self._trial_config(
                    self.batch_sizes[0], self.learning_rates[0], {key: value}
                )
        self.strategy = strategy or distribute.get_strategy(
            **self.config.strategy_options()
        )
        for batch in self.batch_sizes:
            distribute.check_global_batch(batch, self.strategy)
        self.objective = objective
        self.image_budget = int(image_budget)
        self.evaluations = int(evaluations)
        self.target_fcd = float(target_fcd)
        self.time_cap = float(time_cap)
        self.quality_images = quality_images
        self.classifier_dir = classifier_dir
        self.data = data
        self.quality = self._quality()
        self.records = []
        self._run = None

    def _quality(self):
        """The scoring every trial shares, or None for unlabelled data.

        Built once, before any trial: for data other than MNIST it trains
        (or loads from the cache) the classifier of the data's classes.
        """
        data = self.config.dataset if self.data is None else self.data
        quality = callbacks.QualityMetrics.for_data(
            data,
            source=self.config.source,
            image_size=self.config.image_size,
            channels=self.config.channels,
            resize=self.config.resize,
            num_images=self.quality_images,
            classifier_dir=self.classifier_dir,
            seed=self.config.seed,
            stream=self.config.stream,
            on_unlabelled="none",
        )
        if quality is None and self.objective != "images_per_sec":
            raise ValueError(
                f"Expected labelled data (2 or more classes) for objective="
                f"{self.objective!r}: the FCD is measured with a classifier "
                "of the data's classes. Received data without labels. Pass "
                "a folder with one subfolder per class (or a TFDS dataset "
                "with a label feature), or search objective='images_per_sec'."
            )
        return quality

    def _scoring(self, seed):
        """A fresh `QualityMetrics` for one trial, sharing the classifier."""
        quality = self.quality
        if quality.own_classifier is None:  # MNIST: the shipped classifier
            return callbacks.QualityMetrics(
                num_images=self.quality_images,
                classifier_dir=self.classifier_dir,
                seed=seed,
            )
        return callbacks.QualityMetrics(
            classifier=quality.own_classifier,
            real_images=quality.real_images,
            held_out_images=quality.held_out_images,
            num_images=self.quality_images,
            seed=seed,
        )

    @property
    def combinations(self):
        """How many settings the search space holds."""
        count = len(self.batch_sizes) * len(self.learning_rates)
        return count * math.prod(len(v) for v in self.space.values())

    def _trial_config(self, batch, rate, choices=None):
        config = dataclasses.replace(
            self.config,
            batch_size=batch,
            learning_rate=rate,
            lr_scaling=self.lr_scaling,
            base_batch_size=self.base_batch_size,
        )
        return config.override([f"{k}={v}" for k, v in (choices or {}).items()])

    def build(self, hp):
        batch = hp.Choice("batch_size", self.batch_sizes)
        base_lr = hp.Choice("learning_rate", self.learning_rates)
        choices = {
            key: hp.Choice(key, values, ordered=False)
            for key, values in self.space.items()
        }
        self._run = prepare(
            self._trial_config(batch, base_lr, choices), self.strategy, data=self.data
        )
        return self._run.build_gan()

    def fit(self, hp, model, *args, **kwargs):
        run = self._run
        batch = hp.get("batch_size")
        record = {
            "trial": len(self.records),
            "batch_size": batch,
            "learning_rate": run.config.scaled_learning_rate,
            "settings": {key: hp.get(key) for key in self.space},
            "precision": keras.mixed_precision.global_policy().name,
            "seed": run.config.seed,
            "status": "ok",
        }
        self.records.append(record)
        # Hyperband grants a share of the budget through `epochs`.
        share = 1.0
        if "epochs" in kwargs:
            share = kwargs["epochs"] / max(1, kwargs.get("max_epochs", 1))
        try:
            value = self._train(model, run, share, record)
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

    def _train(self, model, run, share, record):
        batch = run.config.batch_size
        total_steps = max(1, math.ceil(self.image_budget * min(1.0, share) / batch))
        chunk = max(1, total_steps // self.evaluations)
        speed = callbacks.Throughput(global_batch_size=batch)
        guard = callbacks.DivergenceGuard()
        target = _TimeToTarget(speed, self.target_fcd)
        if self.objective == "time_to_fcd":
            target.time_cap = self.time_cap
        if self.objective == "steps_to_fcd":
            target.time_cap = math.inf  # stop once the target is reached
        # Each "epoch" of this fit is one evaluation chunk; the callbacks
        # run in list order, so the time and the score are in the logs
        # before `target` reads them. Unlabelled data is timed, not scored.
        scored = self.quality is not None
        fit_callbacks = (
            [speed, self._scoring(run.config.seed), guard, target]
            if scored
            else [speed, guard]
        )
        endless = (
            run.dataset.repeated()  # JAX: an EpochBatches
            if isinstance(run.dataset, EpochBatches)
            else run.dataset.repeat()
        )
        history = model.fit(
            endless,
            epochs=max(1, total_steps // chunk),
            steps_per_epoch=chunk,
            verbose=0,
            callbacks=fit_callbacks,
        )
        if guard.stopped_reason is not None:
            raise kt.errors.FailedTrialError(
                f"diverged at batch {batch}: {guard.stopped_reason}"
            )
        seconds = speed.total_seconds
        images_seen = len(history.epoch) * chunk * batch
        reached = target.reached or {}
        record.update(
            train_seconds=seconds,
            images_seen=images_seen,
            images_per_sec=speed.mean_images_per_sec or images_seen / seconds,
            fcd=history.history["fcd"][-1] if scored else None,
            best_fcd=min(c[2] for c in target.curve) if scored else None,
            steps_to_target=reached.get("steps"),
            images_to_target=reached.get("images"),
            seconds_to_target=reached.get("seconds"),
            curve=target.curve,
        )
        if self.objective == "fcd":
            return record["fcd"]
        if self.objective == "images_per_sec":
            return record["images_per_sec"]
        if self.objective == "steps_to_fcd":
            return reached.get("steps", total_steps + 1)
        return reached.get("seconds", self.time_cap)


class _TimeToTarget(keras.callbacks.Callback):
    """Records (seconds, images seen, FCD) per epoch; can stop at a target."""

    def __init__(self, speed, target_fcd):
        super().__init__()
        self.speed, self.target_fcd = speed, target_fcd
        self.time_cap = None  # set: stop at the target or past the cap
        # `reached`: the steps, images and seconds at the target, once met.
        self.curve, self.reached = [], None

    def on_epoch_end(self, epoch, logs=None):
        seconds = self.speed.total_seconds
        steps = (epoch + 1) * self.params["steps"]
        images = steps * self.speed.global_batch_size
        fcd = logs["fcd"]
        self.curve.append((seconds, images, fcd))
        if self.reached is None and fcd <= self.target_fcd:
            self.reached = {"steps": steps, "images": images, "seconds": seconds}
        if self.time_cap is not None and (
            self.reached is not None or seconds > self.time_cap
        ):
            self.model.stop_training = True


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
        objective: `"fcd"`, `"time_to_fcd"`, `"steps_to_fcd"` or
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


def projected_step_time(batch, base_batch):
    """Step time at `batch` relative to `base_batch` on the TPU model.

    Linear in the batch through the reference study's measurement (8x the
    batch: 1.68x the step time): 1.0 at `base_batch`, about 1.10 at twice
    it, 1.29 at four times, 1.68 at eight times. A model for projecting,
    not a measurement: replace it with measured step times where an
    accelerator is at hand.

    Args:
        batch: Global batch size.
        base_batch: The batch size whose step time is 1.

    Returns:
        The relative step time (a float).

    Example:

    >>> round(projected_step_time(512, 64), 2)
    1.68
    """
    growth = (TPU_STEP_TIME_RATIO - 1) / (TPU_BATCH_FACTOR - 1)
    return 1.0 + growth * (batch / base_batch - 1)


def projection(best):
    """Time to target per batch size, measured here and projected to a TPU.

    Args:
        best: `best_per_batch_size`'s dict (rows with `steps_to_target`).

    Returns:
        One dict per batch size that reached the target: `batch_size`,
        `steps_to_target`, `images_to_target`, `seconds_to_target` (as
        measured), `steps_ratio` (its steps over the smallest batch's),
        `step_time_model` (`projected_step_time` from the smallest batch)
        and `projected_time_ratio` (steps x step time, over the smallest
        batch's: below 1 means the larger batch reaches the target sooner).
    """
    reached = {b: r for b, r in best.items() if r.get("steps_to_target")}
    if not reached:
        return []
    base = min(reached)
    base_steps = reached[base]["steps_to_target"]
    rows = []
    for batch, row in reached.items():
        model = projected_step_time(batch, base)
        ratio = row["steps_to_target"] / base_steps
        rows.append(
            {
                "batch_size": batch,
                "steps_to_target": row["steps_to_target"],
                "images_to_target": row["images_to_target"],
                "seconds_to_target": row["seconds_to_target"],
                "steps_ratio": ratio,
                "step_time_model": model,
                "projected_time_ratio": ratio * model,
            }
        )
    return rows


def _projection_lines(best):
    rows = projection(best)
    if len(rows) < 2:
        return []
    columns = [
        ("batch_size", "batch", "d"),
        ("steps_to_target", "steps to target", "d"),
        ("images_to_target", "images to target", "d"),
        ("seconds_to_target", "s to target (here)", ".1f"),
        ("steps_ratio", "steps vs smallest", ".2f"),
        ("step_time_model", "TPU step time model", ".2f"),
        ("projected_time_ratio", "projected TPU time vs smallest", ".2f"),
    ]
    return [
        "",
        "Best trial per batch size, projected to a TPU v3-8 (step time at 8x the "
        "batch = 1.68x, the reference study's measurement, linear in between):",
        "",
        *reports.markdown_table(rows, columns),
    ]


def _check_space(space):
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    checked = {}
    for key, values in space.items():
        if key in ("batch_size", "learning_rate"):
            raise ValueError(
                f"Expected `space` without {key!r}: pass batch_sizes= and "
                "learning_rates= (--batch-sizes, --learning-rates) instead."
            )
        if key not in fields:
            raise ValueError(
                f"Unknown setting {key!r} in `space`. Valid settings: "
                f"{', '.join(sorted(fields - {'batch_size', 'learning_rate'}))}."
            )
        if isinstance(values, (str, bytes)) or not values:
            raise ValueError(
                f"Expected a non-empty list of values for {key!r} in `space`. "
                f"Received: {values!r}."
            )
        # keras-tuner's Choice needs values of one type: keep them as the
        # strings `TrainConfig.override` parses.
        checked[key] = [str(v) for v in values]
    return checked


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
        ("steps_to_target", "steps to target", "d"),
        ("images_to_target", "images to target", "d"),
        ("seconds_to_target", "s to target", ".1f"),
    ]
    reports.write_results(
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
        + _projection_lines(per_batch),
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
    reports.save_quality_plot(
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
    reports.save_quality_plot(
        by_images,
        os.path.join(directory, "quality_vs_images.png"),
        title="Quality vs images seen per trial",
        xlabel="images seen",
    )
