import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import time
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_same_epoch_means, colour_folder, subprocess_env
from PIL import Image

import keras_tpugan as ktg
from keras_tpugan import precision
from keras_tpugan.cli import main as cli
from keras_tpugan.runs import backup_files, timed_backup


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory, classifier_dir):
    out = tmp_path_factory.mktemp("smoke") / "run"
    status = cli.main(
        [
            "train",
            "--preset",
            "smoke",
            "--set",
            "batch_size=128",
            "--set",
            "precision=auto",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert status == 0
    return out


def test_train_smoke_writes_the_run_directory(smoke_run):
    """Slow (about 20-30 s, in its module fixture): the smoke preset trains an
    epoch over the 4,000 offline digits, validates and scores it."""
    out = smoke_run
    for name in (
        "config.json",
        "history.csv",
        "loss_curves.png",
        "quality.png",
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
    # "auto" resolved on this machine's devices, and recorded with the setting.
    assert summary["batch_size"] == 128 and summary["precision_setting"] == "auto"
    assert summary["precision"] == precision.resolve()[0]
    assert summary["images_per_sec"] is None  # one epoch: only the compiling one
    assert summary["first_epoch_seconds"] > 0
    final = summary["final"]
    assert np.isfinite(final["g_loss"]) and np.isfinite(final["fcd"])
    assert final["classifier_score_real"] > 9
    # Validated on the offline subset's 1,000 held-out digits by default.
    assert summary["validation_split"] == "test"
    assert np.isfinite(final["val_d_real"]) and np.isfinite(final["val_g_loss"])
    assert json.loads((out / "config.json").read_text())["batch_size"] == 128
    loaded = keras.saving.load_model(out / "generator.keras", safe_mode=True)
    assert loaded.output_shape == (None, 28, 28, 1)


def test_sample_writes_a_grid(smoke_run, tmp_path, capsys):
    out = tmp_path / "grid.png"
    assert (
        cli.main(["sample", "--model", str(smoke_run), "--num", "9", "--out", str(out)])
        == 0
    )
    assert Image.open(out).size == (3 * 58 + 2, 3 * 58 + 2)
    assert (
        cli.main(["sample", "--model", str(tmp_path / "nope"), "--out", str(out)]) == 2
    )
    assert "Expected a .keras file or a run directory" in capsys.readouterr().err
    # A folder with no snapshot and no generator: named as given.
    (tmp_path / "run").mkdir()
    argv = ["sample", "--model", str(tmp_path / "run"), "--out", str(out)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert f"Received: {str(tmp_path / 'run')!r}, a folder with neither" in err
    assert "stopped before its first snapshot" in err
    assert (
        cli.main(
            [
                "sample",
                "--model",
                str(smoke_run),
                "--labels",
                "1",
                "--num",
                "1",
                "--out",
                str(out),
            ]
        )
        == 2
    )
    assert "not class-conditional" in capsys.readouterr().err


def test_sweep_writes_the_table_and_plots_and_survives_a_failed_run(tmp_path, capsys):
    """Slow (about 60-90 s): three runs of the sweep, each building, tracing and
    scoring its GAN."""
    out = tmp_path / "sweep"
    args = [
        "sweep",
        "--preset",
        "smoke",
        "--batch-sizes",
        "128",
        "64",
        "5000",
        "--epochs",
        "2",
        "--lr-scaling",
        "linear",
        "--target-fcd",
        "100000",
        # Plumbing, not quality: the smallest networks on one device, and
        # no validation pass after each epoch (the sweep's table has no
        # validation column; test_train_smoke_writes_the_run_directory
        # checks train's, and that "auto" takes every device).
        "--set",
        "width=8",
        "--set",
        "latent_dim=8",
        "--set",
        "num_replicas=1",
        "--set",
        "validation_split=none",
        "--out",
        str(out),
    ]
    assert cli.main(args) == 0
    printed = capsys.readouterr().out
    assert "2 runs ok, 1 failed" in printed
    with open(out / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["batch_size"] for r in rows] == ["64", "128", "5000"]
    assert list(rows[0]) == [
        "batch_size",
        "learning_rate",
        "steps_per_epoch",
        "mean_epoch_seconds",
        "total_seconds",
        "time_reduction_pct",
        "images_per_sec",
        "d_loss",
        "g_loss",
        "fcd",
        "classifier_score",
        "best_fcd",
        "steps_to_target",
        "images_to_target",
        "seconds_to_target",
        "status",
    ]
    assert rows[0]["status"] == rows[1]["status"] == "ok"
    assert rows[2]["status"].startswith("failed: ValueError: Expected batch_size <=")
    assert int(rows[0]["steps_per_epoch"]) == 4000 // 64
    assert float(rows[0]["time_reduction_pct"]) == 0.0
    # Linear scaling from the smallest batch: 128 gets twice 64's rate.
    assert float(rows[1]["learning_rate"]) == pytest.approx(
        2 * float(rows[0]["learning_rate"])
    )
    assert float(rows[1]["fcd"]) > 0 and 1 <= float(rows[1]["classifier_score"]) <= 10
    # Scored after the same images (every 4,000, the dataset) at each batch:
    # the first score past 4,000 images, at step 63 of 64 or 32 of 128.
    assert [int(r["steps_to_target"]) for r in rows[:2]] == [63, 32]
    for row, batch in zip(rows[:2], (64, 128), strict=True):
        assert int(row["images_to_target"]) == int(row["steps_to_target"]) * batch
        assert 0 < float(row["seconds_to_target"]) <= float(row["total_seconds"])
        assert float(row["best_fcd"]) <= float(row["fcd"])
    assert rows[2]["steps_to_target"] == ""
    table = (out / "results.md").read_text()
    assert table.count("\n") == 5 and "| FCD | classifier score |" in table
    assert len(json.loads((out / "results.json").read_text())) == 3
    for plot in (
        "learning_curves.png",
        "epoch_time.png",
        "quality_vs_time.png",
        "quality_vs_images.png",
    ):
        assert Image.open(out / plot).size[0] > 300, plot


def test_errors_are_one_clear_line(tmp_path, capsys):
    assert cli.main(["train", "--preset", "huge", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith("keras-tpugan: error: Expected a preset in") and "\n" not in err
    )
    assert cli.main(["train", "--set", "epoch=2", "--out", str(tmp_path)]) == 2
    assert "Valid settings" in capsys.readouterr().err
    # 4 replicas here: a global batch of 30 does not split.
    assert (
        cli.main(
            [
                "train",
                "--preset",
                "smoke",
                "--set",
                "batch_size=30",
                "--out",
                str(tmp_path),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert "divisible by the 4 replica" in err and "\n" not in err
    # Choices are checked once, by the library, and reported the same way.
    tune = ["tune", "--preset", "smoke", "--batch-sizes", "64", "--out", str(tmp_path)]
    assert cli.main([*tune, "--tuner", "annealing"]) == 2
    assert "Expected tuner in" in capsys.readouterr().err
    assert cli.main([*tune, "--objective", "inception_score"]) == 2
    assert "Expected objective in" in capsys.readouterr().err
    sweep = [
        "sweep",
        "--preset",
        "smoke",
        "--batch-sizes",
        "64",
        "--out",
        str(tmp_path),
    ]
    assert cli.main([*sweep, "--lr-scaling", "cubic"]) == 2
    assert "Expected lr_scaling in" in capsys.readouterr().err


def test_the_packages_warnings_print_as_one_line_at_the_command_line(tmp_path):
    from keras_tpugan.data import loading

    default = warnings.formatwarning
    formatted = cli._one_line_warnings(default)
    text = "Skipped 1 of the 9 files under 'photos' that are not readable images"
    assert formatted(text, UserWarning, loading.__file__, 170, "read_images(") == (
        f"keras-tpugan: warning: {text}\n"
    )
    # Keras's own (and TensorFlow's) keep Python's form, path and line.
    args = ("old", DeprecationWarning, keras.__file__, 3, "x = 1")
    assert formatted(*args) == default(*args) != "keras-tpugan: warning: old\n"
    # The command puts the formatter in place only while it runs.
    assert cli.main(["train", "--set", "epoch=2", "--out", str(tmp_path)]) == 2
    assert warnings.formatwarning is default


@pytest.mark.parametrize(
    "command", ["train", "settings", "sweep", "tune", "sample", "bench"]
)
def test_every_subcommand_has_help_with_an_example(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert "examples:" in text and f"keras-tpugan {command} " in text
    assert "--verbose" in text


def test_every_flag_of_every_subcommand_says_what_it_is_for():
    subcommands = next(
        action
        for action in cli._parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    assert set(subcommands.choices) == {
        "train",
        "settings",
        "sweep",
        "tune",
        "sample",
        "fid",
        "bench",
        "launch",
    }
    silent = [
        f"{name} {action.option_strings[0]}"
        for name, parser in subcommands.choices.items()
        for action in parser._actions
        if action.option_strings and not action.help
    ]
    assert silent == []
    # And every one that takes a value says its default (the formatter adds
    # the ones that are values), or why it has its own ("here").
    undefaulted = [
        f"{name} {action.option_strings[0]}"
        for name, parser in subcommands.choices.items()
        for action in parser._actions
        if action.option_strings
        and action.nargs != 0  # not a switch
        and not action.required
        and not any(
            word in parser._get_formatter()._get_help_string(action)
            for word in ("default", "here")
        )
    ]
    assert undefaulted == []


def _subparsers():
    return next(
        action
        for action in cli._parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    ).choices


def test_a_flag_has_one_default_in_every_subcommand_or_says_why():
    defaults = {}
    for name, parser in _subparsers().items():
        for action in parser._actions:
            for flag in action.option_strings:
                defaults.setdefault(flag, []).append((name, action.default, action))
    unexplained = {
        flag: [(name, default) for name, default, _ in uses]
        for flag, uses in defaults.items()
        if len({repr(default) for _, default, _ in uses}) > 1
        # A subcommand with a default of its own says why, "here".
        and not all("here" in action.help for _, d, action in uses if d is not None)
    }
    assert unexplained == {}


def test_the_everyday_flags_reach_the_config():
    from keras_tpugan.cli.arguments import config_from_args
    from keras_tpugan.runs.config import TrainConfig

    args = cli._parser().parse_args(
        [
            "train",
            "--preset",
            "smoke",
            "--batch-size",
            "32",
            "--epochs",
            "3",
            "--learning-rate",
            "1e-3",
            "--seed",
            "5",
            "--precision",
            "float32",
            "--mirror",
            "--set",
            "epochs=7",  # the flag wins
            "--set",
            "beta_1=0.2",
            "--out",
            "x",
        ]
    )
    config = config_from_args(args)
    assert (config.batch_size, config.epochs, config.learning_rate) == (32, 3, 1e-3)
    assert (config.seed, config.precision, config.xflip) == (5, "float32", True)
    assert config.beta_1 == 0.2
    # Unset flags leave the preset's values.
    config = config_from_args(cli._parser().parse_args(["train", "--out", "x"]))
    assert config == TrainConfig.preset("demo")
    # A study varies the batch size: its flag is --batch-sizes.
    sweep = _subparsers()["sweep"]
    flags = {f for action in sweep._actions for f in action.option_strings}
    assert {"--epochs", "--learning-rate", "--mirror", "--batch-sizes"} <= flags
    assert "--batch-size" not in flags


def test_settings_lists_every_setting_with_its_value_and_help(capsys):
    import dataclasses

    from keras_tpugan.runs.config import TrainConfig
    from keras_tpugan.runs.settings_help import SETTINGS_HELP

    names = [f.name for f in dataclasses.fields(TrainConfig)]
    assert list(SETTINGS_HELP) == names  # one line each, in the config's order
    assert cli.main(["settings", "--preset", "smoke"]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    assert [line.split()[0] for line in lines] == names
    rows = {line.split()[0]: line.split()[1] for line in lines}
    assert rows["epochs"] == "1" and rows["validation_split"] == "test"
    assert rows["image_size"] == "none" and rows["xflip"] == "false"
    assert any("(--batch-size)" in line for line in lines)
    assert cli.main(["settings", "--preset", "nope"]) == 2


def test_help_and_version_answer_without_importing_keras():
    """Slow (about 2 s): new processes, which list their imports."""
    for flags in (["--help"], ["train", "--help"], ["--version"]):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "keras_tpugan.cli", *flags],
            capture_output=True,
            text=True,
            env=subprocess_env(),
            check=True,
        )
        imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines()}
        assert "keras_tpugan.cli.main" in imported
        assert not {"keras", "tensorflow", "jax"} & imported, flags


def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"keras-tpugan {ktg.__version__}\n"


def test_the_command_runs_quietly_unless_verbose():
    """Slow (about 20 s): two new processes, each importing TensorFlow."""

    # A real process: TensorFlow's native start-up logs are hidden by
    # default (they go to fd 2 before any Python code could filter them).
    # `settings` imports TensorFlow (`--help` does not).
    def run(*flags, **env):
        return subprocess.run(
            [sys.executable, "-m", "keras_tpugan.cli", "settings", *flags],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, **env},
        )

    env = {"TF_CPP_MIN_LOG_LEVEL": "0"}
    quiet = run(**env)
    assert "settings of the 'demo' preset" in quiet.stdout
    assert "absl::InitializeLog" not in quiet.stderr
    assert "cuda" not in quiet.stderr.lower()
    loud = run("--verbose", **env)
    assert "settings of the 'demo' preset" in loud.stdout
    # With --verbose TensorFlow speaks as usual (on this CPU-only machine at
    # least its start-up notice).
    assert "absl::InitializeLog" in loud.stderr or "cuda" in loud.stderr.lower()


def test_train_on_the_jax_backend_from_a_tensorflow_process(tmp_path, classifier_dir):
    """Slow (about 50 s): the command starts a JAX process, which imports JAX,
    compiles its step and trains."""
    # Keras runs TensorFlow in this process: the command reruns itself on JAX.
    # (Plumbing: the smallest networks, no scoring or validation; JAX's
    # scoring is checked in test_callbacks and test_metrics.)
    out = tmp_path / "jax"
    argv = ["train", "--backend", "jax", "--preset", "smoke"]
    argv += ["--set", "batch_size=128", "--set", "width=8", "--set", "latent_dim=8"]
    argv += ["--set", "quality_every=0", "--set", "validation_split=none"]
    argv += ["--set", "sample_every_images=2000"]
    argv += ["--out", str(out), "--quiet"]
    assert cli.main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["backend"] == "jax" and summary["strategy"] == "DataParallel"
    assert np.isfinite(summary["final"]["g_loss"])
    # 31 steps of 128: a grid at 2,048 images (step 16), and the epoch's end.
    assert summary["sample_every_images"] == 2000
    pngs = sorted(p.name for p in (out / "samples").glob("*.png"))
    assert pngs == ["epoch_0001.png", "images_000002048.png"]
    # The generator it saved samples here, on TensorFlow.
    grid = tmp_path / "grid.png"
    assert (
        cli.main(["sample", "--model", str(out), "--num", "4", "--out", str(grid)]) == 0
    )
    assert Image.open(grid).size[0] > 0


def test_tune_passes_space_base_batch_and_evaluations(tmp_path, monkeypatch):
    from keras_tpugan.studies import search

    seen = {}

    def fake_search(config, **kwargs):
        seen.update(kwargs, config=config)
        (tmp_path / "results.md").write_text("table\n")
        return {"batch_size": 512}, []

    monkeypatch.setattr(search, "search_batch_size", fake_search)
    argv = ["tune", "--preset", "smoke", "--batch-sizes", "512", "--out", str(tmp_path)]
    extra = ["--base-batch-size", "64", "--space", "warmup_epochs=0,5"]
    extra += ["--space", "augment=none,translation+cutout", "--evaluations", "48"]
    assert cli.main([*argv, *extra, "--objective", "steps_to_fcd"]) == 0
    assert seen["base_batch_size"] == 64 and seen["evaluations"] == 48
    assert seen["objective"] == "steps_to_fcd"
    assert seen["space"] == {
        "warmup_epochs": ["0", "5"],
        "augment": ["none", "translation,cutout"],
    }
    # The trials score 500 images unless --set names another count.
    assert "quality_images" not in seen
    assert cli.main([*argv, "--set", "quality_images=64"]) == 0
    assert seen["quality_images"] == 64
    assert cli.main([*argv, "--space", "warmup=0,5"]) == 2


# Plumbing, not quality: the smallest networks, on one device as on a
# user's CPU (the suite's process has four logical CPU devices, and "auto"
# takes them all: test_train_smoke_writes_the_run_directory checks that).
TINY_RUN = ["--preset", "smoke", "--set", "epochs=1", "--set", "batch_size=16"]
TINY_RUN += ["--set", "width=8", "--set", "latent_dim=8", "--quiet"]
TINY_RUN += ["--set", "num_replicas=1"]


def test_train_on_a_folder_of_rgb_images_with_class_subfolders(
    tmp_path, capsys, monkeypatch
):
    """Slow (about 25-60 s): three small training runs on colour folders, the
    first training a metric classifier on its two classes."""
    colour_folder(tmp_path / "images")
    out = tmp_path / "run"
    argv = ["train", "--data", str(tmp_path / "images"), "--image-size", "32"]
    argv += [*TINY_RUN, "--set", "conditional=true", "--set", "quality_images=32"]
    argv += ["--out", str(out)]
    assert cli.main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["data_source"] == "folder" and summary["num_examples"] == 48
    assert summary["image_shape"] == [32, 32, 3]
    assert not summary["data_streamed"]
    assert summary["data_memory_bytes"] == 48 * 32 * 32 * 3  # uint8
    # Scored on a classifier of its own two classes, trained for the run.
    assert summary["quality_unavailable"] is None
    final = summary["final"]
    assert np.isfinite(final["fcd"]) and np.isfinite(final["kid"])
    assert 1.0 <= final["classifier_score_real"] <= 2.0  # 2 classes: ceiling 2
    assert summary["validation_split"] is None  # a folder has no splits
    grid = np.asarray(Image.open(out / "samples" / "epoch_0001.png"))
    assert grid.ndim == 3 and grid.shape[-1] == 3  # colour, one row per class
    config = json.loads((out / "config.json").read_text())
    assert config["image_size"] == 32 and config["source"] == "auto"
    # A flat folder has no classes: a conditional run is refused before
    # any training step, in one line that says what to do.
    colour_folder(tmp_path / "flat", flat=True)
    argv[2] = str(tmp_path / "flat")
    argv[-1] = str(tmp_path / "flat_run")
    capsys.readouterr()
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "has no labels" in err and "subfolder" in err and "\n" not in err
    # Unconditional, a flat folder trains, and without the FID network's
    # weights says why it has no quality figures (with them it is scored by
    # FID: test_fid.py); grey at --channels 1, streamed from its files.
    monkeypatch.setenv("KERAS_TPUGAN_FID_WEIGHTS", str(tmp_path / "none.pt"))
    argv = ["train", "--data", str(tmp_path / "flat"), "--image-size", "16"]
    argv += [*TINY_RUN, "--channels", "1", "--set", "stream=true"]
    assert cli.main([*argv, "--out", str(tmp_path / "grey")]) == 0
    summary = json.loads((tmp_path / "grey" / "summary.json").read_text())
    assert summary["image_shape"] == [16, 16, 1]
    assert summary["data_streamed"] and summary["data_memory_bytes"] == 0
    assert summary["num_examples"] == 48
    assert "no labels" in summary["quality_unavailable"]
    assert "none.pt (KERAS_TPUGAN_FID_WEIGHTS)" in summary["quality_unavailable"]
    assert "fcd" not in summary["final"] and "fid" not in summary["final"]


def test_tune_and_sweep_train_and_score_on_the_users_folder(tmp_path, capsys):
    """Slow (about 20-40 s): a one-trial search and a one-run sweep on a folder
    of two colour classes, each scored on a classifier of those classes."""
    colour_folder(tmp_path / "images")
    data = ["--data", str(tmp_path / "images"), "--image-size", "32"]
    tiny = ["--preset", "smoke", "--set", "width=8", "--set", "latent_dim=8"]
    tiny += ["--set", "num_replicas=1", "--set", "quality_images=32"]
    tune = ["tune", *data, *tiny, "--batch-sizes", "16", "--objective", "fcd"]
    tune += ["--image-budget", "32", "--evaluations", "1"]
    assert cli.main([*tune, "--out", str(tmp_path / "tune")]) == 0
    (row,) = json.loads((tmp_path / "tune" / "results.json").read_text())["trials"]
    assert row["status"] == "ok" and row["images_seen"] == 32
    assert np.isfinite(row["fcd"]) and row["objective"] == row["fcd"]
    sweep = ["sweep", *data, *tiny, "--batch-sizes", "16", "--epochs", "1"]
    assert cli.main([*sweep, "--out", str(tmp_path / "sweep")]) == 0
    (row,) = json.loads((tmp_path / "sweep" / "results.json").read_text())
    assert row["status"] == "ok" and np.isfinite(row["fcd"])
    run = tmp_path / "sweep" / "batch_0016"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["data_source"] == "folder"
    assert summary["image_shape"] == [32, 32, 3]
    # A folder without classes has nothing to measure the FCD with: the
    # search is refused before its first trial, in one line.
    colour_folder(tmp_path / "flat", flat=True)
    capsys.readouterr()
    tune[2] = str(tmp_path / "flat")
    assert cli.main([*tune, "--out", str(tmp_path / "flat_tune")]) == 2
    err = capsys.readouterr().err.strip()
    assert "Expected labelled data" in err and "images_per_sec" in err
    assert "objective='fid'" in err
    assert "\n" not in err
    assert not (tmp_path / "flat_tune").exists()


def test_bad_data_is_one_clear_line_before_training(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    archive = tmp_path / "photos.zip"
    archive.write_bytes(b"PK")
    cases = {
        str(empty): "Received: an empty folder",
        str(archive): "a file. Unpack the archive into a folder",
        "cifar10": "cannot download",  # no network here, no TFDS data
        "no_such_dataset": "cannot download",
    }
    for data, message in cases.items():
        argv = ["train", "--data", data, "--image-size", "32", *TINY_RUN]
        assert cli.main([*argv, "--out", str(tmp_path / "run")]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err, err
    # `--set dataset=` also looks for the data anew (the smoke preset's
    # source is the offline MNIST subset, which holds MNIST only).
    argv = ["train", *TINY_RUN, "--set", "dataset=cifar10", "--out", str(tmp_path)]
    assert cli.main(argv) == 2
    assert "cannot download" in capsys.readouterr().err
    colour_folder(tmp_path / "few", classes=1, per_class=4)
    argv = ["train", "--data", str(tmp_path / "few"), "--image-size", "32", *TINY_RUN]
    assert cli.main([*argv, "--out", str(tmp_path / "run")]) == 2
    assert "batch_size <= the 4 images" in capsys.readouterr().err
    argv = ["train", "--data", str(tmp_path / "few"), *TINY_RUN]  # no --image-size
    assert cli.main([*argv, "--out", str(tmp_path / "run")]) == 2
    assert "(`--image-size 64` at the command line)" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()  # refused before anything is written
    argv = ["train", "--data", str(tmp_path / "few"), "--image-size", "30", *TINY_RUN]
    assert cli.main([*argv, "--set", "batch_size=4", "--out", str(tmp_path)]) == 2
    assert "side is 7 or 4 times a power of two" in capsys.readouterr().err


RESUMABLE = ["--preset", "smoke", "--set", "quality_every=0", "--set", "width=8"]
RESUMABLE += ["--set", "latent_dim=8", "--set", "ema_decay=0.9", "--quiet"]
RESUMABLE += ["--set", "batch_size=256", "--set", "validation_split=none"]


def _final_state(run_dir):
    """Every weight of the run's last whole-GAN snapshot, and its optimizers'."""
    from keras_tpugan.runs.sample import latest_model

    gan = keras.saving.load_model(latest_model(str(run_dir)), safe_mode=True)
    variables = gan.weights + gan.generator_optimizer.variables
    variables += gan.discriminator_optimizer.variables
    return [np.asarray(keras.ops.convert_to_numpy(v)) for v in variables]


def _assert_same_state(a, b):
    state_a, state_b = _final_state(a), _final_state(b)
    assert len(state_a) == len(state_b) > 10
    for x, y in zip(state_a, state_b, strict=True):
        np.testing.assert_allclose(x, y, atol=1e-5, rtol=0)


def test_a_time_budget_stops_after_an_epoch_and_resume_finishes_exactly(
    tmp_path, capsys, caplog
):
    """Slow (about 25-50 s): three small runs of three epochs (one whole, one
    stopped by its budget, then resumed), each on two of this process's
    logical CPU devices: exact resume under a multi-replica strategy (the
    SIGKILL test below resumes on one device, as a user's CPU has). Two
    replicas, not all four: the backup holds the one all-reduced state
    either way, and TensorFlow traces the step once per replica (this test
    took 45.7 s on four, 31.9 s on two)."""
    argv = ["train", *RESUMABLE, "--set", "num_replicas=2", "--set", "epochs=3"]
    argv += ["--snapshot-every", "1"]
    assert cli.main([*argv, "--out", str(tmp_path / "whole")]) == 0
    run = tmp_path / "run"
    assert cli.main([*argv, "--time-budget", "0.001", "--out", str(run)]) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["stopped_by_time_budget"] is True and summary["replicas"] == 2
    assert summary["epochs_completed"] == 1
    assert capsys.readouterr().out.endswith(
        "keras-tpugan: stopped by --time-budget after epoch 1 of 3; to continue, "
        "run the same command with --resume\n"
    )
    assert (run / "backup").is_dir()  # kept, to resume from
    assert sorted(os.listdir(run / "snapshots")) == ["gan_epoch_0001.keras"]
    # Without --resume, an unfinished run is not overwritten.
    capsys.readouterr()
    assert cli.main([*argv, "--out", str(run)]) == 2
    assert "holds an unfinished run" in capsys.readouterr().err
    # With other settings, it is not resumed.
    assert cli.main([*argv, "--set", "seed=1", "--resume", "--out", str(run)]) == 2
    assert "seed=0 -> 1" in capsys.readouterr().err
    # A run started before a setting existed (here `split`) resumes: the
    # setting had its default then.
    saved = json.loads((run / "config.json").read_text())
    assert saved.pop("split") == "train"
    (run / "config.json").write_text(json.dumps(saved))
    assert cli.main([*argv, "--resume", "--out", str(run)]) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["resumed_at_epoch"] == 1 and not summary["stopped_by_time_budget"]
    assert summary["epochs_completed"] == 3
    assert "--time-budget" not in capsys.readouterr().out
    assert not (run / "backup").exists()  # finished: removed
    assert len(os.listdir(run / "snapshots")) == 3
    _assert_same_state(run, tmp_path / "whole")
    # A finished run is never overwritten, nor resumed to the epochs it has.
    capsys.readouterr()
    before = (run / "summary.json").read_text()
    assert cli.main([*argv, "--out", str(run)]) == 2
    assert "holds a finished run of 3 epochs" in capsys.readouterr().err
    assert cli.main([*argv, "--resume", "--out", str(run)]) == 2
    assert "Expected more epochs than the 3" in capsys.readouterr().err
    assert (run / "summary.json").read_text() == before
    # With two more epochs, a finished run trains on from its last snapshot to
    # the state of a run that had them from the start.
    extended = tmp_path / "extended"
    assert cli.main([*argv, "--epochs", "1", "--out", str(extended)]) == 0
    assert cli.main([*argv, "--resume", "--out", str(extended)]) == 0
    summary = json.loads((extended / "summary.json").read_text())
    assert summary["resumed_at_epoch"] == 1 and summary["epochs_completed"] == 3
    assert "training the finished run" in caplog.text
    _assert_same_state(extended, tmp_path / "whole")
    history = (extended / "history.csv").read_text().splitlines()
    assert [row.split(",")[0] for row in history[1:]] == ["1", "2", "3"]
    assert json.loads((extended / "config.json").read_text())["epochs"] == 3
    # Fewer epochs than it has, or a folder with no run, has nothing to resume.
    assert cli.main([*argv, "--epochs", "2", "--resume", "--out", str(run)]) == 2
    assert "Expected more epochs than the 3" in capsys.readouterr().err
    assert cli.main([*argv, "--resume", "--out", str(tmp_path / "none")]) == 2
    assert "holds no run" in capsys.readouterr().err
    # TensorBoard events, and `sample --model RUN` reads the last snapshot.
    assert list((run / "tensorboard").rglob("*tfevents*"))
    grid = tmp_path / "grid.png"
    assert (
        cli.main(["sample", "--model", str(run), "--num", "4", "--out", str(grid)]) == 0
    )
    assert grid.exists()


def test_a_damaged_backup_is_named_and_the_run_goes_on_from_a_named_snapshot(
    tmp_path, capsys
):
    """Slow (about 15-25 s): three small runs (one whole; one stopped by its
    time budget after epoch 1 of 3, whose backup is then torn; the same run
    resumed from its snapshot with --resume-from)."""
    argv = ["train", *RESUMABLE, "--set", "epochs=3", "--snapshot-every", "1"]
    argv += ["--set", "num_replicas=1"]
    assert cli.main([*argv, "--out", str(tmp_path / "whole")]) == 0
    run = tmp_path / "run"
    assert cli.main([*argv, "--time-budget", "0.001", "--out", str(run)]) == 0
    (record,) = (run / "backup").glob("epoch_*/state.json")
    record.write_text('{"epoch')
    capsys.readouterr()
    assert cli.main([*argv, "--resume", "--out", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("keras-tpugan: error: Expected a whole backup in ")
    assert "JSONDecodeError" in err and "\n" not in err
    assert "--resume-from snapshots/gan_epoch_0001.keras" in err
    assert "another folder" in err
    # A name that is not one of the run's snapshots is refused.
    assert cli.main([*argv, "--resume-from", "gan.keras", "--out", str(run)]) == 2
    assert "Received: resume_from='gan.keras', no such file" in capsys.readouterr().err
    resume_from = ["--resume-from", "snapshots/gan_epoch_0001.keras"]
    assert cli.main([*argv, *resume_from, "--out", str(run)]) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["resumed_at_epoch"] == 1 and summary["epochs_completed"] == 3
    assert (run / "backup_set_aside" / record.parent.name).is_dir()  # kept
    _assert_same_state(run, tmp_path / "whole")


def test_a_run_killed_with_sigkill_resumes_to_the_weights_of_an_uninterrupted_one(
    tmp_path,
):
    """Slow (about 25-60 s): three command-line processes (one whole run, one
    killed in the middle of its third epoch or later, one resuming it), two at
    a time. (Resumes from an epoch's end: the time-budget, full-disk and
    damaged-backup tests here.)"""
    command = [sys.executable, "-m", "keras_tpugan.cli", "train", *RESUMABLE]
    command += ["--set", "epochs=4", "--snapshot-every", "0"]
    # A backup (every minute's millionth) after every batch, to kill after
    # one from the middle of an epoch.
    command += ["--set", "backup_minutes=1e-6"]
    wanted = "epoch_00000[2-9]_batch_*"
    env = subprocess_env(TF_CPP_MIN_LOG_LEVEL="3")  # one device each, as a user's

    def start(out, *extra):
        return subprocess.Popen(
            [*command, *extra, "--out", str(out)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    whole = start(tmp_path / "whole")
    killed = start(tmp_path / "run")
    backup = tmp_path / "run" / "backup"
    deadline = time.monotonic() + 300
    while killed.poll() is None and time.monotonic() < deadline:
        if list(backup.glob(f"{wanted}/state.json")):  # epoch 2 or later
            break
        time.sleep(0.02)
    killed.send_signal(signal.SIGKILL)
    assert killed.wait(60) == -signal.SIGKILL, killed.stderr.read()[-3000:]
    assert not (tmp_path / "run" / "summary.json").exists()  # it did not finish
    left = timed_backup.TimedBackup(backup, minutes=0)
    assert left.restore_epoch() >= 2 and left.restored_batch > 0
    resumed = start(tmp_path / "run", "--resume")
    for process in (whole, resumed):
        _, stderr = process.communicate(timeout=600)
        assert process.returncode == 0, stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["resumed_at_epoch"] >= 2
    assert summary["resumed_at_batch"] == left.restored_batch
    _assert_same_state(tmp_path / "run", tmp_path / "whole")
    # Every epoch's row once: none lost before the backup that counts it,
    # none written twice by the epochs trained again after the kill.
    for out in ("run", "whole"):
        history = (tmp_path / out / "history.csv").read_text().splitlines()
        assert [row.split(",")[0] for row in history[1:]] == ["1", "2", "3", "4"]
    # The resumed epoch's row holds the whole epoch's means (those of the
    # batches before the kill from the backup's record), as without a kill.
    assert_same_epoch_means(tmp_path / "run", tmp_path / "whole")


def test_a_full_disk_is_one_line_and_the_last_backup_resumes_elsewhere(
    tmp_path, capsys, monkeypatch
):
    """Slow (about 15-25 s): a whole run; the same run whose backup's write
    after epoch 2 finds the disk full; the run folder copied elsewhere and
    resumed there."""
    import errno
    import shutil

    argv = ["train", *RESUMABLE, "--set", "epochs=3", "--snapshot-every", "0"]
    argv += ["--set", "num_replicas=1", "--set", "backup_minutes=0"]
    assert cli.main([*argv, "--out", str(tmp_path / "whole")]) == 0
    dump = json.dump

    def full_at_epoch_2(payload, f, **kwargs):  # the backup's record of epoch 2
        if isinstance(payload, dict) and payload.keys() == {"epoch", "batch", "sha256"}:
            if payload["epoch"] == 2:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), f.name)
        dump(payload, f, **kwargs)

    monkeypatch.setattr(backup_files.json, "dump", full_at_epoch_2)
    run = tmp_path / "run"
    capsys.readouterr()
    assert cli.main([*argv, "--out", str(run)]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("keras-tpugan: error: could not write ")
    assert "state.json': No space left on device (" in err and "MiB free there)" in err
    assert f"The traceback is in {run / 'error.log'}." in err
    assert "Traceback" in (run / "error.log").read_text()
    monkeypatch.setattr(backup_files.json, "dump", dump)
    left = timed_backup.TimedBackup(run / "backup", 0).backups()
    assert [(epoch, batch) for epoch, batch, _ in left] == [(1, 0)]
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(run, elsewhere)
    assert cli.main([*argv, "--resume", "--out", str(elsewhere)]) == 0
    summary = json.loads((elsewhere / "summary.json").read_text())
    assert summary["resumed_at_epoch"] == 1 and summary["epochs_completed"] == 3
    _assert_same_state(elsewhere, tmp_path / "whole")


def test_a_lost_process_ends_the_command_in_one_line(tmp_path, capsys, monkeypatch):
    """A run whose peer process is gone ends at once with status 1: one
    line naming it, the traceback in error.log, no exit handler run."""
    from keras_tpugan.distribute import lost

    def lost_peer(args):
        raise RuntimeError(
            "Collective ops is aborted by: The following tasks are unhealthy "
            "(stopped sending heartbeats):\n/job:worker/replica:0/task:1"
        )

    def exit_now(status):
        raise SystemExit(status)

    monkeypatch.setitem(cli._COMMANDS, "train", lost_peer)
    monkeypatch.setattr(lost.os, "_exit", exit_now)
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["a:1", "b:2"]}}')
    with pytest.raises(SystemExit) as exited:
        cli.main(["train", "--preset", "smoke", "--out", str(tmp_path)])
    assert exited.value.code == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(
        "keras-tpugan: error: lost process 1 of 2: it stopped answering, and the "
        "run cannot go on without it. Start every process again with --resume"
    )
    assert line.endswith(f"The traceback is in {tmp_path / 'error.log'}.")
    assert "stopped sending heartbeats" in (tmp_path / "error.log").read_text()
