import hashlib
import logging
import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds
from PIL import Image

from keras_tpugan import data, keyed_dropout
from keras_tpugan.data import tfds as tfds_source
from keras_tpugan.data.epoch_batches import EpochBatches, hash_uint32


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
    # The fast uint8 parse reads what a float parse of the shipped file reads,
    # and the file is the one its notice names.
    shipped = pathlib.Path(data.OFFLINE_MNIST_FILE)
    digest = hashlib.sha256(shipped.read_bytes()).hexdigest()
    assert digest in (shipped.parent / "MNIST_NOTICE.txt").read_text()
    table = np.genfromtxt(data.OFFLINE_MNIST_FILE, delimiter=",")
    x, y = table[:, :-1], table[:, -1]
    assert x.shape == (5000, 784) and np.bincount(y.astype(int)).tolist() == [500] * 10
    order = np.random.RandomState(0).permutation(len(x))
    np.testing.assert_array_equal(x_train, x[order][:4000].reshape(-1, 28, 28, 1))
    np.testing.assert_array_equal(y_test, y[order][4000:])
    # Parsed once a process; each call gets arrays of its own.
    x_train[0] = 0
    np.testing.assert_array_equal(
        data.offline_mnist("train")[0][0], x[order][0].reshape(28, 28, 1)
    )


def test_a_slice_of_an_offline_split_is_read_as_tfds_slices_are(tmp_path):
    x_train, y_train = data.offline_mnist("train")
    x_test, _ = data.offline_mnist("test")
    for split, rows in {
        "train[:1024]": slice(0, 1024),
        "train[10%:20%]": slice(400, 800),
        "train[-100:]": slice(3900, 4000),
        "train[:]": slice(None),
    }.items():
        x, y = data.offline_mnist(split)
        np.testing.assert_array_equal(x, x_train[rows])
        np.testing.assert_array_equal(y, y_train[rows])
    np.testing.assert_array_equal(data.offline_mnist("test[:3%]")[0], x_test[:30])
    ds, info = data.load_images(
        "mnist", split="train[:256]", source="offline", batch_size=64, return_info=True
    )
    assert info["num_examples"] == 256 and sum(1 for _ in ds) == 4
    with pytest.raises(ValueError, match=r"or a slice of one such as 'train\[:1024\]'"):
        data.offline_mnist("validation[:10]")
    with pytest.raises(ValueError, match="at least one image. Received: split='train"):
        data.offline_mnist("train[5:5]")
    # Data with no splits refuses any other split than "train".
    folder = tmp_path / "photos"
    folder.mkdir()
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(folder / "a.png")
    for unsplit in (str(folder), np.zeros((4, 8, 8, 1), np.uint8)):
        with pytest.raises(ValueError, match="Expected split='train' for data with"):
            data.load_images(unsplit, split="train[:2]", image_size=8, batch_size=1)


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
        "class_names": None,
        # Held as uint8: a quarter of the 12,544,000 bytes of float32.
        "memory_bytes": 4000 * 28 * 28,
        "streamed": False,
    }
    images, labels = next(iter(ds))
    assert images.shape == (64, 28, 28, 1) and images.dtype == "float32"
    assert labels.shape == (64,) and labels.dtype == "int32"
    assert images.numpy().min() == -1.0 and images.numpy().max() == 1.0
    assert ds.element_spec[0].shape[0] == 64  # drop_remainder: static batch
    assert sum(1 for _ in ds) == 4000 // 64
    # Autotuning off: dropping an epoch's iterator would otherwise wait for
    # the autotuner's pass in progress (up to a second between epochs).
    assert ds.options().autotune.enabled is False


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
    monkeypatch.setattr(tfds_source, "_tfds_available", lambda name, data_dir: False)
    with caplog.at_level(logging.WARNING, logger="keras_tpugan"):
        _, info = data.load_images("mnist", batch_size=64, return_info=True)
    assert info["source"] == "offline" and "OFFLINE" in caplog.text
    with pytest.raises(ValueError, match="cannot download"):
        data.load_images("cifar10", batch_size=64)


