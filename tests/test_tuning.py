import csv
import dataclasses
import json

import keras_tuner as kt
import numpy as np
import pytest

from keras_tpugan import distribute
from keras_tpugan.runs.config import TrainConfig
from keras_tpugan.studies import projection, search, tuning

# Plumbing, not quality: the smoke preset with the smallest networks.
SMOKE = TrainConfig.preset("smoke").override(["width=8", "latent_dim=8"])


def _hypermodel(classifier_dir, config=SMOKE, **kwargs):
    settings = dict(
        batch_sizes=[32, 64],
        strategy=distribute.get_strategy("cpu", num_replicas=1),
        image_budget=640,
        evaluations=2,
        quality_images=200,
        classifier_dir=classifier_dir,
        objective="fcd",
    )
    return tuning.GANHyperModel(config, **(settings | kwargs))


def test_grid_search_over_two_batch_sizes(tmp_path, classifier_dir):
    """Slow (about 15-35 s): two keras-tuner trials, each a GAN built, trained and
    scored."""
    best, rows = search.search_batch_size(
        hypermodel=_hypermodel(classifier_dir), directory=str(tmp_path)
    )
    assert sorted(r["batch_size"] for r in rows) == [32, 64]
    assert all(r["status"] == "ok" for r in rows)
    # Budgets in images seen: both trials saw the same number of images.
    assert {r["images_seen"] for r in rows} == {640}
    winner = min(rows, key=lambda r: r["objective"])
    assert best["batch_size"] == winner["batch_size"]
    assert all(r["objective"] == r["fcd"] for r in rows)
    assert {(r["precision"], r["seed"]) for r in rows} == {("float32", 0)}
    with open(tmp_path / "results.csv") as f:
        assert len(list(csv.DictReader(f))) == 2
    assert f"Best (fcd): {best}" in (tmp_path / "results.md").read_text()
    assert json.loads((tmp_path / "results.json").read_text())["best"] == best
    assert (tmp_path / "quality_vs_time.png").stat().st_size > 0


class FailingHyperModel(tuning.GANHyperModel):
    def fit(self, hp, model, *args, **kwargs):
        if hp.get("batch_size") == 64:
            self.records.append(
                {
                    "trial": len(self.records),
                    "batch_size": 64,
                    "learning_rate": 0.0,
                    "status": "failed: forced",
                }
            )
            raise kt.errors.FailedTrialError("forced failure")
        return super().fit(hp, model, *args, **kwargs)


def test_a_failed_trial_is_recorded_and_the_search_completes(tmp_path, classifier_dir):
    hypermodel = FailingHyperModel(
        SMOKE,
        batch_sizes=[32, 64],
        strategy=distribute.get_strategy("cpu", num_replicas=1),
        image_budget=320,
        evaluations=1,
        quality_images=200,
        classifier_dir=classifier_dir,
        objective="images_per_sec",
    )
    best, rows = search.search_batch_size(
        hypermodel=hypermodel, directory=str(tmp_path)
    )
    statuses = {r["batch_size"]: r["status"] for r in rows}
    assert statuses == {32: "ok", 64: "failed: forced"}
    assert best["batch_size"] == 32
    assert np.isfinite([r["objective"] for r in rows if r["status"] == "ok"]).all()


def test_bad_arguments(classifier_dir):
    with pytest.raises(ValueError, match="Expected objective in"):
        _hypermodel(classifier_dir, objective="inception_score")
    with pytest.raises(ValueError, match="Expected tuner in"):
        search.search_batch_size(tuner="annealing")
    with pytest.raises(ValueError, match="divisible by the 4 replica"):
        tuning.GANHyperModel(
            SMOKE,
            batch_sizes=[30],
            strategy=distribute.get_strategy("cpu", num_replicas=4),
        )
    with pytest.raises(ValueError, match="Expected `config` to be a"):
        tuning.GANHyperModel("mnist")
    with pytest.raises(ValueError, match="Expected lr_scaling in"):
        _hypermodel(classifier_dir, lr_scaling="cubic")


