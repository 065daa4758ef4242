import logging
import os
import re
import subprocess
import sys
import threading
import time
import warnings

import keras
import pytest
from conftest import BACKEND

from keras_tpugan import distribute
from keras_tpugan.distribute import iterators, tpu
from keras_tpugan.runs.config import TrainConfig

pytestmark = pytest.mark.both_backends

if BACKEND == "tensorflow":  # (the JAX pass runs without TensorFlow)
    import tensorflow as tf


def test_cpu_strategies():
    one = distribute.get_strategy("cpu", num_replicas=1)
    assert distribute.num_replicas(one) == 1
    four = distribute.get_strategy("cpu", num_replicas=4)
    if BACKEND == "jax":
        assert isinstance(four, keras.distribution.DataParallel)
        assert four.device_mesh.devices.size == 4
    else:
        assert isinstance(four, tf.distribute.MirroredStrategy)
    assert distribute.num_replicas(four) == 4
    assert distribute.num_replicas(distribute.get_strategy("cpu")) == 4


@pytest.mark.tensorflow_only
def test_one_device_is_the_default_strategy_unless_inside_another_scope():
    one = distribute.get_strategy("cpu", num_replicas=1)
    assert one is tf.distribute.get_strategy()  # what a plain keras.Model uses
    assert distribute.strategy_name(one) == "DefaultStrategy"
    two = distribute.get_strategy("cpu", num_replicas=2)
    with two.scope():
        inside = distribute.get_strategy("cpu", num_replicas=1)
    assert isinstance(inside, tf.distribute.OneDeviceStrategy)
    assert distribute.strategy_name(inside) == "OneDeviceStrategy"
    with pytest.raises(ValueError, match="replica\\(s\\) of DefaultStrategy"):
        distribute.check_global_batch(0, one)


def test_auto_on_a_machine_without_tpu_or_gpu_uses_the_cpus():
    strategy = distribute.get_strategy("auto")
    if BACKEND == "jax":
        assert {d.platform for d in strategy.device_mesh.devices.flat} == {"cpu"}
    else:
        assert strategy.extended.worker_devices[0].endswith("CPU:0")
    assert distribute.num_replicas(strategy) == 4  # every device
    # The config's `num_replicas` takes the first devices "auto" picks.
    options = TrainConfig(num_replicas=2).strategy_options()
    assert distribute.num_replicas(distribute.get_strategy(**options)) == 2
    with pytest.raises(ValueError, match="Expected num_replicas >= 1, or None"):
        TrainConfig(num_replicas=0)


def test_explicit_kinds_that_are_missing_fail_clearly():
    missing = (
        {"tpu": "JAX TPU device", "gpu": "JAX GPU device"}
        if BACKEND == "jax"
        else {"tpu": "Expected a reachable TPU", "gpu": "at least one GPU"}
    )
    for kind, message in missing.items():
        with pytest.raises(ValueError, match=message):
            distribute.get_strategy(kind)
    with pytest.raises(ValueError, match="Expected `kind` to be one of"):
        distribute.get_strategy("cuda")
    with pytest.raises(ValueError, match="between 1 and the 4 CPU"):
        distribute.get_strategy("cpu", num_replicas=8)
    # Several processes each train on all their devices: refused at once.
    with pytest.raises(
        ValueError, match=r"num_replicas=None with several processes.*Received: "
    ):
        distribute.get_strategy("multiworker", num_replicas=1)


def test_check_global_batch():
    strategy = distribute.get_strategy("cpu", num_replicas=4)
    assert distribute.check_global_batch(64, strategy) == 16
    with pytest.raises(
        ValueError,
        match="divisible by the 4 replica.*Received: global batch size 30"
        ".*for example 28",
    ):
        distribute.check_global_batch(30, strategy)


def test_scope_of_a_strategy_or_of_none():
    strategy = distribute.get_strategy("cpu", num_replicas=2)
    with distribute.scope(strategy):
        assert distribute.num_replicas() == 2
    with distribute.scope(None):
        assert distribute.num_replicas() == 1


def test_chief():
    assert distribute.is_chief(distribute.get_strategy("cpu", num_replicas=2))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(collective="mpi"), "Expected `collective` in ('auto', 'ring', 'nccl')"),
        (dict(bytes_per_pack=-1), "Expected an integer `bytes_per_pack` >= 0"),
        (dict(collective_timeout_seconds=0), "Expected collective_timeout_seconds > 0"),
        (dict(start_timeout_seconds=-5), "Expected start_timeout_seconds > 0"),
        (dict(heartbeat_timeout_seconds=True), "Expected heartbeat_timeout_seconds"),
    ],
)
def test_bad_collective_and_time_out_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        distribute.get_strategy("cpu", **kwargs)


