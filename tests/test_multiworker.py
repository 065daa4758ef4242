"""MultiWorkerMirroredStrategy: two worker processes on localhost."""

import json
import os
import subprocess
import sys

import numpy as np

from keras_tpugan.launch import launcher

WORKER = os.path.join(os.path.dirname(__file__), "multiworker_worker.py")


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    env.update(extra)
    return env


def _one_process(path, kind):
    subprocess.run(
        [sys.executable, WORKER, str(path)],
        env=_env(KIND=kind),
        check=True,
        timeout=300,
    )
    return json.loads(path.read_text())


def test_two_workers_match_one_replica(tmp_path):
    """Slow (about 40-60 s): four processes, each importing TensorFlow."""
    one = _one_process(tmp_path / "one.json", "cpu")
    cluster = {"worker": [f"localhost:{port}" for port in launcher.free_ports(2)]}
    workers = []
    for index in range(2):
        tf_config = json.dumps(
            {"cluster": cluster, "task": {"type": "worker", "index": index}}
        )
        workers.append(
            subprocess.Popen(
                [sys.executable, WORKER, str(tmp_path / f"w{index}.json")],
                env=_env(TF_CONFIG=tf_config),
            )
        )
    assert [w.wait(timeout=300) for w in workers] == [0, 0]
    # A one-worker MultiWorkerMirroredStrategy (no TF_CONFIG) trains too, with
    # XLA (asked for): its all-reduce stays out of the compiled update.
    single = _one_process(tmp_path / "single.json", "multiworker")
    results = [json.loads((tmp_path / f"w{i}.json").read_text()) for i in range(2)]
    assert one["replicas"] == single["replicas"] == 1
    assert [r["replicas"] for r in results] == [2, 2]
    assert [r["chief"] for r in results] == [True, False]
    # jit_compile="auto" leaves XLA off on this CPU-only machine, as Keras's
    # own "auto" does, on one device and under the multi-worker strategy.
    assert [r["auto_xla"] for r in (one, single, *results)] == [False] * 4
    for result in [one, single, *results]:
        # Read locally on each worker (`TensorFlowGANStep.get_metrics_result`),
        # the metrics are the epoch's logs.
        assert result["metrics"], result
        for key, value in result["metrics"].items():
            np.testing.assert_allclose(value, result["logs"][key], rtol=1e-6)
    for result in [*results, single]:
        assert result["logs"].keys() == one["logs"].keys()
        for key, value in one["logs"].items():
            np.testing.assert_allclose(result["logs"][key], value, atol=1e-5)
        for a, b in zip(one["weights"], result["weights"], strict=True):
            np.testing.assert_allclose(np.array(a), np.array(b), atol=1e-5)