@pytest.mark.parametrize("stream", [False, True])
def test_a_file_or_a_missing_path_is_neither_a_folder_nor_a_tfds_name(tmp_path, stream):
    archive = tmp_path / "photos.zip"
    archive.write_bytes(b"PK")
    image = tmp_path / "one.png"
    image.write_bytes(b"")
    cases = {
        str(archive): "a file. Unpack the archive into a folder",
        str(image): "a file. Pass the folder that holds the images",
        str(tmp_path / "missing"): "no folder and no TFDS name",
        "CIFAR10": "no folder and no TFDS name. Check the path",
    }
    for name, fix in cases.items():
        with pytest.raises(
            ValueError, match="Expected a folder of images or a TFDS"
        ) as e:
            data.load_images(name, batch_size=8, image_size=32, stream=stream)
        assert f"Received: {name!r}, " in str(e.value) and fix in str(e.value)


def test_tfds_names_with_a_config_version_or_namespace_are_asked_of_tfds(monkeypatch):
    asked = []
    monkeypatch.setattr(
        tfds_source, "_tfds_available", lambda name, data_dir: asked.append(name)
    )
    names = ["cifar10_corrupted/brightness_1:1.0.0", "mnist:3.*.*", "huggingface:x"]
    for name in names:
        with pytest.raises(ValueError, match="cannot download"):
            data.load_images(name, batch_size=8)
    assert asked == names


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


def _save(path, pixels, **kwargs):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path, **kwargs)


def _epoch(ds, epoch):
    data.set_epoch(epoch)
    try:
        return list(ds.as_numpy_iterator())
    finally:
        data.set_epoch(0)


def test_every_epoch_is_one_permutation_of_the_whole_dataset():
    # 25,000 examples, their labels their ids, stored sorted: a permutation
    # of windows of 10,000 would never bring the last ones to the front.
    n = 25_000
    images = np.zeros((n, 1, 1, 1), "uint8")
    ds = data.load_images((images, np.arange(n)), batch_size=1000, labels=True)
    epochs = [np.concatenate([b[1] for b in _epoch(ds, e)]) for e in (0, 1)]
    for ids in epochs:
        assert len(ids) == len(set(ids.tolist())) == n  # each example once
    first = epochs[0][:1000]
    assert (first >= 20_000).sum() > 100  # mixed over the whole dataset
    assert not np.array_equal(epochs[0], epochs[1])
    # A function of (seed, epoch) alone: another dataset, the same order.
    again = data.load_images((images, np.arange(n)), batch_size=1000, labels=True)
    np.testing.assert_array_equal(
        np.concatenate([b[1] for b in _epoch(again, 1)]), epochs[1]
    )
    unshuffled = data.load_images(
        (images, np.arange(n)), batch_size=1000, labels=True, shuffle=False
    )
    ordered = np.concatenate([b[1] for b in _epoch(unshuffled, 1)])
    np.testing.assert_array_equal(ordered, np.arange(n))


def test_xflip_mirrors_half_the_images_keyed_by_seed_and_epoch():
    images = np.zeros((200, 2, 2, 1), "uint8")
    images[:, :, 0] = 255  # left column white
    ds = data.load_images(images, batch_size=50, xflip=True, seed=4)
    epochs = [np.concatenate(_epoch(ds, e)) for e in (0, 1)]
    for batch in epochs:
        flipped = batch[:, 0, 0, 0] == -1.0  # left column now black
        np.testing.assert_array_equal(batch[flipped, 0, 1, 0], 1.0)
        np.testing.assert_array_equal(batch[~flipped, 0, 1, 0], -1.0)
        assert 60 < flipped.sum() < 140
    assert not np.array_equal(epochs[0], epochs[1])
    same = data.load_images(images, batch_size=50, xflip=True, seed=4)
    np.testing.assert_array_equal(np.concatenate(_epoch(same, 0)), epochs[0])
    plain = data.load_images(images, batch_size=50)
    assert np.all(np.concatenate([b for b in plain.as_numpy_iterator()])[:, 0, 0] == 1)


