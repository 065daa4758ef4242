import csv
import os
import subprocess
import sys

import pytest

from keras_tpugan import peers

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "peers.py")
THREE = ["tutorial + XLA", "keras-io", "keras_tpugan float32 + XLA, 8 steps/execution"]


def test_peers_measures_every_mode_with_ratios_to_the_best_peers():
    lines = []
    rows = peers.peers_table(
        batch_sizes=(8,), steps=8, rounds=2, width=8, modes=THREE, printer=lines.append
    )
    assert [r["mode"] for r in rows] == THREE
    rates = {r["mode"]: r["images_per_sec"] for r in rows}
    assert all(rate > 0 for rate in rates.values())
    for r in rows:  # the ratios are those of the measured rates
        assert r["vs_best_tutorial"] == pytest.approx(
            r["images_per_sec"] / rates["tutorial + XLA"], abs=0.01
        )
        assert r["vs_best_keras_io"] == pytest.approx(
            r["images_per_sec"] / rates["keras-io"], abs=0.01
        )
    assert "| 8 | keras-io |" in "\n".join(lines)


def test_peers_refuses_unknown_modes():
    with pytest.raises(ValueError, match=r"Expected modes among .*\['tutorial2'\]"):
        peers.peers_table(batch_sizes=(8,), modes=["tutorial2"], printer=None)


def test_bench_peers_from_the_script_writes_the_csv(tmp_path):
    out = tmp_path / "peers.csv"
    args = ["--batch-sizes", "8", "--steps", "8", "--repeats", "1", "--width", "8"]
    result = subprocess.run(
        [sys.executable, SCRIPT, *args, "--csv", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "vs best keras-io" in result.stdout
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert [r["mode"] for r in rows] == [m[0] for m in peers.MODES]


def test_bench_peers_on_jax_is_one_clear_line():
    result = subprocess.run(
        [sys.executable, SCRIPT, "--backend", "jax", "--batch-sizes", "8"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 2
    assert "Expected the TensorFlow backend" in result.stderr
