import csv
import os
import subprocess
import sys

import keras
import pytest

from keras_tpugan.bench import peers, step_profile, tables
from keras_tpugan.cli import main as cli

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "peers.py")


def test_peers_refuses_unknown_modes():
    with pytest.raises(ValueError, match=r"Expected modes among .*\['tutorial2'\]"):
        peers.peers_table(batch_sizes=(8,), modes=["tutorial2"], printer=None)


def _check_ratios(rows):
    rates = {r["mode"]: float(r["images_per_sec"]) for r in rows}
    assert all(rate > 0 for rate in rates.values())
    for r in rows:  # the ratios are those of the measured rates
        assert float(r["vs_best_tutorial"]) == pytest.approx(
            rates[r["mode"]] / max(rates[m] for m in rates if m.startswith("tutorial")),
            abs=0.01,
        )
        assert float(r["vs_best_keras_io"]) == pytest.approx(
            rates[r["mode"]] / max(rates[m] for m in rates if m.startswith("keras-io")),
            abs=0.01,
        )


@pytest.mark.full
def test_bench_peers_from_the_script_measures_every_mode_with_ratios(tmp_path):
    """Slow (about 50-65 s): a new process times every peer program, each traced
    or compiled on its own (`make test-full`; the small version below)."""
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
    assert "| 8 | keras-io |" in result.stdout
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert [r["mode"] for r in rows] == peers.backend_modes()
    _check_ratios(rows)


def test_bench_peers_measures_each_kind_of_peer_program_with_ratios(tmp_path, capsys):
    """The small version of the script's table, in this process: the keras-io
    pattern (TensorFlow only) with and without XLA, the tutorial's loop
    without it (with it: the test below), and the GAN with several steps per
    execution."""
    out = tmp_path / "peers.csv"
    modes = ["tutorial", "keras-io", "keras-io + XLA"]
    modes += ["keras_tpugan float32 + XLA, 8 steps/execution"]
    rows = peers.peers_table(
        batch_sizes=(8,), steps=8, rounds=1, width=8, modes=modes, csv_path=str(out)
    )
    assert [r["mode"] for r in rows] == modes
    printed = capsys.readouterr().out
    assert "vs best keras-io" in printed and "| 8 | keras-io |" in printed
    with open(out) as f:
        assert [r["mode"] for r in csv.DictReader(f)] == modes
    _check_ratios(rows)


@pytest.mark.both_backends
def test_peers_on_the_backend_in_use_times_the_tutorial_step_and_gan():
    modes = ["tutorial + XLA", "keras_tpugan simultaneous float32 + XLA"]
    rows = peers.peers_table(
        batch_sizes=(8,), steps=4, rounds=1, width=8, modes=modes, printer=None
    )
    assert [r["mode"] for r in rows] == modes
    assert all(r["images_per_sec"] > 0 for r in rows)
    assert rows[0]["vs_best_tutorial"] == 1.0


@pytest.mark.both_backends
def test_backend_modes_leave_the_tensorflow_programs_out_on_jax():
    names = peers.backend_modes()
    if keras.backend.backend() == "jax":
        assert "keras-io" not in names and "keras-io + XLA" not in names
        assert "keras_tpugan float32" not in names  # no XLA: TF only
        assert "tutorial + XLA" in names
        with pytest.raises(ValueError, match=r"unknown modes \['keras-io'\]"):
            peers.peers_table(batch_sizes=(8,), modes=["keras-io"], printer=None)
    else:
        assert names == [m[0] for m in peers.MODES]


@pytest.mark.both_backends
def test_profile_lists_kernel_time_by_op_type_with_convolutions_on_top():
    rows = step_profile.profile_modes(
        batch_sizes=(8,), modes=["tutorial + XLA"], steps=2, width=8, printer=None
    )
    (row,) = rows
    assert row["mode"] == "tutorial + XLA" and row["batch_size"] == 8
    assert row["wall_ms"] > 0 and row["kernel_ms"] > 0
    assert 0 < row["matrix_share"] <= 1
    ops = [part.rsplit(" ", 1) for part in row["top_ops"].split("; ")]
    assert len(ops) == 5 and all(float(ms) >= 0 for _, ms in ops)
    lines = tables.profile_table(rows)
    assert "| 8 | tutorial + XLA |" in "\n".join(lines)


def test_profile_refuses_unknown_modes_and_needs_peers_on_the_command_line():
    with pytest.raises(ValueError, match=r"unknown modes \['nope'\]"):
        step_profile.profile_modes(modes=["nope"], printer=None)
    with pytest.raises(ValueError, match="Expected steps >= 1"):
        step_profile.profile_modes(modes=["keras-io"], steps=0, printer=None)
    assert cli.main(["bench", "--profile"]) == 2
