"""TensorFlow vs JAX: the same training and the same files on both backends.

Each backend runs in its own process (`backend_worker.py`): Keras picks its
backend once per process. Runs in the TensorFlow pass of the suite.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import subprocess_env

import keras_tpugan as ktg

WORKER = os.path.join(os.path.dirname(__file__), "backend_worker.py")
sys.path.insert(0, os.path.dirname(__file__))
from backend_worker import BATCH, CASES, LATENT, STEPS  # noqa: E402

# float32 on one CPU; the backends' convolutions differ in summation order
# (Eigen vs XLA), which is all the difference there should be.
ATOL = 1e-5


def _run_both(directory):
    """Runs the worker on both backends at once (one process each)."""
    workers = []
    for backend in ("tensorflow", "jax"):
        env = subprocess_env(KERAS_BACKEND=backend)
        workers.append(
            subprocess.Popen(
                [sys.executable, WORKER, backend, str(directory)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for worker in workers:
        stdout, stderr = worker.communicate(timeout=600)
        assert worker.returncode == 0, stderr[-3000:]
        assert "worker done" in stdout


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Both backends trained from the same weights and latents, then each
    loading the other's files."""
    directory = tmp_path_factory.mktemp("backends")
    rng = np.random.default_rng(0)
    np.savez(
        directory / "images.npz",
        images=rng.uniform(-1, 1, (BATCH, 28, 28, 1)).astype("float32"),
        labels=(np.arange(BATCH) % 2).astype("int32"),
    )
    np.savez(
        directory / "noise.npz",
        z=rng.normal(size=(STEPS, 3, BATCH, LATENT)).astype("float32"),
        alpha=rng.uniform(size=(STEPS, 3, BATCH)).astype("float32"),
    )
    for case, (gan_kwargs, _) in CASES.items():
        num_classes = gan_kwargs.get("num_classes")
        g = ktg.models.dcgan_generator(
            latent_dim=LATENT, width=8, num_classes=num_classes
        )
        d = ktg.models.dcgan_discriminator(
            width=8, num_classes=num_classes, dropout=gan_kwargs.get("d_dropout", 0.0)
        )
        g.save_weights(directory / f"{case}_g.weights.h5")
        d.save_weights(directory / f"{case}_d.weights.h5")
    # Each trains from the shared inputs, waits for the other, then loads
    # the other's files: one process per backend.
    _run_both(directory)
    return directory


@pytest.mark.parametrize("case", sorted(CASES))
def test_tensorflow_and_jax_train_alike(runs, case):
    """Slow on its first case (about 90-150 s): the module fixture starts two
    processes (each backend trains every case, then loads the other's files)."""
    logs = {}
    weights = {}
    for backend in ("tensorflow", "jax"):
        with open(runs / f"{backend}_{case}_logs.json") as f:
            logs[backend] = json.load(f)
        saved = np.load(runs / f"{backend}_{case}_weights.npz")
        weights[backend] = [saved[k] for k in sorted(saved.files, key=_index)]
    assert logs["tensorflow"].keys() == logs["jax"].keys()
    assert {"d_loss", "g_loss", "d_real", "d_fake"} <= logs["jax"].keys()
    for key, values in logs["tensorflow"].items():
        assert len(values) == STEPS
        np.testing.assert_allclose(logs["jax"][key], values, atol=ATOL, rtol=ATOL)
    # The weights did move, and moved the same way on both backends.
    assert len(weights["tensorflow"]) == len(weights["jax"])
    for a, b in zip(weights["tensorflow"], weights["jax"], strict=True):
        np.testing.assert_allclose(a, b, atol=ATOL, rtol=ATOL)
    np.testing.assert_allclose(
        np.load(runs / f"tensorflow_{case}_generated.npy"),
        np.load(runs / f"jax_{case}_generated.npy"),
        atol=ATOL,
    )


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("saved_on", ["tensorflow", "jax"])
def test_keras_files_load_and_sample_identically_on_the_other_backend(
    runs, case, saved_on
):
    loaded_on = "jax" if saved_on == "tensorflow" else "tensorflow"
    # A bare generator, sampled by `keras-tpugan sample`'s code.
    np.testing.assert_allclose(
        np.load(runs / f"{loaded_on}_loaded_{case}_raw.npy"),
        np.load(runs / f"{saved_on}_{case}_raw.npy"),
        atol=ATOL,
    )
    # The whole GAN (its EMA generator, when it keeps one).
    np.testing.assert_allclose(
        np.load(runs / f"{loaded_on}_loaded_{case}_generated.npy"),
        np.load(runs / f"{saved_on}_{case}_generated.npy"),
        atol=ATOL,
    )
    # Loaded with its step counter and optimizers, it trains on: one more step.
    assert int(np.load(runs / f"{loaded_on}_loaded_{case}_step.npy")) == STEPS + 1


def _index(name):
    return int(name.split("_")[-1])