def test_flat_folder_read_recursively_in_any_format_with_bad_files_skipped(tmp_path):
    rows, cols = np.mgrid[0:12, 0:12]  # smooth, so that jpg keeps it
    rgb = np.stack([rows * 20, cols * 20, rows + cols + 100], -1).astype("uint8")
    _save(tmp_path / "a.png", rgb)
    _save(tmp_path / "nested" / "deeper" / "b.bmp", rgb)
    _save(tmp_path / "c.webp", rgb, lossless=True)
    _save(tmp_path / "d.jpg", rgb, quality=95)
    rgba = np.concatenate([rgb, np.full((12, 12, 1), 7, "uint8")], axis=-1)
    _save(tmp_path / "e.png", rgba)
    (tmp_path / "notes.txt").write_text("not an image")
    (tmp_path / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    with pytest.warns(UserWarning, match=r"Skipped 2 of the 7 files .*broken\.png"):
        ds, info = data.load_images(
            str(tmp_path), image_size=12, batch_size=5, shuffle=False, return_info=True
        )
    assert info["source"] == "folder" and info["num_examples"] == 5
    assert info["num_classes"] is None and info["image_shape"] == (12, 12, 3)
    (batch,) = list(ds.as_numpy_iterator())
    expected = rgb.astype("float32") / 127.5 - 1
    # Sorted paths: a.png, c.webp, d.jpg, e.png, nested/deeper/b.bmp.
    for i in (0, 1, 3, 4):  # lossless formats, RGBA's alpha dropped
        np.testing.assert_allclose(batch[i], expected, atol=1e-6)
    assert np.abs(batch[2] - expected).mean() < 0.1  # jpg
    with pytest.raises(ValueError, match="has no labels.*subfolder"):
        data.load_images(str(tmp_path), image_size=12, batch_size=5, labels=True)


def test_grey_images_stay_grey_unless_channels_say_otherwise(tmp_path):
    grey = np.arange(64, dtype="uint8").reshape(8, 8)
    _save(tmp_path / "grey" / "a.png", grey)
    _save(tmp_path / "grey" / "b.png", grey)
    _, info = data.load_images(
        str(tmp_path / "grey"), image_size=8, batch_size=2, return_info=True
    )
    assert info["image_shape"] == (8, 8, 1)
    ds = data.load_images(
        str(tmp_path / "grey"), image_size=8, channels=3, batch_size=2, shuffle=False
    )
    batch = next(ds.as_numpy_iterator())
    assert batch.shape == (2, 8, 8, 3)
    np.testing.assert_array_equal(batch[..., 0], batch[..., 2])
    _save(tmp_path / "grey" / "c.png", np.full((8, 8, 3), [255, 0, 0], "uint8"))
    ds, info = data.load_images(
        str(tmp_path / "grey"), image_size=8, batch_size=3, return_info=True
    )
    assert info["image_shape"] == (8, 8, 3)  # one colour image: all RGB
    ds = data.load_images(
        str(tmp_path / "grey"), image_size=8, channels=1, batch_size=3, shuffle=False
    )
    red = next(ds.as_numpy_iterator())[2]
    np.testing.assert_allclose(red, np.rint(0.299 * 255) / 127.5 - 1, atol=1e-6)


def test_class_subfolders_give_labels_and_class_names(tmp_path):
    for label, name in enumerate(["zebra", "ant"]):
        for i in range(3 + label):
            pixels = np.full((6, 6, 3), 40 * label, "uint8")
            _save(tmp_path / name / ("sub" if i else "") / f"{i}.png", pixels)
    ds, info = data.load_images(
        str(tmp_path), image_size=6, batch_size=7, labels=True, return_info=True
    )
    assert info["class_names"] == ["ant", "zebra"] and info["num_classes"] == 2
    images, labels = next(ds.as_numpy_iterator())
    assert sorted(labels.tolist()) == [0, 0, 0, 0, 1, 1, 1]
    # "ant" (label 0) holds the images of value 40.
    np.testing.assert_allclose(images[labels == 0], 40 / 127.5 - 1, atol=1e-6)


def test_resize_policies_crop_pad_or_squash_to_the_size():
    wide = np.zeros((1, 4, 8, 1), "uint8")
    wide[:, :, 4:] = 255  # right half white

    def first(**kwargs):
        ds = data.load_images(wide, batch_size=1, shuffle=False, **kwargs)
        return next(ds.as_numpy_iterator())[0, ..., 0]

    crop = first(image_size=4)  # the centred 4x4: columns 2 to 5
    np.testing.assert_array_equal(crop[:, :2], -1.0)
    np.testing.assert_array_equal(crop[:, 2:], 1.0)
    pad = first(image_size=8, resize="pad")  # black rows above and below
    np.testing.assert_array_equal(pad[:2], -1.0)
    np.testing.assert_array_equal(pad[6:], -1.0)
    np.testing.assert_array_equal(pad[2:6, 4:], 1.0)
    squash = first(image_size=(4, 4), resize="squash")
    assert squash.shape == (4, 4)
    assert squash[:, 0].max() < -0.9 and squash[:, 3].min() > 0.9
    tall = data.load_images(wide, batch_size=1, image_size=(6, 3), return_info=True)
    assert tall[1]["image_shape"] == (6, 3, 1)


def test_tfds_datasets_without_labels_under_mock_data():
    # celeb_a: 218x178 RGB images, attributes and landmarks, no label.
    with tfds.testing.mock_data(num_examples=6):
        ds, info = data.load_images(
            "celeb_a", source="tfds", image_size=16, batch_size=3, return_info=True
        )
        batches = list(ds.as_numpy_iterator())
        with pytest.raises(ValueError, match="no labels.*label_key"):
            data.load_images("celeb_a", source="tfds", image_size=16, labels=True)
        with pytest.raises(ValueError, match=r"image_key.*\['image'\]"):
            data.load_images("celeb_a", source="tfds", image_size=16, image_key="x")
        with pytest.raises(ValueError, match="label_key.*Received: label_key='image'"):
            data.load_images("mnist", source="tfds", labels=True, label_key="image")
    assert info["source"] == "tfds" and info["num_classes"] is None
    assert info["image_shape"] == (16, 16, 3) and info["num_examples"] == 6
    assert len(batches) == 2 and batches[0].shape == (3, 16, 16, 3)
    assert -1.0 <= batches[0].min() and batches[0].max() <= 1.0


def test_a_tf_data_dataset_is_read_into_memory_and_scaled():
    tf = pytest.importorskip("tensorflow")
    images = np.arange(4 * 2 * 2, dtype="uint8").reshape(4, 2, 2, 1) * 10
    pairs = tf.data.Dataset.from_tensor_slices((images, np.arange(4)))
    for given in (pairs, pairs.batch(3)):  # one by one, or batched
        ds, info = data.load_images(
            given, batch_size=4, labels=True, shuffle=False, return_info=True
        )
        x, y = next(ds.as_numpy_iterator())
        np.testing.assert_allclose(x, images / 127.5 - 1, atol=1e-6)
        assert y.tolist() == [0, 1, 2, 3] and info["source"] == "dataset"
    floats = tf.data.Dataset.from_tensor_slices(images.astype("float32") / 255)
    x = next(data.load_images(floats, batch_size=4, shuffle=False).as_numpy_iterator())
    np.testing.assert_allclose(x, images / 127.5 - 1, atol=1e-6)
    with pytest.raises(ValueError, match="Map it to one of those"):
        data.load_images(pairs.map(lambda x, y: {"image": x}), batch_size=2)


def test_bad_images_and_sizes_are_one_clear_error(tmp_path):
    with pytest.raises(ValueError, match="Received: an empty folder"):
        data.load_images(str(tmp_path), image_size=8)
    (tmp_path / "a.txt").write_text("text")
    with pytest.raises(ValueError, match=r"1 file\(s\), none of them a readable"):
        data.load_images(str(tmp_path), image_size=8)
    with pytest.raises(ValueError, match="positive int .* Received: image_size=0"):
        data.load_images(np.zeros((2, 4, 4)), image_size=0)
    with pytest.raises(ValueError, match="channels=1 .* Received: channels=4"):
        data.load_images(np.zeros((2, 4, 4)), channels=4)
    with pytest.raises(ValueError, match="Expected resize in"):
        data.load_images(np.zeros((2, 4, 4)), resize="stretch")
    with pytest.raises(ValueError, match="one-hot"):
        data.load_images((np.zeros((2, 4, 4)), np.eye(2)), batch_size=1)


@pytest.mark.parametrize("labels", [False, True])
def test_epoch_batches_yield_the_batches_of_the_tf_data_path(labels):
    # What load_images returns on JAX (no TensorFlow) against what it returns
    # here: the same batches for the same seed and epoch, flips included.
    images = np.random.default_rng(0).integers(0, 256, (103, 4, 3, 3), "uint8")
    ids = np.arange(103, dtype="int32")
    kwargs = {"batch_size": 10, "seed": 3, "xflip": True}
    ds = data.load_images((images, ids), labels=labels, **kwargs)
    python = EpochBatches(images, ids if labels else None, **kwargs)
    assert len(python) == 10 and data.is_normalized(python)
    with pytest.raises(IndexError):
        python[10]
    for epoch in (0, 1, 0):
        expected = _epoch(ds, epoch)
        data.set_epoch(epoch)
        try:
            got = [python[i] for i in range(len(python))]
        finally:
            data.set_epoch(0)
        for a, b in zip(got, expected, strict=True):
            for x, y in zip(a, b, strict=True) if labels else [(a, b)]:
                assert x.dtype == y.dtype and x.shape == y.shape
                np.testing.assert_array_equal(x, y)
    # The rest of an epoch after 4 batches (what a backup from the middle
    # of an epoch resumes): the same batches on both paths.
    expected = _epoch(ds, 1)[4:]
    rest = python.skip(4)
    assert len(rest) == 6 and data.is_normalized(rest)
    data.set_epoch(1)
    try:
        got = [rest[i] for i in range(len(rest))]
    finally:
        data.set_epoch(0)
    for found in (got, _epoch(ds.skip(4), 1)):
        for a, b in zip(found, expected, strict=True):
            for x, y in zip(a, b, strict=True) if labels else [(a, b)]:
                np.testing.assert_array_equal(x, y)
    with pytest.raises(IndexError):
        rest[6]
    with pytest.raises(ValueError, match=r"0 <= count < the 10 batches.*count=10"):
        python.skip(10)
    # The order's hash is the one KeyedDropout draws its masks with.
    x = np.arange(0, 2**32, 2**20 + 7, dtype="uint64").astype("uint32")
    np.testing.assert_array_equal(
        hash_uint32(x), keras.ops.convert_to_numpy(keyed_dropout.hash_uint32(x))
    )
    with pytest.raises(ValueError, match=r"Expected 1 <= batch_size <= the 103"):
        EpochBatches(images, batch_size=104)
    with pytest.raises(ValueError, match="Expected one label per image"):
        EpochBatches(images, ids[:5], batch_size=10)
    with pytest.raises(ValueError, match=r"uint8 or float32 in \[-1, 1\]"):
        EpochBatches(images.astype("float64"), batch_size=10)


def test_a_streamed_folder_gives_the_batches_held_in_memory(tmp_path, caplog):
    # Photos of other sizes and aspect ratios, two classes, one grey: read
    # from disk batch by batch, the same pixels, labels and order (flips
    # included) as the folder read into memory, on both input paths.
    rng = np.random.default_rng(0)
    for i in range(21):
        shape = [(9, 13, 3), (16, 10, 3), (11, 11)][i % 3]
        pixels = rng.integers(0, 256, shape).astype("uint8")
        _save(tmp_path / "photos" / f"class_{i % 2}" / f"{i:02d}.png", pixels)
    kwargs = dict(image_size=8, batch_size=4, labels=True, seed=3, xflip=True)
    folder = str(tmp_path / "photos")
    held, held_info = data.load_images(folder, return_info=True, **kwargs)
    with caplog.at_level(logging.WARNING, logger="keras_tpugan"):
        streamed, info = data.load_images(
            folder, stream=True, return_info=True, **kwargs
        )
    assert "streaming 21 images of shape (8, 8, 3)" in caplog.text
    assert info["streamed"] and not held_info["streamed"]
    assert info["memory_bytes"] == 0 and held_info["memory_bytes"] == 21 * 8 * 8 * 3
    assert {k: v for k, v in info.items() if k not in ("streamed", "memory_bytes")} == {
        k: v for k, v in held_info.items() if k not in ("streamed", "memory_bytes")
    }
    files = data.image_files.FolderImages(data.ImageSource(folder, image_size=8))
    python = EpochBatches(
        files, files.labels, **{k: kwargs[k] for k in ("batch_size", "seed", "xflip")}
    )
    for epoch in (0, 1):
        expected = _epoch(held, epoch)
        assert len(expected) == 5
        data.set_epoch(epoch)
        try:
            from_python = [python[i] for i in range(len(python))]
        finally:
            data.set_epoch(0)
        for got in (_epoch(streamed, epoch), from_python):
            for (x, y), (ex, ey) in zip(got, expected, strict=True):
                assert x.dtype == ex.dtype and x.shape == ex.shape == (4, 8, 8, 3)
                np.testing.assert_array_equal(x, ex)
                np.testing.assert_array_equal(y, ey)


def test_streaming_reads_folders_only_and_names_a_file_that_fails_later(tmp_path):
    with pytest.raises(ValueError, match="Expected a folder of images or a TFDS"):
        data.load_images(np.zeros((8, 4, 4, 1), "uint8"), batch_size=4, stream=True)
    with pytest.raises(ValueError, match="a TFDS split streams as batches"):
        data.read_images("cifar10", stream=True)
    with pytest.raises(ValueError, match="'cifar10' .*stream=False"):
        data.load_images("cifar10", batch_size=4, stream=True)
    pixels = np.random.default_rng(0).integers(0, 256, (16, 16, 3)).astype("uint8")
    for i in range(4):
        _save(tmp_path / f"{i}.png", pixels)
    (tmp_path / "notes.txt").write_text("not an image")
    # A file whose header reads but whose pixels are cut short.
    whole = (tmp_path / "3.png").read_bytes()
    (tmp_path / "3.png").write_bytes(whole[: len(whole) // 2])
    with pytest.warns(UserWarning, match=r"Skipped 1 of the 5 files .*notes\.txt"):
        files = data.image_files.FolderImages(
            data.ImageSource(str(tmp_path), image_size=8)
        )
    assert files.shape == (4, 8, 8, 3) and files.nbytes == 0
    assert files[np.array([2, 0])].shape == (2, 8, 8, 3)
    with pytest.raises(ValueError, match=r"Expected every streamed file.*3\.png"):
        files[np.array([3])]


class NumberedPhotos(tfds.core.GeneratorBasedBuilder):
    """A TFDS dataset made here: 60 photos of 12x10x3, the red channel of
    photo i is 4 * i, labelled i % 3, written in three files."""

    name = "keras_tpugan_numbered_photos"
    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
        features = tfds.features.FeaturesDict(
            {
                "image": tfds.features.Image(shape=(None, None, 3)),
                "label": tfds.features.ClassLabel(num_classes=3),
            }
        )
        return tfds.core.DatasetInfo(builder=self, features=features)

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples()}

    def _generate_examples(self):
        rng = np.random.default_rng(0)
        for i in range(60):
            image = rng.integers(0, 256, (12, 10, 3), dtype=np.uint8)
            image[..., 0] = 4 * i
            yield i, {"image": image, "label": i % 3}


def _ids(images):
    return np.round((images[:, 0, 0, 0] + 1) * 127.5 / 4).astype(int)


def test_a_tfds_split_streams_from_its_files_keyed_by_seed_and_epoch(tmp_path, caplog):
    builder = NumberedPhotos(data_dir=str(tmp_path))
    shards = tfds.download.DownloadConfig(num_shards=3)
    builder.download_and_prepare(download_config=shards)
    name = NumberedPhotos.name
    kwargs = dict(data_dir=str(tmp_path), image_size=8, batch_size=16, labels=True)

    def read(*a, **k):
        return [tuple(b) for b in data.load_images(name, *a, **kwargs, **k)]

    # Unshuffled: TFDS's read order, each 12x10 photo cropped and resized as
    # a held one is, bitwise.
    with caplog.at_level(logging.WARNING, logger="keras_tpugan"):
        streamed, info = data.load_images(
            name, **kwargs, shuffle=False, stream=True, return_info=True
        )
    assert "streaming 60 images of TFDS" in caplog.text and "3 file(s)" in caplog.text
    assert info["streamed"] and info["memory_bytes"] == 0
    assert streamed.options().autotune.enabled is False
    assert info["num_examples"] == 60 and info["image_shape"] == (8, 8, 3)
    assert info["num_classes"] == 3 and info["source"] == "tfds"
    held = read(shuffle=False)
    assert len(held) == len(streamed) == 3  # 60 // 16 batches
    for (x, y), (sx, sy) in zip(held, streamed, strict=True):
        np.testing.assert_array_equal(sx, x)
        np.testing.assert_array_equal(sy, y)
    # Shuffled: every epoch 48 different photos, their own labels, in an
    # order drawn from (seed, epoch): the same again, in a new pipeline (as
    # a resumed process builds) and whatever TensorFlow's global seed.
    try:
        orders = []
        for epoch in (0, 1):
            data.set_epoch(epoch)
            batches = read(stream=True, seed=5)
            ids = np.concatenate([_ids(x) for x, _ in batches])
            labels = np.concatenate([y for _, y in batches])
            assert len(set(ids)) == 48 and set(ids) <= set(range(60))
            np.testing.assert_array_equal(labels, ids % 3)
            orders.append(ids.tolist())
        assert orders[0] != orders[1]
        tf.random.set_seed(123)
        again = read(stream=True, seed=5)
        assert np.concatenate([_ids(x) for x, _ in again]).tolist() == orders[1]
        data.set_epoch(0)
        other_seed = np.concatenate([_ids(x) for x, _ in read(stream=True, seed=6)])
        assert other_seed.tolist() != orders[0]
        # xflip: each photo as stored or mirrored, half of them, keyed alike.
        plain = np.concatenate([x for x, _ in read(stream=True, seed=5)])
        flipped = np.concatenate([x for x, _ in read(stream=True, seed=5, xflip=True)])
        mirrored = np.all(flipped == plain[:, :, ::-1], axis=(1, 2, 3))
        assert np.all(mirrored | np.all(flipped == plain, axis=(1, 2, 3)))
        assert 10 < mirrored.sum() < 38
    finally:
        data.set_epoch(0)
        tf.random.set_seed(None)
    with pytest.raises(ValueError, match="Expected batch_size <= the 60 images"):
        data.load_images(
            name, data_dir=str(tmp_path), image_size=8, batch_size=64, stream=True
        )
    with pytest.raises(ValueError, match="Expected a TFDS dataset on disk to stream"):
        data.load_images("mnist", source="offline", batch_size=4, stream=True)


def _write_folder(root, count=6, size=(12, 10)):
    """A folder of `count` RGB images in two class subfolders."""
    for i in range(count):
        folder = root / ("a" if i % 2 else "b")
        folder.mkdir(parents=True, exist_ok=True)
        pixels = np.full((*size, 3), 20 * i, "uint8")
        Image.fromarray(pixels).save(folder / f"{i}.png")
    return str(root)


def test_an_image_source_is_checked_once_where_it_is_made(tmp_path):
    folder = _write_folder(tmp_path / "images")
    source = data.ImageSource(folder, image_size=8, channels=1, stream_files=True)
    assert (source.kind, source.image_size, source.streamed) == ("folder", (8, 8), True)
    with pytest.raises(ValueError, match="Expected image_size .* for the image folder"):
        data.ImageSource(folder)
    with pytest.raises(ValueError, match="Expected channels=1"):
        data.ImageSource("mnist", channels=2)
    with pytest.raises(ValueError, match="Expected resize in"):
        data.ImageSource("mnist", resize="stretch")
    with pytest.raises(ValueError, match="Expected split='train' for data with no"):
        data.ImageSource(folder, image_size=8, split="test")
    with pytest.raises(ValueError, match="Expected a folder of images with stream_f"):
        data.ImageSource("mnist", stream_files=True)
    with pytest.raises(ValueError, match="Expected a TFDS dataset name with stream_t"):
        data.ImageSource(folder, image_size=8, stream_tfds=True)
    # The keyword form's `stream` is the right one of the two for the data.
    assert data.ImageSource.of(folder, stream=True, image_size=8).stream_files
    assert data.ImageSource.of("mnist", stream=True).stream_tfds
    with pytest.raises(ValueError, match="only files are streamed"):
        data.ImageSource.of(np.zeros((4, 8, 8, 1)), stream=True)
    # Options go in the source, not beside it.
    assert data.ImageSource.of(source, image_size=None) is source
    with pytest.raises(ValueError, match=r"not beside it. Received: .*\['resize'\]"):
        data.load_images(source, resize="pad")
    with pytest.raises(ValueError, match=r"Received: \['size'\]. Check the names"):
        data.read_images(folder, size=8)


def test_load_images_reads_an_image_source_as_its_keyword_form(tmp_path):
    folder = _write_folder(tmp_path / "images")
    options = dict(image_size=8, channels=1, resize="pad")
    by_keywords = data.read_images(folder, **options)
    by_source = data.read_images(data.ImageSource(folder, **options))
    for a, b in zip(by_keywords[:2], by_source[:2], strict=True):
        np.testing.assert_array_equal(a, b)
    assert by_keywords[2] == by_source[2]
    assert by_source[0].shape == (6, 8, 8, 1)
    ds = data.load_images(
        data.ImageSource(folder, **options), batch_size=3, labels=True
    )
    images, labels = next(iter(ds))
    assert tuple(images.shape) == (3, 8, 8, 1) and tuple(labels.shape) == (3,)
    assert data.is_normalized(ds)
