"""`GANHyperModel`: the GAN as a keras-tuner `HyperModel` over the batch size,
the learning rate and any setting of `TrainConfig`."""

import dataclasses
import itertools
import math

import keras
import keras_tuner as kt

from keras_tpugan import callbacks, distribute
from keras_tpugan.data.epoch_batches import EpochBatches
from keras_tpugan.runs.config import TrainConfig
from keras_tpugan.runs.prepared_run import prepare
from keras_tpugan.studies.time_to_target import TimeToTarget

OBJECTIVES = {
    "fcd": "min",
    "fid": "min",
    "time_to_fcd": "min",
    "steps_to_fcd": "min",
    "images_per_sec": "max",
}


class GANHyperModel(kt.HyperModel):
    """A keras-tuner `HyperModel` over the global batch size and settings of a GAN.

    Every trial starts from `config` and is set up by
    `keras_tpugan.runs.prepared_run.prepare`, as `train` sets up a run: seeded
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
    - `"fid"`: the standard FID (`metrics.FIDInception`) at the end of the
      budget, against the data's own images: any data, labelled or not;
    - `"time_to_fcd"`: training seconds until the FCD reaches `target_fcd`
      (`time_cap` if it never does);
    - `"steps_to_fcd"`: training steps until the FCD reaches `target_fcd`
      (one more than the budget's steps if it never does), the measure
      that carries over to an accelerator whose step time hardly grows
      with the batch;
    - `"images_per_sec"`: training throughput after the compiling chunk
      (trials on data without labels are then timed, not scored).

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
        quality_images: Generated images per FCD (or FID) measurement.
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
                "Expected `config` to be a keras_tpugan.runs.config.TrainConfig. "
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
        fid = {"features": "inception"} if self.objective == "fid" else {}
        quality = callbacks.QualityMetrics.for_data(
            self.config.image_source(data=self.data),
            num_images=self.quality_images,
            classifier_dir=self.classifier_dir,
            seed=self.config.seed,
            on_unlabelled="none",
            **fid,
        )
        if quality is None and self.objective != "images_per_sec":
            raise ValueError(
                f"Expected labelled data (2 or more classes) for objective="
                f"{self.objective!r}: the FCD is measured with a classifier "
                "of the data's classes. Received data without labels. Pass "
                "a folder with one subfolder per class (or a TFDS dataset "
                "with a label feature), rank by objective='fid' (the standard "
                "FID, any data), or search objective='images_per_sec'."
            )
        return quality

    def _scoring(self, seed):
        """A fresh `QualityMetrics` for one trial, sharing the classifier."""
        quality = self.quality
        if quality.features == "inception":  # FID: the same real images
            scoring = callbacks.QualityMetrics(
                features="inception",
                inception_weights=quality.inception_weights,
                real_images=quality.real_images,
                held_out_images=quality.held_out_images,
                num_images=self.quality_images,
                seed=seed,
            )
            # Their features and floor, computed once for every trial.
            scoring.real_features, scoring.floor = quality.fid_reference()
            return scoring
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
        distance = "fid" if self.objective == "fid" else "fcd"
        target = TimeToTarget(speed, self.target_fcd, distance)
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
            fcd=history.history["fcd"][-1] if scored and distance == "fcd" else None,
            best_fcd=target.best if distance == "fcd" else None,
            fid=history.history["fid"][-1] if distance == "fid" else None,
            best_fid=target.best if distance == "fid" else None,
            steps_to_target=reached.get("steps"),
            images_to_target=reached.get("images"),
            seconds_to_target=reached.get("seconds"),
            curve=target.curve,
        )
        if self.objective in ("fcd", "fid"):
            return record[self.objective]
        if self.objective == "images_per_sec":
            return record["images_per_sec"]
        if self.objective == "steps_to_fcd":
            return reached.get("steps", total_steps + 1)
        return reached.get("seconds", self.time_cap)


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