def test_the_collective_is_chosen_on_tensorflow_and_by_xla_on_jax():
    chosen = dict(collective="ring", bytes_per_pack=1024, collective_timeout_seconds=9)
    if BACKEND == "jax":
        with pytest.raises(ValueError, match="where XLA places and packs"):
            distribute.get_strategy("cpu", **chosen)
    else:  # taken, and used by a multi-process strategy (test_multiprocess)
        assert distribute.num_replicas(distribute.get_strategy("cpu", **chosen)) == 4
    config = TrainConfig.preset("smoke").override(
        ["collective=ring", "collective_bytes_per_pack=1024", "start_timeout_seconds=7"]
    )
    assert config.strategy_options() == dict(
        kind="auto",
        num_replicas=None,
        collective="ring",
        bytes_per_pack=1024,
        collective_timeout_seconds=None,
        start_timeout_seconds=7.0,
        heartbeat_timeout_seconds=30.0,
    )


@pytest.mark.tensorflow_only
def test_dropped_multi_process_iterators_are_deleted_on_a_thread_of_their_own(
    caplog,
):
    import weakref

    strategy = distribute.get_strategy("cpu", num_replicas=2)
    ds = tf.data.Dataset.range(8).batch(4, drop_remainder=True)
    # What `shard_over_processes` returns with several processes.
    distributed = iterators.deleting_iterators_aside(
        strategy.experimental_distribute_dataset(ds), strategy
    )
    assert isinstance(distributed, tf.distribute.DistributedDataset)
    # It installed the exit protocol, which waits for the deletions at exit.
    assert not distribute.install_exit_handler()
    kept = iter(distributed)
    dropped = iter(distributed)
    batches = [strategy.experimental_local_results(b) for b in dropped]
    assert [[t.numpy().tolist() for t in b] for b in batches] == [
        [[0, 1], [2, 3]],
        [[4, 5], [6, 7]],
    ]
    gone = weakref.ref(dropped)
    del dropped, batches
    assert gone() is not None  # kept for the deletion thread
    thread = distribute.release_unused_iterators()
    # A daemon, which the process waits for at exit for a bounded time only.
    assert isinstance(thread, threading.Thread) and thread.daemon
    assert thread in iterators._DELETIONS
    thread.join(timeout=60)
    assert gone() is None
    # An iterator still held is left alone, and released once dropped.
    assert distribute.release_unused_iterators() is None
    assert next(kept) is not None
    del kept
    distribute.release_unused_iterators().join(timeout=60)
    assert iterators._ITERATORS == []
    # The processes (here one, of two replicas) meet in one all-reduce of the
    # strategy's, within the time given.
    with caplog.at_level(logging.INFO, logger="keras_tpugan"):
        start = time.monotonic()
        assert distribute.finish_deletions(seconds=30.0)
    assert time.monotonic() - start < 30
    assert "exit barrier not passed" not in caplog.text


def _run_python(script):
    return subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "KERAS_BACKEND": "jax"},  # the faster import
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_importing_the_package_registers_no_exit_handler():
    """The exit protocol is installed by what needs it, not by an import."""
    script = """
import atexit
registered = []
register = atexit.register
atexit.register = lambda fn, *a, **k: registered.append(fn) or register(fn, *a, **k)
import keras_tpugan
import keras_tpugan.cli.main
def ours():
    return [f.__name__ for f in registered
            if (getattr(f, '__module__', None) or '').startswith('keras_tpugan')]
print('ours', ours())
from keras_tpugan import distribute
print('installed', distribute.install_exit_handler())
print('ours', ours())
"""
    done = _run_python(script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "ours []",
        "installed True",
        "ours ['_end_at_exit']",
    ]


def test_a_deletion_left_running_ends_the_process_with_its_status():
    """At exit a deletion still running would abort Python's finalization."""
    script = """
import sys, threading, time
from keras_tpugan.distribute import iterators
iterators.EXIT_WAIT_SECONDS = 0.2
stuck = threading.Thread(target=time.sleep, args=(30,), daemon=True)
stuck.start()
iterators._DELETIONS.append(stuck)
print("before", flush=True)
iterators.end_process(3)
print("not reached")
"""
    start = time.monotonic()
    done = _run_python(script)
    assert done.returncode == 3, done.stderr
    assert done.stdout == "before\n"
    assert "did not end within 0.2 s" in done.stderr
    assert "exiting with status 3 without finalizing" in done.stderr
    assert time.monotonic() - start < 30
    # With nothing left to delete, it returns and the process ends as usual.
    assert distribute.finish_deletions(seconds=0.0)
    assert distribute.end_process(0) is None