def test_trials_train_in_the_configs_precision_and_seed(classifier_dir):
    # The global policy is float32 here (conftest); the config says bfloat16.
    config = dataclasses.replace(SMOKE, precision="mixed_bfloat16", seed=7)
    hypermodel = _hypermodel(
        classifier_dir,
        config=config,
        batch_sizes=[64],
        image_budget=256,
        evaluations=1,
    )
    objectives = []
    for _ in range(2):
        hp = kt.HyperParameters()
        gan = hypermodel.build(hp)
        assert gan.generator.dtype_policy.name == "mixed_bfloat16"
        assert gan.discriminator.dtype_policy.name == "mixed_bfloat16"
        assert gan.seed == 7
        objectives.append(hypermodel.fit(hp, gan)["fcd"])
    # Seeded alike, two identical trials give the same objective.
    assert objectives[0] == objectives[1] and np.isfinite(objectives[0])
    assert [(r["precision"], r["seed"]) for r in hypermodel.records] == [
        ("mixed_bfloat16", 7)
    ] * 2


def test_time_to_fcd_is_the_default_and_reports_steps_images_seconds(
    tmp_path, classifier_dir
):
    hypermodel = tuning.GANHyperModel(
        SMOKE,
        batch_sizes=[32],
        strategy=distribute.get_strategy("cpu", num_replicas=1),
        image_budget=640,
        evaluations=2,
        quality_images=200,
        classifier_dir=classifier_dir,
        target_fcd=1e9,  # reached at the first score
    )
    assert hypermodel.objective == "time_to_fcd"
    _, rows = search.search_batch_size(hypermodel=hypermodel, directory=str(tmp_path))
    (row,) = rows
    # Scored after each half of the budget: 10 steps of 32 images.
    assert row["steps_to_target"] == 10 and row["images_to_target"] == 320
    assert row["seconds_to_target"] == row["objective"] > 0
    assert row["images_seen"] == 320  # it stopped at the target
    assert row["best_fcd"] == row["fcd"]
    with open(tmp_path / "results.csv") as f:
        header = next(csv.reader(f))
    for column in (
        "steps_to_target",
        "images_to_target",
        "seconds_to_target",
        "best_fcd",
    ):
        assert column in header
    assert (tmp_path / "quality_vs_images.png").stat().st_size > 0


def test_space_searches_any_setting_and_steps_to_fcd_ranks_by_steps(
    tmp_path, classifier_dir
):
    """Slow (about 30 s): four keras-tuner trials, each a GAN built and trained."""
    hypermodel = _hypermodel(
        classifier_dir,
        batch_sizes=[32, 64],
        space={"lr_scaling": ["linear", "sqrt-adam"]},
        image_budget=320,
        evaluations=1,
        objective="steps_to_fcd",
        target_fcd=-1.0,  # never reached: every trial runs its whole budget
    )
    assert hypermodel.combinations == 4
    best, rows = search.search_batch_size(
        hypermodel=hypermodel, directory=str(tmp_path)
    )
    assert len(rows) == 4
    for row in rows:
        # Not reached: one more than the budget's steps.
        assert row["objective"] == 320 // row["batch_size"] + 1
        assert row["steps_to_target"] is None
        assert row["images_seen"] == 320
    # Every trial trained with its own setting: from 32 to 64, linear
    # scaling doubles the rate, sqrt-adam multiplies it by sqrt(2).
    rates = {(r["lr_scaling"], r["batch_size"]): r["learning_rate"] for r in rows}
    assert rates == pytest.approx(
        {
            ("linear", 32): SMOKE.learning_rate,
            ("sqrt-adam", 32): SMOKE.learning_rate,
            ("linear", 64): 2 * SMOKE.learning_rate,
            ("sqrt-adam", 64): np.sqrt(2) * SMOKE.learning_rate,
        }
    )
    # Fewest steps wins: batch 64 needs half of 32's steps for the budget.
    assert best["batch_size"] == 64
    assert set(best) == {"batch_size", "learning_rate", "lr_scaling"}
    text = (tmp_path / "results.md").read_text()
    assert "Best at batch 32: trial" in text and "Best at batch 64: trial" in text
    with open(tmp_path / "results.csv") as f:
        header = next(csv.reader(f))
    assert "lr_scaling" in header


