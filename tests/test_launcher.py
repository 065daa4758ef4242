"""`keras-tpugan launch`: processes, their environment, output and failures."""

import json
import os
import time

import keras
import numpy as np
import pytest
from conftest import BACKEND, colour_folder

from keras_tpugan import distribute
from keras_tpugan.cli import main as cli
from keras_tpugan.launch import launcher

REPORT = """
import json, os, sys
print(json.dumps({
    "rank": int(os.environ["KERAS_TPUGAN_RANK"]),
    "tf_task": json.loads(os.environ["TF_CONFIG"])["task"],
    "tf_workers": json.loads(os.environ["TF_CONFIG"])["cluster"]["worker"],
    "jax": [os.environ[f"KERAS_DISTRIBUTION_{k}"]
            for k in ("JOB_ADDRESSES", "NUM_PROCESSES", "PROCESS_ID")],
    "cores": sorted(os.sched_getaffinity(0)),
}))
"""

DIES = """
import os, signal, sys, time
if os.environ["KERAS_TPUGAN_RANK"] == "1":
    print("rank one going", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(600)
"""


def _script(tmp_path, text):
    path = tmp_path / "script.py"
    path.write_text(text)
    return str(path)


def test_launch_gives_each_rank_its_cluster_environment(tmp_path):
    lines = []
    status = launcher.launch(
        [_script(tmp_path, REPORT)], 2, pin_cores=False, printer=lines.append
    )
    assert status == 0
    reports = {}
    for line in lines:
        if line.startswith("[rank "):
            prefix, text = line.split("] ", 1)
            reports[int(prefix[len("[rank ") :])] = json.loads(text)
    assert sorted(reports) == [0, 1]
    workers = reports[0]["tf_workers"]
    assert len(set(workers)) == 2 and reports[1]["tf_workers"] == workers
    for rank, report in reports.items():
        assert report["rank"] == rank
        assert report["tf_task"] == {"type": "worker", "index": rank}
        address, count, process_id = report["jax"]
        assert address.startswith("localhost:") and address not in workers
        assert (count, process_id) == ("2", str(rank))
    assert lines[-1] == (
        "keras-tpugan launch: 2 process(es): rank 0 exited 0; rank 1 exited 0"
    )


def test_pinned_ranks_get_equal_disjoint_shares_of_the_cores():
    assert launcher.core_shares(2, cores={0, 1, 2, 3, 4}) == [{0, 1}, {2, 3}]
    assert launcher.core_shares(3, cores={0, 1}) is None  # too few: not pinned
    shares = launcher.core_shares(1)
    assert shares == [set(os.sched_getaffinity(0))]


def test_a_rank_killed_mid_run_is_named_and_the_others_are_reaped(tmp_path):
    lines = []
    start = time.monotonic()
    status = launcher.launch(
        [_script(tmp_path, DIES)], 2, grace_seconds=1, printer=lines.append
    )
    assert status == 1
    assert time.monotonic() - start < 60  # rank 0 would sleep 600 s
    assert "[rank 1] rank one going" in lines
    assert lines[-2] == (
        "keras-tpugan launch: 2 process(es): rank 0 was killed by the launcher "
        "(still running after another rank failed); rank 1 was killed by SIGKILL"
    )
    assert lines[-1] == (
        "keras-tpugan launch: failed: rank 1 was killed by SIGKILL first"
    )


class _Ended:
    """Stands for a child process that ended with `returncode` (None: runs)."""

    def __init__(self, returncode):
        self.returncode = returncode

    def poll(self):
        return self.returncode


def test_a_rank_killed_by_a_signal_failed_before_one_that_exited_after_it():
    """Ranks seen ended at one poll: a rank that loses its peer exits within
    a fraction of a second, so the one killed by a signal came first."""
    first = launcher._first_failed
    assert first([_Ended(1), _Ended(-9)]) == 1
    assert first([_Ended(1), _Ended(None), _Ended(2)]) == 0
    assert first([_Ended(0), _Ended(None)]) is None


def test_a_failing_status_is_reported_with_the_command_line(tmp_path, capsys):
    script = _script(tmp_path, "import sys; sys.exit(3)")
    assert cli.main(["launch", "--processes", "2", "--", script]) == 1
    out = capsys.readouterr().out
    assert "rank 0 exited with status 3; rank 1 exited with status 3" in out


def test_bad_launches_are_one_clear_error(capsys):
    with pytest.raises(ValueError, match="Expected processes >= 1"):
        launcher.launch(["train"], 0)
    with pytest.raises(ValueError, match="Expected a command after `--`"):
        launcher.launch([], 2)
    assert cli.main(["launch", "--processes", "2", "--"]) == 2
    assert "Expected a command after `--`" in capsys.readouterr().err


