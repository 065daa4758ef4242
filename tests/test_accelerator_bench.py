"""The accelerator benchmark (JAX), checked on the CPU in its smoke settings."""

import csv

import keras
import pytest

from keras_tpugan import accelerator_bench, cli

pytestmark = [pytest.mark.both_backends, pytest.mark.jax_only]


def test_known_chips_have_their_bf16_peak_and_others_none():
    assert accelerator_bench.chip_peak_tflops("NVIDIA H200") == 989.0
    assert accelerator_bench.chip_peak_tflops("NVIDIA H100 PCIe") == 756.0
    assert accelerator_bench.chip_peak_tflops("NVIDIA H100 80GB HBM3") == 989.0
    assert accelerator_bench.chip_peak_tflops("TPU v5 lite") == 197.0
    assert accelerator_bench.chip_peak_tflops("TPU v4") == 275.0
    assert accelerator_bench.chip_peak_tflops("cpu") is None


def test_a_cell_measures_images_per_second_and_utilisation():
    """Slow (about 20-50 s): it compiles the 64x64 RGB GAN's step with XLA."""
    strategy = keras.distribution.DataParallel(devices=["cpu:0"])
    peaks = {"chip": None, "matmul": 1e12}
    row = accelerator_bench._cell(
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
    assert parts == {"throughput", "steps_per_execution", "study", "input"}
    skipped = [r for r in rows if r["part"] != "input"]
    assert all(r["note"] == "skipped: time budget" for r in skipped)
    # 2 models x 1 precision x 1 batch, 2 settings, 1 study batch.
    assert len(skipped) == 2 + 2 + 1
    # The input path is measured whatever the budget: it takes no time.
    inputs = [r for r in rows if r["part"] == "input"]
    assert len(inputs) == 2 and all(float(r["images_per_sec"]) > 0 for r in inputs)
    table = (tmp_path / "accelerator.md").read_text()
    assert "measured bf16 matmul" in table and table.count("skipped") == 5
    assert "wrote" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["bench", "--smoke", "--accelerator", "--backend"])
    assert cli.main(["bench", "--smoke"]) == 2  # --smoke needs --accelerator
