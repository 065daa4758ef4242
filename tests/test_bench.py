import csv
import importlib.util
import json
import mmap
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
from PIL import Image

import keras_tpugan as ktg
from keras_tpugan.bench import throughput as bench
from keras_tpugan.cli import main as cli

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "throughput.py")
TINY = [
    "--batch-sizes",
    "8",
    "--steps",
    "1",
    "--repeats",
    "1",
    "--width",
    "8",
    "--latent-dim",
    "8",
]


@pytest.mark.parametrize(
    "matrix",
    [
        # The whole default matrix (`make test-full`): 8 cells.
        pytest.param(
            (["1", "2"], ["float32", "mixed_bfloat16"]), marks=pytest.mark.full
        ),
        # Its small version: XLA on and off, bfloat16 on 2 replicas (float32
        # with XLA on 1 replica: test_bench_measures_both_backends_side_by_side).
        (["2"], ["mixed_bfloat16"]),
    ],
    ids=["full", "small"],
)
def test_bench_prints_and_saves_the_matrix(matrix, tmp_path, capsys):
    """Slow in full (about 45-65 s): eight cells (replicas x precision x XLA),
    each building and compiling its GAN; the small version runs two."""
    replicas, precisions = matrix
    out = tmp_path / "bench.csv"
    argv = ["bench", *TINY, "--replicas", *replicas, "--precisions", *precisions]
    assert cli.main([*argv, "--csv", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| mixed_bfloat16 | on | 2 | 8 |" in printed and "GFLOP/s" in printed
    assert "| mixed_bfloat16 | off | 2 | 8 |" in printed
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(replicas) * len(precisions) * 2  # x XLA on, off
    assert {r["replicas"] for r in rows} == set(replicas)
    assert {r["precision"] for r in rows} == set(precisions)
    assert {r["xla"] for r in rows} == {"True", "False"}
    assert all(float(r["images_per_sec"]) > 0 for r in rows)
    assert all(0 < float(r["fraction_of_matmul"]) for r in rows)
    # Peak memory per cell: the host's resident set; no device on a CPU.
    assert all(float(r["peak_host_mib"]) > 100 for r in rows)
    assert {r["peak_device_mib"] for r in rows} == {""}
    assert "peak host MiB" in printed


def test_peak_memory_sees_an_allocation_after_a_reset():
    bench.reset_peak_memory()
    before, _ = bench.peak_memory_mib()
    # 64 MiB of its own mapping, every page touched; closed, it is unmapped
    # at once. (With a numpy array of that size, the peak once read no lower
    # after `del` and a reset, in a worker that had run other test files.)
    block = mmap.mmap(-1, 64 * 2**20)
    for offset in range(0, len(block), mmap.PAGESIZE):
        block[offset] = 1
    after, device = bench.peak_memory_mib()
    block.close()
    assert after - before >= 60 and device is None
    bench.reset_peak_memory()
    assert bench.peak_memory_mib()[0] < after


def test_bench_records_a_batch_that_does_not_split(capsys):
    rows = bench.throughput_matrix(
        batch_sizes=[6],
        replicas=[4],
        precisions=["float32"],
        xla=[False],
        steps=1,
        repeats=1,
        width=8,
        latent_dim=8,
    )
    assert rows[0]["images_per_sec"] is None
    assert "divisible by the 4 replica" in capsys.readouterr().out


def test_benchmark_script_help():
    result = subprocess.run(
        [sys.executable, SCRIPT, "--help"], capture_output=True, text=True, check=True
    )
    assert "keras-tpugan bench --batch-sizes" in result.stdout


def test_forward_flops_of_a_dense_layer():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(5)])
    assert bench.forward_flops(model) == 2 * 3 * 5


def test_bench_measures_both_backends_side_by_side(tmp_path, capsys):
    """Slow (about 40-80 s): one benchmark process per backend, each importing it
    and compiling its step."""
    out = tmp_path / "both.csv"
    argv = ["bench", *TINY, "--precisions", "float32", "--xla", "on"]
    argv += ["--backend", "tensorflow", "jax", "--csv", str(out)]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "vs tensorflow" in printed
    assert "| jax | float32 | on | 1 | 8 |" in printed
    assert "| tensorflow | float32 | on | 1 | 8 |" in printed
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert [r["backend"] for r in rows] == ["tensorflow", "jax"]
    assert all(float(r["images_per_sec"]) > 0 for r in rows)


