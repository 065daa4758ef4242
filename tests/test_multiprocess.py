"""Several processes on localhost: input split, parity with one process, faults.

Every case starts real processes with `keras-tpugan launch` (free ports,
bounded grace periods; the launcher reaps every process it started).
"""

import json
import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_tpugan as ktg
from keras_tpugan import launcher

pytestmark = pytest.mark.both_backends

# Each process records the example ids it is fed for two epochs, through
# the split `GAN.fit` uses: `shard_over_processes` on TensorFlow, Keras's
# `DataParallel.distribute_dataset` on JAX.
READ_IDS = """
import json, os
import numpy as np
import keras_tpugan as ktg
strategy = ktg.distribute.get_strategy("auto")
ids = np.arange(100, dtype="int32")
ds = ktg.data.load_images(
    (np.zeros((100, 4, 4, 1), "float32"), ids), batch_size=8, labels=True, seed=3
)
steps = {}
for epoch in (0, 1):
    ktg.data.set_epoch(epoch)
    if ktg.distribute.keras.backend.backend() == "jax":
        parts = strategy.distribute_dataset(ds)
        steps[epoch] = [np.asarray(b[1]).tolist() for b in parts]
    else:
        steps[epoch] = [
            np.concatenate(strategy.experimental_local_results(b[1])).tolist()
            for b in ktg.distribute.shard_over_processes(ds, strategy)
        ]
print("IDS", json.dumps({"rank": int(os.environ["KERAS_TPUGAN_RANK"]), "steps": steps}))
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


@pytest.fixture
def one_device_per_process(monkeypatch):
    # The suite splits the CPU into four devices; each process gets one.
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.delenv("TF_CONFIG", raising=False)


def test_each_example_is_read_by_exactly_one_process(tmp_path, one_device_per_process):
    status, lines = _launch([_script(tmp_path, READ_IDS)])
    assert status == 0, "\n".join(lines[-30:])
    read = {}
    for line in lines:
        if "] IDS " in line:
            record = json.loads(line.split("] IDS ", 1)[1])
            read[record["rank"]] = record["steps"]
    assert sorted(read) == [0, 1]
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
            global_batches = [b[1].numpy().tolist() for b in reference]
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


PARITY = [
    "--preset",
    "smoke",
    "--set",
    "quality_every=0",
    "--set",
    "batch_size=256",
    "--set",
    "discriminator_steps=2",
    "--set",
    "gradient_penalty=wgan-gp",
    "--set",
    "conditional=true",
]


def test_two_processes_train_like_one(tmp_path, one_device_per_process):
    one, two = tmp_path / "one", tmp_path / "two"
    subprocess.run(
        [sys.executable, "-m", "keras_tpugan.cli", "train", *PARITY, "--out", str(one)],
        check=True,
        timeout=300,
        capture_output=True,
    )
    status, lines = _launch(["train", *PARITY, "--out", str(two)])
    assert status == 0, "\n".join(lines[-40:])
    ranks = {line.split("]", 1)[0] for line in lines if line.startswith("[rank")}
    assert ranks == {"[rank 0", "[rank 1"}
    summaries = [json.loads((out / "summary.json").read_text()) for out in (one, two)]
    assert [s["processes"] for s in summaries] == [1, 2]
    assert [s["replicas"] for s in summaries] == [1, 2]
    assert summaries[1]["batch_size"] == 256
    assert summaries[0]["xla"] and summaries[1]["xla"]
    # Every logged loss and discriminator output, and the validation's.
    for key, value in summaries[0]["final"].items():
        if key not in ("images_per_sec", "step_time_ms"):
            np.testing.assert_allclose(summaries[1]["final"][key], value, atol=1e-5)
    generators = [keras.saving.load_model(o / "generator.keras") for o in (one, two)]
    for a, b in zip(generators[0].weights, generators[1].weights, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5)
