import csv
import json

import pytest

from keras_tpugan.cli import main as cli
from keras_tpugan.runs.config import TrainConfig
from keras_tpugan.studies import ablation


def test_parse_grid():
    grid = ablation.parse_grid(["augment=none,translation+cutout", "d_norm=spectral"])
    assert grid == {"augment": ["none", "translation,cutout"], "d_norm": ["spectral"]}
    with pytest.raises(ValueError, match="Unknown setting 'colour'"):
        ablation.parse_grid(["colour=1,2"])
    with pytest.raises(ValueError, match="Expected key=value"):
        ablation.parse_grid(["augment"])
    with pytest.raises(ValueError, match="each key once"):
        ablation.parse_grid(["seed=1", "seed=2"])


def test_a_bad_value_fails_before_any_run_trains(tmp_path):
    grid = {"augment": ["none", "flip"]}
    with pytest.raises(ValueError, match="Expected an augmentation policy"):
        ablation.run_ablation(TrainConfig.preset("smoke"), grid, tmp_path)
    assert not list(tmp_path.iterdir())


def test_sweep_grid_trains_each_setting_per_seed(tmp_path, classifier_dir, capsys):
    """Slow (about 40 s): four runs (two settings, two seeds), each building,
    tracing and scoring its GAN."""
    out = tmp_path / "ablation"
    status = cli.main(
        [
            "sweep",
            "--preset",
            "smoke",
            "--set",
            "quality_images=100",
            "--set",
            "validation_split=none",
            "--set",
            "batch_size=256",
            # Plumbing, not quality: the smallest networks, on one device.
            "--set",
            "width=8",
            "--set",
            "latent_dim=8",
            "--set",
            "num_replicas=1",
            "--grid",
            "augment=none,translation+cutout",
            "--seeds",
            "0",
            "1",
            "--out",
            str(out),
        ]
    )
    assert status == 0
    with open(out / "runs.csv") as f:
        runs = list(csv.DictReader(f))
    assert [(r["setting"], r["seed"]) for r in runs] == [
        ("augment=none", "0"),
        ("augment=none", "1"),
        ("augment=translation,cutout", "0"),
        ("augment=translation,cutout", "1"),
    ]
    assert all(r["status"] == "ok" and float(r["fcd"]) > 0 for r in runs)
    # The same image budget for every run: 15 steps of 256 images.
    assert {r["images_seen"] for r in runs} == {str(15 * 256)}
    rows = json.loads((out / "results.json").read_text())
    assert [r["runs"] for r in rows] == [2, 2]
    for row in rows:
        fcds = [float(r["fcd"]) for r in runs if r["setting"] == row["setting"]]
        assert row["fcd_mean"] == pytest.approx(sum(fcds) / 2)
    config = json.loads(
        (out / "augment-translation_cutout" / "seed_1" / "config.json").read_text()
    )
    assert config["augment"] == "translation,cutout" and config["seed"] == 1
    for name in ("results.md", "fcd_vs_images.png", "samples.png"):
        assert (out / name).stat().st_size > 0
    assert "FCD mean" in capsys.readouterr().out


def test_sweep_needs_batch_sizes_or_a_grid(tmp_path, capsys):
    assert cli.main(["sweep", "--preset", "smoke", "--out", str(tmp_path)]) != 0
    assert "Expected either --batch-sizes" in capsys.readouterr().err
