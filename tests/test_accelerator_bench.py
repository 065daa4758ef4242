"""The accelerator benchmark (JAX), checked on the CPU in its smoke settings."""

import csv
import gzip
import importlib.util
import json
import os
import time

import keras
import numpy as np
import pytest

from keras_tpugan.bench import accelerator as accelerator_bench
from keras_tpugan.bench import accelerator_cells, chips, tables
from keras_tpugan.bench import throughput as bench
from keras_tpugan.cli import main as cli

pytestmark = [pytest.mark.both_backends, pytest.mark.jax_only]


def test_known_chips_have_their_bf16_peak_and_others_none():
    assert chips.chip_peak_tflops("NVIDIA H200") == 989.0
    assert chips.chip_peak_tflops("NVIDIA H100 PCIe") == 756.0
    assert chips.chip_peak_tflops("NVIDIA H100 80GB HBM3") == 989.0
    assert chips.chip_peak_tflops("TPU v5 lite") == 197.0
    assert chips.chip_peak_tflops("TPU v4") == 275.0
    assert chips.chip_peak_tflops("cpu") is None


def test_a_cell_measures_images_per_second_and_utilisation():
    """Slow (about 20-50 s): it compiles the 64x64 RGB GAN's step with XLA."""
    strategy = keras.distribution.DataParallel(devices=["cpu:0"])
    peaks = {"chip": None, "matmul": 1e12}
    row = accelerator_cells.measure_cell(
        "throughput", "dcgan-64x64x3", "float32", 8, strategy, True, peaks
    )
    keras.mixed_precision.set_global_policy("float32")
    assert row["images_per_sec"] > 0 and row["model"] == "dcgan-64x64x3"
    assert row["mfu_vs_chip_peak"] is None
    # Utilisation is the counted FLOP/s over the peak given.
    assert row["mfu_vs_matmul"] == pytest.approx(row["tflops_per_sec"], rel=1e-2)


def test_out_of_budget_cells_are_listed_as_skipped_in_both_files(tmp_path, capsys):
    argv = ["bench", "--accelerator", "--smoke", "--budget-seconds", "0"]
    assert cli.main([*argv, "--out", str(tmp_path)]) == 0
    rows = list(csv.DictReader((tmp_path / "accelerator.csv").open()))
    parts = {r["part"] for r in rows}
    assert parts == {"throughput", "steps_per_execution", "study", "fid", "input"}
    skipped = [r for r in rows if r["part"] != "input"]
    assert all(r["note"] == "skipped: time budget" for r in skipped)
    # 2 models x 1 precision x 1 batch, 2 settings, 1 study batch, 1 FID batch.
    assert len(skipped) == 2 + 2 + 1 + 1
    # The input path is measured whatever the budget: it takes no time.
    inputs = [r for r in rows if r["part"] == "input"]
    assert len(inputs) == 2 and all(float(r["images_per_sec"]) > 0 for r in inputs)
    table = (tmp_path / "accelerator.md").read_text()
    assert "measured bf16 matmul" in table and table.count("skipped") == 6
    assert "wrote" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["bench", "--smoke", "--accelerator", "--backend"])
    assert cli.main(["bench", "--smoke"]) == 2  # --smoke needs --accelerator


def test_each_part_stops_at_the_end_of_its_share_of_the_budget(tmp_path, monkeypatch):
    deadlines = {}

    def part(name):
        def record(*args):
            deadlines[name] = args[-2] if name not in ("study", "fid") else args[-1]
            return iter(())

        return record

    monkeypatch.setattr(accelerator_bench, "_throughput", part("throughput"))
    monkeypatch.setattr(
        accelerator_bench, "_steps_per_execution", part("steps_per_execution")
    )
    monkeypatch.setattr(accelerator_bench, "_study", part("study"))
    monkeypatch.setattr(accelerator_bench, "_fid", part("fid"))
    before = time.perf_counter()
    accelerator_bench.run_benchmark(
        str(tmp_path), smoke=True, budget_seconds=100.0, printer=lambda line: None
    )
    # Cumulative shares: what a part leaves unused goes to the next one.
    shares = dict(accelerator_bench.BUDGET_SHARES)
    assert sum(shares.values()) == pytest.approx(1.0)
    ends = {
        "throughput": shares["throughput"],
        "steps_per_execution": shares["throughput"] + shares["steps_per_execution"],
    }
    ends["study"] = ends["steps_per_execution"] + shares["study"]
    ends["fid"] = ends["study"] + shares["fid"]
    for name, end in ends.items():
        # The run started between `before` and the matmul that precedes the parts.
        assert before + 100 * end <= deadlines[name] <= time.perf_counter() + 100 * end


def test_the_fid_part_times_the_fid_network_with_stand_in_weights():
    """Slow (about 10 s): it compiles the FID network on the CPU."""
    rows = list(accelerator_bench._fid(smoke=True, deadline=float("inf")))
    assert len(rows) == 1
    row = rows[0]
    assert row["part"] == "fid" and row["batch_size"] == 4
    assert row["images_per_sec"] > 0 and row["note"].startswith("stand-in weights")
    seconds = 10_000 / row["images_per_sec"]
    assert f"10,000 images {seconds:.0f} s" in row["note"]


class _FakeGAN:
    """Counts the steps `_timed` asks for; each step takes `step_seconds`."""

    def __init__(self, step_seconds, steps_per_execution=1):
        self.step_seconds = step_seconds
        self.steps_per_execution = steps_per_execution
        self.fits = []

    def fit(self, ds, epochs, steps_per_epoch, verbose):
        self.fits.append(steps_per_epoch)
        time.sleep(self.step_seconds * steps_per_epoch)


