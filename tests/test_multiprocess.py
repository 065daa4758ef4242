"""Several processes on localhost: input split, parity with one process, faults.

Every case starts real processes with `keras-tpugan launch` (free ports,
bounded grace periods; the launcher reaps every process it started).
"""

import json
import os
import subprocess
import sys
import time

import keras
import numpy as np
import pytest
from conftest import FULL, one_device_per_process_env

import keras_tpugan as ktg
from keras_tpugan.launch import launcher

pytestmark = pytest.mark.both_backends
BACKEND = keras.backend.backend()

# One launch of two processes checks four things, each process importing
# the backend and starting its strategy once for all four (each its own test
# below):
# 1. each process records the example ids it is fed for two epochs, through
#    the split `GAN.fit` uses: `shard_over_processes` on TensorFlow, the
#    process's rows of each global batch that `EpochBatches` gives on JAX;
# 2. the same settings pass `check_same_settings`, a seed that differs per
#    process is refused;
# 3. every process gets the chief's values from `chief_values`;
# 4. `keras-tpugan train` with a global batch that does not split over the
#    two processes is refused, as a command-line error.
# Then each process exits with status 2 (the settings refused).
PROBE = """
import json, os, sys, tempfile
import keras
import numpy as np
import keras_tpugan as ktg
jax = keras.backend.backend() == "jax"
options = dict(collective="ring", bytes_per_pack=4096, collective_timeout_seconds=90)
options = {} if jax else options
strategy = ktg.distribute.get_strategy("auto", **options)
if not jax:
    chosen = strategy.extended._communication_options
    chosen = (chosen.implementation.name, chosen.bytes_per_pack, chosen.timeout_seconds)
    print("COLLECTIVE", *chosen)
    # Asked again, the process's strategy; with other settings, a refusal.
    print("SAME STRATEGY", ktg.distribute.get_strategy("auto", **options) is strategy)
    try:
        ktg.distribute.get_strategy("auto")
    except ValueError as e:
        print("OTHER SETTINGS REFUSED", "this process already made" in str(e))
ids = np.arange(100, dtype="int32")
ds = ktg.data.load_images(
    (np.zeros((100, 4, 4, 1), "float32"), ids), batch_size=8, labels=True, seed=3
)
steps = {}
for epoch in (0, 1):
    ktg.data.set_epoch(epoch)
    if jax:  # an EpochBatches: each process indexes its own rows
        steps[epoch] = [np.asarray(ds[i][1]).tolist() for i in range(len(ds))]
    else:
        steps[epoch] = [
            np.concatenate(strategy.experimental_local_results(b[1])).tolist()
            for b in ktg.distribute.shard_over_processes(ds, strategy)
        ]
print("IDS", json.dumps({"rank": int(os.environ["KERAS_TPUGAN_RANK"]), "steps": steps}))
if not jax:  # the epochs' iterators, dropped, are deleted on a thread of their own
    thread = ktg.distribute.release_unused_iterators()
    thread.join(60)
    print("ITERATORS LEFT", len(ktg.distribute.iterators._ITERATORS), thread.is_alive())
rank = int(os.environ["KERAS_TPUGAN_RANK"])
ktg.distribute.check_same_settings({"batch_size": 64, "seed": 0}, strategy)
print("same settings on", ktg.distribute.process_count(strategy), "processes")
values = {"kid": 1 / 3 + rank, "fcd": rank + 0.1}  # each process's own
print("CHIEF", json.dumps(ktg.distribute.chief_values(values, strategy)))
try:
    ktg.distribute.check_same_settings({"batch_size": 64, "seed": rank}, strategy)
except ValueError as e:
    print("refused:", e)
from keras_tpugan.cli import main as cli
argv = ["train", "--preset", "smoke", "--set", "batch_size=63"]
if not jax:  # the process's strategy is made once: the same collective settings
    for setting in ("collective=ring", "collective_bytes_per_pack=4096",
                    "collective_timeout_seconds=90"):
        argv += ["--set", setting]
print("CLI STATUS", cli.main([*argv, "--out", tempfile.mkdtemp()]), flush=True)
sys.exit(2)
"""


