import json
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

import keras_tpugan as ktg
from keras_tpugan import cli


def test_train_smoke_writes_the_run_directory(tmp_path, capsys):
    out = tmp_path / "run"
    status = cli.main(
        [
            "train",
            "--preset",
            "smoke",
            "--set",
            "batch_size=128",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert status == 0
    for name in (
        "config.json",
        "history.csv",
        "loss_curves.png",
        "generator.keras",
        "summary.json",
        "samples/epoch_0001.png",
        "samples/samples.gif",
    ):
        assert os.path.exists(out / name), name
    summary = json.loads((out / "summary.json").read_text())
    # "auto" on a machine without TPU or GPU: all (here 4 logical) CPUs.
    cpus = len(tf.config.list_logical_devices("CPU"))
    assert summary["data_source"] == "offline" and summary["replicas"] == cpus == 4
    assert summary["batch_size"] == 128 and summary["precision"] == "float32"
    assert np.isfinite(summary["final"]["g_loss"])
    assert json.loads((out / "config.json").read_text())["batch_size"] == 128
    generator = ktg.models.dcgan_generator  # the saved model loads safely
    import keras

    loaded = keras.saving.load_model(out / "generator.keras", safe_mode=True)
    assert loaded.output_shape == generator(latent_dim=16, width=16).output_shape


def test_errors_are_one_clear_line(tmp_path, capsys):
    assert cli.main(["train", "--preset", "huge", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith("keras-tpugan: error: Expected a preset in") and "\n" not in err
    )
    assert cli.main(["train", "--set", "epoch=2", "--out", str(tmp_path)]) == 2
    assert "Valid settings" in capsys.readouterr().err


def test_help_has_an_example():
    result = subprocess.run(
        [sys.executable, "-m", "keras_tpugan.cli", "train", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "keras-tpugan train --preset demo" in result.stdout