@pytest.mark.parametrize(
    "ending, status", [("pass", 0), ("raise ValueError('lost')", 1)]
)
def test_at_exit_a_deletion_left_running_keeps_pythons_status(ending, status):
    """A script that ends (or dies) with a deletion still running: 0 when it
    ended, 1 after an uncaught exception, as Python's own status."""
    script = f"""
import threading, time
from keras_tpugan.distribute import iterators
assert iterators.install_exit_handler()  # as a multi-process dataset does
assert not iterators.install_exit_handler()  # once per process
iterators.EXIT_WAIT_SECONDS = 0.2
stuck = threading.Thread(target=time.sleep, args=(30,), daemon=True)
stuck.start()
iterators._DELETIONS.append(stuck)
{ending}
"""
    start = time.monotonic()
    done = _run_python(script)
    assert done.returncode == status, done.stderr
    assert f"exiting with status {status} without finalizing" in done.stderr
    assert ("ValueError: lost" in done.stderr) == (status == 1)
    assert time.monotonic() - start < 30


def test_attached_tpu_reads_device_files_and_tpu_variables(monkeypatch, tmp_path):
    for name in tpu._TPU_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(tpu, "_TPU_DEVICE_PATTERNS", (str(tmp_path / "accel*"),))
    assert distribute.attached_tpu() is None
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v5litepod-8")
    assert distribute.attached_tpu() == "TPU_ACCELERATOR_TYPE=v5litepod-8"
    (tmp_path / "accel0").touch()
    assert distribute.attached_tpu() == str(tmp_path / "accel0")


def test_auto_warns_when_a_tpu_is_attached_but_the_backend_cannot_use_it(
    monkeypatch,
):
    monkeypatch.setattr(tpu, "attached_tpu", lambda: "/dev/accel0")
    with pytest.warns(RuntimeWarning) as record:
        strategy = distribute.get_strategy("auto")
    assert distribute.num_replicas(strategy) == 4  # the CPU's split, as before
    (warning,) = [w for w in record if "A TPU is attached" in str(w.message)]
    message = str(warning.message)
    assert "A TPU is attached (/dev/accel0)" in message
    assert "falls back to the" in message and "CPU" in message
    fix = "KERAS_BACKEND=jax" if BACKEND == "tensorflow" else "pip install 'jax[tpu]'"
    assert fix in message
    assert warning.filename == __file__  # the user's line
    # Without a TPU attached, no warning.
    monkeypatch.setattr(tpu, "attached_tpu", lambda: None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        distribute.get_strategy("auto")


def test_chief_values_of_one_process_are_its_own_as_floats():
    # (Several processes: test_multiprocess's probe.)
    values = distribute.chief_values({"fcd": keras.ops.convert_to_numpy(1.5), "kid": 2})
    assert values == {"fcd": 1.5, "kid": 2.0}
    assert all(type(v) is float for v in values.values())


# The words TensorFlow's collectives use when a worker stops answering.
_TF_LOST = (
    "Collective ops is aborted by: Error reported from /job:worker/task:1: The "
    "following tasks are unhealthy (stopped sending heartbeats):\n"
    "/job:worker/replica:0/task:{task}\nThe tasks have crashed."
)


def test_a_lost_process_is_told_from_other_errors_and_named():
    assert distribute.lost_process(ValueError("Expected a batch size")) is None
    assert distribute.lost_process(None) is None
    if BACKEND == "jax":  # one process: no peer to lose
        error = RuntimeError("Gloo all-reduce failed: Connection reset by peer")
        assert distribute.lost_process(error) is None
        return
    cause = RuntimeError(_TF_LOST.format(task=1))
    # Without a cluster of several processes nothing is lost, whatever the
    # words (a download's "Connection reset by peer", say).
    assert "TF_CONFIG" not in os.environ
    assert distribute.lost_process(cause) is None
    try:
        try:
            raise cause
        except RuntimeError as e:
            raise ValueError("a step failed") from e
    except ValueError as e:
        raised = e
    os.environ["TF_CONFIG"] = '{"cluster": {"worker": ["a:1", "b:2"]}}'
    try:
        assert distribute.lost_process(raised) == "process 1 of 2"
        os.environ["TF_CONFIG"] = (
            '{"cluster": {"chief": ["c:0"], "worker": ["a:1", "b:2"]}}'
        )
        assert distribute.lost_process(cause) == "process 2 of 3"
    finally:
        del os.environ["TF_CONFIG"]