def _script(tmp_path, text, name="script.py"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _launch(command, processes=2, grace_seconds=30):
    lines = []
    status = launcher.launch(
        command, processes, grace_seconds=grace_seconds, printer=lines.append
    )
    return status, lines


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    """The lines and status of one launch of PROBE on two processes (slow:
    about 10-25 s, each process importing the backend and starting its
    strategy; the first test that asks for it pays)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        one_device_per_process_env(monkeypatch)
        return _launch([_script(tmp_path_factory.mktemp("probe"), PROBE)])


def test_each_example_is_read_by_exactly_one_process(probe):
    status, lines = probe
    assert "] IDS " in "\n".join(lines), "\n".join(lines[-30:])
    read = {}
    for line in lines:
        if "] IDS " in line:
            record = json.loads(line.split("] IDS ", 1)[1])
            read[record["rank"]] = record["steps"]
    assert sorted(read) == [0, 1]
    if BACKEND == "tensorflow":  # the all-reduce the script chose
        chosen = [line.split("] ", 1)[1] for line in lines if "COLLECTIVE" in line]
        assert chosen == ["COLLECTIVE RING 4096 90"] * 2
        asked_again = [
            line.split("] ", 1)[1]
            for line in lines
            if "SAME STRATEGY" in line or "OTHER SETTINGS" in line
        ]
        assert sorted(asked_again) == [
            "OTHER SETTINGS REFUSED True",
            "OTHER SETTINGS REFUSED True",
            "SAME STRATEGY True",
            "SAME STRATEGY True",
        ]
        left = [line.split("] ", 1)[1] for line in lines if "ITERATORS LEFT" in line]
        assert left == ["ITERATORS LEFT 0 False"] * 2
    reference = ktg.data.load_images(
        (np.zeros((100, 4, 4, 1), "float32"), np.arange(100, dtype="int32")),
        batch_size=8,
        labels=True,
        seed=3,
    )
    orders = []
    try:
        for epoch in ("0", "1"):
            ktg.data.set_epoch(int(epoch))
            global_batches = [np.asarray(b[1]).tolist() for b in reference]
            assert len(read[0][epoch]) == len(read[1][epoch]) == 12
            seen = []
            for step, batch in enumerate(global_batches):
                # Process 0 gets the first half of every global batch, 1 the
                # second: the global batch is the one process's.
                assert read[0][epoch][step] + read[1][epoch][step] == batch
                seen += batch
            assert len(seen) == len(set(seen)) == 96  # 100 // 8 batches of 8
            orders.append(seen)
    finally:
        ktg.data.set_epoch(0)
    assert orders[0] != orders[1]  # the order is keyed on the epoch


WORKER = os.path.join(os.path.dirname(__file__), "multiprocess_worker.py")


def _summary(out):
    return json.loads((out / "summary.json").read_text())


def _same_generators(a, b):
    generators = [keras.saving.load_model(o / "generator.keras") for o in (a, b)]
    for x, y in zip(generators[0].weights, generators[1].weights, strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=1e-5)


def test_two_processes_one_killed_and_restarted_end_as_one_process_does(
    tmp_path, one_device_per_process
):
    """Slow (about 40-70 s, the longer while the other worker's tests run
    beside it): three launches (one process; two, of which one kills
    itself; the two again), each process importing the backend and
    compiling its step; the survivor learns of the lost peer from a failed
    collective, or at the latest at the heartbeat time-out (10 s,
    multiprocess_worker.py).

    Two processes must train as one does, and a run killed in its second
    epoch and started again must resume exactly: the restarted two-process
    run ends with the one-process run's weights and logs.
    """
    # One process of a one-process cluster, so that both runs take the same
    # multi-process code path (on TensorFlow: XLA over the gradients alone,
    # not over the whole update) and differ by the process count only.
    one = tmp_path / "one"
    status, one_lines = _launch([WORKER, str(one)], processes=1)
    assert status == 0, "\n".join(one_lines[-40:])
    # Rank 1 SIGKILLs itself in the middle of epoch 1 (of 0, 1: 4 steps
    # each), after its third batch. Rank 0
    # must stop by itself, naming the lost process, well inside the grace
    # period after which the launcher would kill it.
    two = tmp_path / "two"
    status, lines = _launch([WORKER, str(two), "1", "1", "2"], grace_seconds=120)
    ended = time.time()
    text = "\n".join(lines)
    assert status == 1
    killed_at = float(text.split("[rank 1] killed at ", 1)[1].split()[0])
    assert ended - killed_at <= 60, text[-3000:]
    assert (
        lines[-1] == "keras-tpugan launch: failed: rank 1 was killed by SIGKILL first"
    )
    # Rank 0 ends by itself with status 1 (on JAX, not by its backend's
    # abort at exit), its last line naming the lost process.
    assert "rank 0 exited with status 1;" in lines[-2], text[-3000:]
    rank0 = [line for line in lines if line.startswith("[rank 0]")]
    assert rank0[-1].startswith(
        "[rank 0] keras-tpugan: error: lost process 1 of 2: it stopped answering"
    ), text[-3000:]
    assert not any("Check failure stack trace" in line for line in rank0)
    # Both processes backed up in the middle of epoch 1, at the batches the
    # chief planned from epoch 0's pace (every batch, for this backup
    # interval of 60 microseconds).
    assert sorted(os.listdir(two / "backup")) == ["process_0", "process_1"]
    for rank in (0, 1):
        kept = os.listdir(two / "backup" / f"process_{rank}")
        assert any(name.startswith("epoch_000001_batch_") for name in kept), kept
    # Started again on the same run folder (each process's backup in it), it
    # resumes in the middle of epoch 1, at a point both processes hold whole,
    # and ends where one process did.
    status, lines = _launch([WORKER, str(two)])
    assert status == 0, "\n".join(lines[-30:])
    for rank in (0, 1):
        epochs = [line for line in lines if line.startswith(f"[rank {rank}] epoch")]
        assert epochs == [f"[rank {rank}] epoch 1"]
    summaries = [_summary(out) for out in (one, two)]
    assert [s["processes"] for s in summaries] == [1, 2]
    assert [s["replicas"] for s in summaries] == [1, 2]
    assert summaries[1]["batch_size"] == 256 and summaries[1]["epochs"] == 2
    assert summaries[1]["resumed_at_epoch"] == 1
    # Killed after 3 batches of epoch 1: the newest point both hold whole.
    assert summaries[1]["resumed_at_batch"] in (1, 2, 3)
    assert summaries[0]["xla"] and summaries[1]["xla"]
    # On JAX two CPU processes sum each update's gradients as one buffer.
    assert [s["flat_all_reduce"] for s in summaries] == [False, BACKEND == "jax"]
    # Every logged loss and discriminator output, and the validation's.
    assert "val_d_loss" in summaries[0]["final"]
    assert summaries[1]["final"].keys() == summaries[0]["final"].keys()
    for key, value in summaries[0]["final"].items():
        if key not in ("images_per_sec", "step_time_ms"):
            np.testing.assert_allclose(summaries[1]["final"][key], value, atol=1e-5)
    _same_generators(one, two)


def _free_address():
    return f"localhost:{launcher.free_ports(1)[0]}"


def test_an_unreachable_process_is_a_one_line_error_in_bounded_time(
    one_device_per_process, tmp_path
):
    # One process of two, the other never started: on TensorFlow the first
    # worker waits for the second, on JAX the second for the coordinator.
    env = dict(os.environ)
    if BACKEND == "jax":
        env["KERAS_DISTRIBUTION_JOB_ADDRESSES"] = ",".join(
            [_free_address(), _free_address()]
        )
        env["KERAS_DISTRIBUTION_NUM_PROCESSES"] = "2"
        env["KERAS_DISTRIBUTION_PROCESS_ID"] = "1"
    else:
        cluster = {"worker": [_free_address(), _free_address()]}
        env["TF_CONFIG"] = json.dumps(
            {"cluster": cluster, "task": {"type": "worker", "index": 0}}
        )
    command = [sys.executable, "-m", "keras_tpugan.cli", "train", "--preset", "smoke"]
    command += ["--set", "start_timeout_seconds=5", "--out", str(tmp_path)]
    started = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert time.monotonic() - started < 60
    assert done.returncode == 2, done.stderr[-3000:]
    error = [line for line in done.stderr.splitlines() if "keras-tpugan: error" in line]
    expected = (
        "Expected the coordinator" if BACKEND == "jax" else "Expected every process"
    )
    assert len(error) == 1 and expected in error[0], done.stderr[-3000:]
    assert "start_timeout_seconds=5" in error[0]


def test_processes_started_with_different_settings_are_refused(probe):
    status, lines = probe
    text = "\n".join(lines)
    assert status == 1, text[-3000:]
    assert text.count("same settings on 2 processes") == 2
    for rank in (0, 1):
        assert f"[rank {rank}] refused: Expected every process of the run" in text
        assert f"rank {rank} exited with status 2" in text


def test_every_process_takes_the_chiefs_values(probe):
    _, lines = probe
    got = [line.split("] ", 1)[1] for line in lines if "] CHIEF " in line]
    # Rank 0's, bit for bit (JSON writes a float's shortest exact repr).
    assert got == ['CHIEF {"fcd": 0.1, "kid": 0.3333333333333333}'] * 2, got


def test_a_batch_that_does_not_split_over_the_processes_is_refused(probe):
    status, lines = probe
    assert status == 1
    for rank in (0, 1):
        assert f"[rank {rank}] CLI STATUS 2" in lines, "\n".join(lines[-20:])
        assert any(
            line.startswith(
                f"[rank {rank}] keras-tpugan: error: Expected a global "
                "batch size divisible by the 2 replica(s)"
            )
            for line in lines
        ), "\n".join(lines[-20:])


def test_weak_scaling_reports_images_per_second_and_efficiency(
    tmp_path, one_device_per_process, capsys
):
    """Slow (about 30-65 s): three or five launched processes (1, 2 connected,
    and on TensorFlow or in `make test-full` 2 unconnected).

    The unconnected pair starts two one-process runs the same way on either
    backend; `make test` runs it in the TensorFlow pass, and the JAX pass
    runs the connected rows only (`make test-full`: all of them on both).
    """
    from keras_tpugan.bench.scaling import weak_scaling
    from keras_tpugan.cli import main as cli

    independent = FULL or BACKEND == "tensorflow"
    lines = []
    rows = weak_scaling(
        processes=(1, 2),
        batch_size=8,
        steps=2,
        repeats=1,
        width=8,
        latent_dim=8,
        all_reduce_dtype="bfloat16",  # runs across the processes too
        independent=independent,
        csv_path=str(tmp_path / "scaling.csv"),
        printer=lines.append,
    )
    assert {r["all_reduce_dtype"] for r in rows} == {"bfloat16"}
    expected = [(1, "data-parallel"), (2, "data-parallel")]
    expected += [(2, "independent")] if independent else []
    assert [(r["processes"], r["mode"]) for r in rows] == expected
    assert [r["global_batch"] for r in rows] == [8, 16, 16][: len(rows)]
    assert rows[0]["efficiency"] == 1.0
    for row in rows:
        assert row["images_per_sec"] > 0
        per_process = row["images_per_sec"] / row["processes"]
        assert row["images_per_sec_per_process"] == pytest.approx(per_process, abs=0.1)
        assert row["efficiency"] == pytest.approx(
            per_process / rows[0]["images_per_sec"], abs=1e-3
        )
    assert lines[0].startswith("weak scaling: 1 core(s) per process")
    assert "| processes | mode |" in "\n".join(lines)
    assert (tmp_path / "scaling.csv").read_text().count("\n") == len(rows) + 1
    with pytest.raises(ValueError, match="Expected process counts >= 1"):
        weak_scaling(processes=(0, 2))
    with pytest.raises(ValueError, match="Expected at least 2 steps per timing"):
        weak_scaling(processes=(1, 2), steps=1)
    assert cli.main(["bench", "--processes", "1", "2"]) == 2
    assert "Expected one value of --precisions" in capsys.readouterr().err
