import csv
import dataclasses
import json

import keras_tuner as kt
import numpy as np
import pytest

from keras_tpugan import distribute, tuning
from keras_tpugan.config import TrainConfig

SMOKE = TrainConfig.preset("smoke")


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
    best, rows = tuning.search_batch_size(
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
    best, rows = tuning.search_batch_size(
        hypermodel=hypermodel, directory=str(tmp_path)
    )
    statuses = {r["batch_size"]: r["status"] for r in rows}
    assert statuses == {32: "ok", 64: "failed: forced"}
    assert best["batch_size"] == 32
    assert np.isfinite([r["objective"] for r in rows if r["status"] == "ok"]).all()


def test_bad_arguments(classifier_dir):
    with pytest.raises(ValueError, match="Expected objective in"):
        _hypermodel(classifier_dir, objective="fid")
    with pytest.raises(ValueError, match="Expected tuner in"):
        tuning.search_batch_size(tuner="annealing")
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
    _, rows = tuning.search_batch_size(hypermodel=hypermodel, directory=str(tmp_path))
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