def test_timed_fits_are_lengthened_to_the_minimum_time_in_whole_calls():
    gan = _FakeGAN(step_seconds=0.002, steps_per_execution=4)
    ds = bench.RepeatedBatch(np.zeros((8, 2, 2, 1), "float32"))
    rate = accelerator_cells.timed_images_per_sec(
        gan, ds, steps=8, repeats=3, min_seconds=0.1
    )
    compile_fits, calibration, timed = gan.fits[:2], gan.fits[2], gan.fits[3:]
    assert compile_fits == [8, 8] and calibration == 8 and len(timed) == 3
    # 8 steps took about 16 ms: about 50 steps last 0.1 s, in calls of 4.
    assert all(steps == timed[0] and steps % 4 == 0 for steps in timed)
    assert 40 <= timed[0] <= 56
    assert rate == pytest.approx(8 / 0.002, rel=0.5)
    # Without a minimum the steps asked for are timed as they are.
    gan = _FakeGAN(step_seconds=0.0)
    accelerator_cells.timed_images_per_sec(gan, ds, steps=5, repeats=2)
    assert gan.fits == [2, 2, 5, 5, 5]


def test_tables_list_rows_by_part_model_precision_and_batch(tmp_path):
    rows = [
        {"part": "throughput", "model": "b", "precision": "float32", "batch_size": 64},
        {"part": "throughput", "model": "a", "precision": "float32", "batch_size": 512},
        {"part": "throughput", "model": "a", "precision": "float32", "batch_size": 64},
        {"part": "study", "model": "a", "precision": "float32", "batch_size": 512},
        {"part": "study", "model": "a", "precision": "float32", "batch_size": 64},
    ]
    rows = [{f: row.get(f) for f in accelerator_bench.FIELDS} for row in rows]
    tables.write_accelerator_results(rows, ["header"], str(tmp_path), lambda line: None)
    lines = (tmp_path / "accelerator.md").read_text().splitlines()
    speed = [line for line in lines if line.startswith("| throughput")]
    assert [line.split(" | ")[1:4:2] for line in speed] == [
        ["a", "64"],
        ["a", "512"],
        ["b", "64"],
    ]
    study = [line.split(" | ")[0] for line in lines if line[:5] in ("| 64 ", "| 512")]
    assert study == ["| 64", "| 512"]
    # The CSV keeps the order the cells ran in.
    with open(tmp_path / "accelerator.csv") as f:
        assert [r["batch_size"] for r in csv.DictReader(f)] == ["64", "512", "64"] + [
            "512",
            "64",
        ]


def _profile_script():
    spec = importlib.util.spec_from_file_location(
        "profile_step_benchmark",
        os.path.join(os.path.dirname(__file__), "..", "benchmarks", "profile_step.py"),
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_the_kernel_table_sums_device_streams_and_leaves_out_the_host(tmp_path):
    def meta(kind, pid, name, tid=None):
        event = {"ph": "M", "name": kind, "pid": pid, "args": {"name": name}}
        return event if tid is None else {**event, "tid": tid}

    def op(pid, tid, name, dur):
        return {"ph": "X", "pid": pid, "tid": tid, "name": name, "dur": dur}

    events = [
        meta("process_name", 1, "/host:CPU"),
        meta("process_name", 2, "/device:GPU:0"),
        meta("thread_name", 2, "Stream #14(Compute)", tid=7),
        meta("thread_name", 2, "Stream #15(MemcpyH2D)", tid=8),
        op(1, 3, "python work", 9_000.0),
        op(2, 7, "conv", 300.0),
        op(2, 7, "conv", 300.0),
        op(2, 7, "transpose", 400.0),
        op(2, 8, "MemcpyH2D", 100.0),
    ]
    trace = tmp_path / "perfetto_trace.json.gz"
    with gzip.open(trace, "wt") as f:
        json.dump({"traceEvents": events}, f)
    lines = _profile_script().kernel_table(str(trace), wall_seconds=0.01, top=1)
    # 1 ms of kernels in a 10 ms wall time; the copy stream comes second.
    assert lines[0] == (
        "/device:GPU:0 / Stream #14(Compute): busy 1.00 ms (10.0% of the wall time) "
        "in 3 events"
    )
    assert lines[1].split() == ["0.600", "ms", "60.0%", "conv"]
    assert lines[2].startswith("/device:GPU:0 / Stream #15(MemcpyH2D): busy 0.10 ms")
    assert len(lines) == 4 and not any("python" in line for line in lines)
    host_only = tmp_path / "host.json.gz"
    with gzip.open(host_only, "wt") as f:
        json.dump({"traceEvents": events[:1] + events[4:5]}, f)
    assert "host only" in _profile_script().kernel_table(str(host_only), 0.01)[0]


def test_the_profile_script_traces_steps_and_reports_them(tmp_path, capsys):
    """Slow (about 10-20 s): it compiles the demo GAN's step."""
    argv = ["--out", str(tmp_path), "--batch-size", "8", "--steps", "2"]
    argv += ["--precision", "float32"]
    _profile_script().main(argv)
    printed = capsys.readouterr().out
    assert "dcgan-28x28x1, float32, batch 8: 2 steps in" in printed
    # A CPU's trace holds host threads only, which the table leaves out.
    assert "(host only)" in printed
    assert list(tmp_path.glob("plugins/profile/*/perfetto_trace.json.gz"))