def test_steps_to_fcd_counts_the_steps_to_the_target(classifier_dir):
    hypermodel = _hypermodel(
        classifier_dir,
        batch_sizes=[32],
        image_budget=640,
        evaluations=2,
        objective="steps_to_fcd",
        target_fcd=1e9,  # reached at the first score
    )
    hp = kt.HyperParameters()
    assert hypermodel.fit(hp, hypermodel.build(hp)) == {"steps_to_fcd": 10}
    assert hypermodel.records[0]["images_seen"] == 320  # stopped there


def test_best_per_batch_size_skips_failed_trials():
    rows = [
        {"batch_size": 64, "status": "ok", "objective": 30, "trial": 0},
        {"batch_size": 64, "status": "ok", "objective": 20, "trial": 1},
        {"batch_size": 128, "status": "failed: out of memory", "objective": None},
        {"batch_size": 128, "status": "ok", "objective": 50, "trial": 3},
    ]
    best = search.best_per_batch_size(rows, "steps_to_fcd")
    assert {b: r["trial"] for b, r in best.items()} == {64: 1, 128: 3}
    best = search.best_per_batch_size(rows, "images_per_sec")
    assert {b: r["trial"] for b, r in best.items()} == {64: 0, 128: 3}


def test_bad_space(classifier_dir):
    with pytest.raises(ValueError, match="pass batch_sizes= and learning_rates="):
        _hypermodel(classifier_dir, space={"batch_size": [64]})
    with pytest.raises(ValueError, match="Unknown setting 'warmup' in `space`"):
        _hypermodel(classifier_dir, space={"warmup": [0, 1]})
    with pytest.raises(ValueError, match="non-empty list of values for 'ema_decay'"):
        _hypermodel(classifier_dir, space={"ema_decay": []})
    # Each value is checked by TrainConfig before any trial runs.
    with pytest.raises(ValueError, match="discriminator_steps"):
        _hypermodel(classifier_dir, space={"discriminator_steps": [1, 0]})


def test_projection_to_the_tpu_step_time_model():
    assert projection.projected_step_time(64, 64) == 1.0
    assert projection.projected_step_time(512, 64) == pytest.approx(1.68)
    assert projection.projected_step_time(256, 64) == pytest.approx(1 + 0.68 * 3 / 7)
    best = {
        64: {
            "steps_to_target": 3000,
            "images_to_target": 192000,
            "seconds_to_target": 200.0,
        },
        256: {"steps_to_target": None},
        512: {
            "steps_to_target": 1000,
            "images_to_target": 512000,
            "seconds_to_target": 600.0,
        },
    }
    rows = projection.projection(best)
    assert [r["batch_size"] for r in rows] == [64, 512]
    assert rows[1]["steps_ratio"] == pytest.approx(1 / 3)
    # A third of the steps at 1.68x the step time: 0.56x the time.
    assert rows[1]["projected_time_ratio"] == pytest.approx(1.68 / 3)
    assert rows[0]["projected_time_ratio"] == 1.0
    assert projection.projection({64: {"steps_to_target": None}}) == []


def test_unlabelled_data_is_searched_for_speed_only(tmp_path, classifier_dir):
    """The user's own images without labels: no classifier to measure the FCD
    with, so the FCD objectives are refused before any trial, and
    images_per_sec trials are timed and not scored."""
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (64, 16, 16, 3)).astype("uint8")
    with pytest.raises(ValueError, match="Expected labelled data.*images_per_sec"):
        _hypermodel(classifier_dir, data=images, batch_sizes=[16])
    hypermodel = _hypermodel(
        classifier_dir,
        data=images,
        batch_sizes=[16],
        objective="images_per_sec",
        image_budget=32,
        evaluations=1,
    )
    assert hypermodel.quality is None
    best, (row,) = search.search_batch_size(
        hypermodel=hypermodel, directory=str(tmp_path)
    )
    assert best["batch_size"] == 16 and row["status"] == "ok"
    assert row["images_seen"] == 32 and row["objective"] == row["images_per_sec"] > 0
    assert row["fcd"] is None and row["curve"] == []
    # The trial trained on these images, not on the config's MNIST.
    assert hypermodel._run.info["image_shape"] == (16, 16, 3)
