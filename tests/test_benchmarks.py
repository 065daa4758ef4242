import csv
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))

import throughput  # noqa: E402


def test_throughput_script_prints_and_saves_the_table(tmp_path, capsys):
    out = tmp_path / "bench.csv"
    args = [
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
    assert throughput.main([*args, "--csv", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| mixed_bfloat16 | on | 8 |" in printed and "GFLOP/s" in printed
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4  # precision x XLA
    assert all(float(r["images_per_sec"]) > 0 for r in rows)
    assert all(0 < float(r["fraction_of_matmul"]) for r in rows)


def test_forward_flops_of_a_dense_layer():
    import keras

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(5)])
    assert throughput.forward_flops(model) == 2 * 3 * 5