def _benchmark_script(name):
    """The module of `benchmarks/NAME.py` (a script, not a package)."""
    spec = importlib.util.spec_from_file_location(
        f"{name}_benchmark",
        os.path.join(os.path.dirname(__file__), "..", "benchmarks", f"{name}.py"),
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_jit_compile_script_times_every_setting_against_xla_off(capsys):
    """A user's WGAN-GP under "auto", False and True (benchmarks/jit_compile.py).

    Slow (about 15-40 s): three GANs, each traced (one compiled with XLA),
    then fitted in three rounds."""
    script = _benchmark_script("jit_compile")
    argv = ["--batch-size", "4", "--steps", "1", "--rounds", "1", "--width", "4"]
    assert script.main(argv) == 0
    printed = capsys.readouterr().out
    assert "| jit_compile | XLA | s/step | vs False |" in printed
    rows = [
        line.strip("| ").split(" | ")
        for line in printed.splitlines()
        if line.startswith("| '") or line.startswith("| F") or line.startswith("| T")
    ]
    # "auto" as Keras decides it: XLA off on this CPU-only machine.
    assert [r[:2] for r in rows] == [
        ["'auto'", "off"],
        ["False", "off"],
        ["True", "on"],
    ]
    seconds = [float(r[2]) for r in rows]
    assert all(s > 0 for s in seconds) and rows[1][3] == "1.00"
    for row, s in zip(rows, seconds, strict=True):  # the ratio to XLA off
        assert float(row[3]) == pytest.approx(
            s / seconds[1], abs=0.02 * s / seconds[1] + 0.01
        )


def test_painted_digits_keep_their_digit_and_contrast():
    script = _benchmark_script("rgb_digits")
    digits, _ = ktg.data.offline_mnist("test")
    painted = script.paint_digits(digits[:300], seed=0)
    assert painted.shape == (300, 32, 32, 3) and painted.dtype == np.uint8
    np.testing.assert_array_equal(painted, script.paint_digits(digits[:300], seed=0))
    assert not np.array_equal(painted, script.paint_digits(digits[:300], seed=1))
    ink = np.pad(digits[:300, ..., 0], ((0, 0), (2, 2), (2, 2)))
    image = painted.astype("float64") / 255.0
    for i in range(300):
        background = image[i][ink[i] == 0]
        # One background colour (the 2-pixel border included), one ink.
        assert np.ptp(background, axis=0).max() < 1e-9
        darkest = ink[i].max()  # full ink (255 in most digits)
        stroke = image[i][ink[i] == darkest]
        assert np.ptp(stroke, axis=0).max() < 1e-9
        contrast = abs(stroke.mean() - background.mean())
        assert contrast >= script.MIN_CONTRAST * darkest / 255 - 0.01
    with pytest.raises(ValueError, match=r"\(n, 28, 28, 1\). Received: shape"):
        script.paint_digits(painted)


def test_rgb_digits_trains_on_its_folder_and_prints_its_table(tmp_path, capsys):
    """Slow (about 15-45 s): writes 200 PNGs, trains a metric classifier on
    them, then the smoke run."""
    script = _benchmark_script("rgb_digits")
    # (On one device, as on a user's CPU: "auto" would take this process's 4.)
    argv = ["--smoke", "--set", "num_replicas=1", "--out", str(tmp_path)]
    assert script.main(argv) == 0
    printed = capsys.readouterr().out
    assert "keras-tpugan train --data" in printed and "--image-size 32" in printed
    for name in ("FD (own classifier)", "classifier score", "precision", "recall"):
        assert f"| {name} |" in printed
    # The standard FID beside them: 16 generated against 16 painted digits.
    row = printed.split("| FID, standard network (16 vs 16 images) | ")[1]
    assert float(row.split(" |")[0]) > 0
    assert sorted(os.listdir(tmp_path / "data")) == [str(d) for d in range(10)]
    assert len(list((tmp_path / "data").rglob("*.png"))) == 200
    with open(tmp_path / "run" / "summary.json") as f:
        summary = json.load(f)
    assert summary["data_source"] == "folder" and summary["image_shape"] == [32, 32, 3]
    assert summary["quality_unavailable"] is None
    last = summary["quality_schedule"][-1]
    assert 0.0 <= last["precision"] <= 1.0 and 0.0 <= last["recall"] <= 1.0
    grid = np.asarray(Image.open(tmp_path / "run" / "samples" / "epoch_0001.png"))
    assert grid.shape[-1] == 3


def test_settings_flow_counts_entries_into_data_and_distribute(capsys, tmp_path):
    """benchmarks/settings_flow.py: how often a run enters the packages."""
    script = _benchmark_script("settings_flow")
    out = str(tmp_path / "run")
    argv = ["--args", "train", "--preset", "smoke", "--set", "epochs=1"]
    script.main([*argv, "--set", "quality_every=0", "--set", "width=8", "--out", out])
    printed = capsys.readouterr().out
    rows = {
        line.split()[0]: [int(n) for n in line.split()[1:4]]
        for line in printed.splitlines()
        if line.split() and line.split()[0] in script.PACKAGES
    }
    assert set(rows) == {"data", "distribute", "image_files"}
    setup, run, whole = rows["distribute"]
    assert 0 < run <= setup <= whole
    # The settings' way down enters `distribute` once (the placement is
    # chosen) and `data` twice (the config's ImageSource, then the run's
    # data loaded in one call); the folder reader not at all.
    assert run == 1 and rows["data"][1] == 2, printed[printed.index("command:") :]
    assert "placement.choose x1," in printed and "training_data.load x1," in printed
    assert "sharding.fitting x1," in printed  # a context manager counts once
    assert rows["image_files"] == [0, 0, 0]