@pytest.mark.both_backends
def test_cluster_processes_reads_the_backends_cluster_variables(monkeypatch):
    for name in (
        "TF_CONFIG",
        "KERAS_DISTRIBUTION_NUM_PROCESSES",
        "KERAS_DISTRIBUTION_JOB_ADDRESSES",
        "SLURM_JOB_ID",
    ):
        monkeypatch.delenv(name, raising=False)
    assert distribute.cluster_processes() == 1
    monkeypatch.setenv("SLURM_NTASKS", "4")
    assert distribute.cluster_processes() == 1  # not inside a Slurm job
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    assert distribute.cluster_processes() == 4
    monkeypatch.delenv("SLURM_JOB_ID")
    env = launcher.process_env(0, 3, [1, 2, 3], 4, base={})
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert distribute.cluster_processes() == 3
    if keras.backend.backend() == "tensorflow":
        monkeypatch.setenv("TF_CONFIG", "{not json")
        with pytest.raises(ValueError, match="Expected TF_CONFIG to be JSON"):
            distribute.cluster_processes()


@pytest.mark.both_backends
def test_two_processes_train_and_only_the_chief_writes(
    tmp_path, one_device_per_process, monkeypatch
):
    """Slow (about 25-50 s): two launched processes, each importing the backend
    (and on TensorFlow training the metric classifier of the folder's classes)."""
    out = tmp_path / "two"
    lines = []
    # A user's folder of colour images, one subfolder per class (512 of
    # them: 2 steps of 256), scored on a classifier of its classes that
    # both processes train into the run's one cache at the same time.
    folder = colour_folder(tmp_path / "colours", per_class=256, shape=(16, 16, 3))
    cache = tmp_path / "cache"  # empty: the classifier is trained, not loaded
    monkeypatch.setenv("KERAS_TPUGAN_CACHE", str(cache))
    # Scored in the TensorFlow pass. The JAX pass trains without scores:
    # there the classifier's training and the scoring compile, about 55
    # CPU-s more for the two processes, and what several processes change
    # in scoring (`chief_values`) test_multiprocess's probe checks on both.
    quality = BACKEND == "tensorflow"
    command = ["train", "--data", str(folder), "--image-size", "16"]
    command += ["--preset", "smoke", "--set", f"quality_every={int(quality)}"]
    command += ["--set", "quality_images=64"]
    # The demo's batch-norm generator: synchronized over processes on TF,
    # where jit_compile="auto" must turn XLA off as under MirroredStrategy.
    command += ["--set", "norm=batch", "--set", "jit_compile=auto"]
    # Plumbing, not quality: the smallest networks, no validation
    # (validated across processes: test_multiprocess).
    command += ["--set", "width=8", "--set", "latent_dim=8", "--set", "batch_size=256"]
    command += ["--set", "validation_split=none"]
    status = launcher.launch(
        [*command, "--out", str(out)], 2, grace_seconds=30, printer=lines.append
    )
    assert status == 0, "\n".join(lines[-40:])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["processes"] == 2
    assert summary["replicas"] == 2
    assert summary["batch_size"] == 256
    if quality:
        # Quality figures on the classifier of the folder's two classes; each
        # process logs the chief's (test_multiprocess checks that they are).
        assert summary["quality_unavailable"] is None
        final = summary["final"]
        assert np.isfinite(final["fcd"]) and np.isfinite(final["kid"])
        assert final["classifier_score_real"] == pytest.approx(2.0, abs=0.05)
        for rank in (0, 1):
            said = [x for x in lines if x.startswith(f"[rank {rank}] quality figures")]
            assert len(said) == 1 and "classifier of the run's 2 classes" in said[0]
        # Written whole, under names of each process's, then renamed into place.
        cached = sorted(p.suffix for p in cache.iterdir())
        assert cached == [".json", ".keras"], sorted(cache.iterdir())
    else:
        assert summary["quality_unavailable"] == "off (quality_every=0)"
    if BACKEND == "jax":
        assert summary["strategy"] == "DataParallel" and summary["xla"] is True
    else:
        assert summary["strategy"] == "MultiWorkerMirroredStrategy"
        assert summary["xla"] is False
    assert (out / "generator.keras").exists()
    ranks = {line.split("]", 1)[0] for line in lines if line.startswith("[rank")}
    assert ranks == {"[rank 0", "[rank 1"}
    # The whole GAN after the last epoch: saved by every process (reading
    # the variables is a step all of them take on JAX), kept by the chief.
    assert os.listdir(out / "snapshots") == ["gan_epoch_0001.keras"]
    gan = keras.saving.load_model(
        out / "snapshots" / "gan_epoch_0001.keras", safe_mode=True
    )
    assert int(keras.ops.convert_to_numpy(gan.step_counter)) == 2
