"""The JAX backend without TensorFlow: what trains, and what says it needs it.

The JAX pass runs with TensorFlow made unimportable (see conftest.py), so
every JAX test proves its path needs no TensorFlow; these check the inputs
a JAX-only machine has and the one-line errors of what needs TensorFlow.
"""

import logging
import os
import sys

import keras
import numpy as np
import pytest
from conftest import BACKEND, tiny_gan
from PIL import Image

import keras_tpugan as ktg
from keras_tpugan.cli import main as cli
from keras_tpugan.data.epoch_batches import EpochBatches

pytestmark = [pytest.mark.both_backends, pytest.mark.jax_only]


def test_this_pass_runs_without_tensorflow():
    assert BACKEND == "jax"
    assert "tensorflow" not in sys.modules
    with pytest.raises(ImportError, match="blocked in the JAX test pass"):
        import tensorflow  # noqa: F401
    with pytest.raises(ImportError, match="blocked in the JAX test pass"):
        import tensorflow_datasets  # noqa: F401
    # Every process a test starts inherits the block.
    assert os.environ["PYTHONPATH"].split(os.pathsep)[0].endswith("tensorflow_blocked")


def _digit_folder(directory, count=16):
    """A folder of grey 28x28 PNGs, one subfolder per class."""
    rng = np.random.default_rng(0)
    for i in range(count):
        folder = directory / f"class_{i % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        pixels = rng.integers(0, 256, (28, 28), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / f"{i}.png")
    return str(directory)


def test_arrays_the_offline_subset_and_folders_load_and_train(tmp_path):
    mnist, info = ktg.data.load_images(
        "mnist", batch_size=64, labels=True, return_info=True
    )
    assert isinstance(mnist, EpochBatches) and info["source"] == "offline"
    images, labels = mnist[0]
    assert images.shape == (64, 28, 28, 1) and images.dtype == np.float32
    assert labels.shape == (64,) and labels.dtype == np.int32
    assert images.min() == -1.0 and images.max() == 1.0
    arrays = ktg.data.load_images(np.zeros((10, 28, 28), "uint8"), batch_size=4)
    assert len(arrays) == 2 and arrays[1].shape == (4, 28, 28, 1)
    assert np.all(arrays[1] == -1.0)

    folder = ktg.data.load_images(
        _digit_folder(tmp_path / "digits"), image_size=28, batch_size=8, labels=True
    )
    assert len(folder) == 2 and folder[0][0].shape == (8, 28, 28, 1)
    # Streamed from its files: the same batches, nothing held.
    streamed, info = ktg.data.load_images(
        str(tmp_path / "digits"),
        image_size=28,
        batch_size=8,
        labels=True,
        stream=True,
        return_info=True,
    )
    assert info["streamed"] and info["memory_bytes"] == 0
    with pytest.raises(ValueError, match="Expected the TensorFlow backend to stream"):
        ktg.data.load_images("cifar10", batch_size=4, stream=True)  # TFDS's tf.data
    for i in range(2):
        for a, b in zip(streamed[i], folder[i], strict=True):
            np.testing.assert_array_equal(a, b)
    gan = tiny_gan(num_classes=2, ema_decay=0.9)
    out = tmp_path / "run"
    callbacks = [
        ktg.callbacks.SampleGrid(out / "grids", num_images=4),
        ktg.callbacks.LossCurves(out / "curves"),
        ktg.callbacks.Throughput(global_batch_size=8),
        ktg.callbacks.DivergenceGuard(),
        keras.callbacks.BackupAndRestore(str(out / "backup")),
    ]
    history = gan.fit(folder, epochs=2, verbose=0, callbacks=callbacks)
    assert len(history.history["d_loss"]) == 2
    assert int(keras.ops.convert_to_numpy(gan.step_counter)) == 4
    grids = ["epoch_0001.png", "epoch_0002.png", "samples.gif"]
    assert sorted(os.listdir(out / "grids")) == grids
    assert os.listdir(out / "curves")
    assert gan.generate(3, labels=[0, 1, 1]).shape == (3, 28, 28, 1)


def test_what_needs_tensorflow_says_so_in_one_line(tmp_path, caplog):
    with pytest.raises(ImportError, match="Reading TFDS datasets needs tensorflow-"):
        ktg.data.load_images("mnist", source="tfds")
    with pytest.raises(ImportError, match=r"SampleGrid\(tensorboard_dir=...\) needs"):
        ktg.callbacks.SampleGrid(tmp_path, tensorboard_dir=str(tmp_path / "tb"))
    with pytest.raises(ImportError, match="keras_tpugan's use of `tf.data` needs"):
        ktg.tf_import.tf.data  # noqa: B018
    # TFDS cannot be read: "auto" falls back to the offline subset.
    with caplog.at_level(logging.INFO, logger="keras_tpugan"):
        _, info = ktg.data.load_images("mnist", batch_size=64, return_info=True)
    assert info["source"] == "offline" and "needs tensorflow-datasets" in caplog.text
    assert "tensorflow" not in sys.modules


def test_the_command_trains_on_a_folder_without_tensorboard(tmp_path, caplog):
    """One small run of the command on a folder, as on a JAX-only machine."""
    out = tmp_path / "run"
    # (Scoring a folder's run on a classifier of its own images is
    # test_metrics's, on both backends: quality is off here.)
    folder = _digit_folder(tmp_path / "digits", count=48)
    argv = ["train", "--data", folder, "--image-size", "28", "--preset", "smoke"]
    argv += ["--set", "epochs=1", "--set", "batch_size=8", "--set", "quality_every=0"]
    argv += ["--set", "width=8", "--set", "latent_dim=8", "--quiet", "--out", str(out)]
    with caplog.at_level(logging.WARNING, logger="keras_tpugan"):
        assert cli.main(argv) == 0
    assert "TensorBoard logs: off. TensorBoard logs needs TensorFlow" in caplog.text
    written = set(os.listdir(out))
    assert {"generator.keras", "samples", "summary.json", "snapshots"} <= written
    assert "tensorboard" not in written
    assert os.listdir(out / "samples")


def test_repeated_epoch_batches_read_each_pass_in_the_epoch_set_at_its_start():
    ids = np.arange(12, dtype="int32")
    batches = EpochBatches(np.zeros((12, 2, 2, 1), "uint8"), ids, batch_size=4)
    endless = batches.repeated()
    assert endless.num_batches is None and ktg.data.is_normalized(endless)
    try:
        ktg.data.set_epoch(5)
        first = [endless[i][1].tolist() for i in range(2)]
        ktg.data.set_epoch(6)  # mid-pass: the pass keeps epoch 5's order
        first.append(endless[2][1].tolist())
        second = [endless[i][1].tolist() for i in range(3, 6)]  # a new pass
    finally:
        ktg.data.set_epoch(0)
    assert first == [batches.batch_at(i, 5)[1].tolist() for i in range(3)]
    assert second == [batches.batch_at(i, 6)[1].tolist() for i in range(3)]
    assert sorted(sum(first, [])) == sorted(sum(second, [])) == ids.tolist()
    assert first != second
