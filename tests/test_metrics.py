import hashlib
import json
import shutil

import numpy as np
import pytest

import keras_tpugan as ktg
from keras_tpugan import metrics
from keras_tpugan.metrics import classifier_cache, classifiers

pytestmark = pytest.mark.both_backends


@pytest.fixture(scope="module")
def outputs(classifier_dir):
    model, record = metrics.mnist_classifier(classifier_dir)
    train = ktg.data.offline_mnist("train")[0].astype("float32") / 127.5 - 1
    test = ktg.data.offline_mnist("test")[0].astype("float32") / 127.5 - 1
    noise = np.random.default_rng(0).uniform(-1, 1, (1000, 28, 28, 1))
    return record, {
        name: metrics.classifier_outputs(model, images)
        for name, images in (("train", train), ("test", test), ("noise", noise))
    }


def test_the_shipped_classifier_is_accurate_and_its_record_true(
    classifier_dir, outputs
):
    record, out = outputs
    assert metrics.classifier_path(classifier_dir) == metrics.SHIPPED_CLASSIFIER
    assert record["test_accuracy"] >= metrics.MIN_ACCURACY
    assert record["train_images"] == 4000 and record["test_images"] == 1000
    assert record["epochs"] == 12 and record["seed"] == 0  # mnist_classifier's
    # The record's accuracy is the model's on the held-out digits.
    labels = ktg.data.offline_mnist("test")[1]
    accuracy = np.mean(np.argmax(out["test"][1], axis=1) == labels)
    assert accuracy == pytest.approx(record["test_accuracy"], abs=1e-6)
    model, again = metrics.mnist_classifier(classifier_dir)
    assert again == record
    features, probabilities = model(np.zeros((2, 28, 28, 1), "float32"))
    assert features.shape == (2, 128) and probabilities.shape == (2, 10)


# The training is `_fit_classifier`'s Keras code, which the JAX pass runs in
# the data-classifier test below.
@pytest.mark.tensorflow_only
def test_a_rebuilt_classifier_is_cached_and_preferred_to_the_shipped_one(tmp_path):
    """Slow (about 15-25 s): trains the metric network for one epoch."""
    model, record = metrics.mnist_classifier(tmp_path, rebuild=True, epochs=1)
    path = metrics.classifier_path(tmp_path)
    assert path == str(tmp_path / "mnist_classifier_v1.keras")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "mnist_classifier_v1.json",
        "mnist_classifier_v1.keras",
    ]
    assert record["epochs"] == 1 and record["train_images"] == 4000
    assert record["test_accuracy"] > 0.5  # one epoch learns the digits
    loaded, again = metrics.mnist_classifier(tmp_path)
    assert again == record
    np.testing.assert_array_equal(loaded.get_weights()[-1], model.get_weights()[-1])


@pytest.mark.full
def test_a_rebuild_with_the_defaults_is_as_accurate_as_the_shipped_one(tmp_path):
    """Slow (about 2 minutes): the shipped classifier's training, in full."""
    _, record = metrics.mnist_classifier(tmp_path, rebuild=True)
    assert record["test_accuracy"] >= metrics.MIN_ACCURACY
    assert record["epochs"] == 12 and record["seed"] == 0


def test_fcd_separates_real_from_noise(outputs):
    _, out = outputs
    floor = metrics.frechet_distance(out["train"][0], out["test"][0])
    noise = metrics.frechet_distance(out["train"][0], out["noise"][0])
    assert 0 <= floor < noise / 20


def test_classifier_score_of_real_digits_is_above_9(outputs):
    _, out = outputs
    assert 9.0 < metrics.classifier_score(out["test"][1]) <= 10.0
    assert metrics.classifier_score(out["noise"][1]) < 3.0


def test_kernel_distance_separates_real_from_noise(outputs):
    _, out = outputs
    real = metrics.kernel_distance(out["train"][0], out["test"][0])
    noise = metrics.kernel_distance(out["train"][0], out["noise"][0])
    assert abs(real) < noise / 20


def test_kernel_reference_terms_give_the_same_kid():
    rng = np.random.default_rng(0)
    for size_a, size_b in ((300, 100), (100, 300), (100, 100), (40, 60)):
        a, b = rng.normal(size=(size_a, 8)), rng.normal(size=(size_b, 8)) + 0.5
        terms = metrics.kernel_reference_terms(a, size_b, subset_size=50, seed=3)
        # One term per draw; a set drawn whole has the same term in each.
        assert len(terms) == 10 and (size_a > 50 or len(set(terms)) == 1)
        whole = metrics.kernel_distance(a, b, subset_size=50, seed=3)
        given = metrics.kernel_distance(
            a, b, subset_size=50, seed=3, reference_terms=terms
        )
        assert given == whole > 0.05
    # Both sets whole: one draw.
    assert len(metrics.kernel_reference_terms(a, 40, subset_size=50)) == 1


def test_kernel_distance_is_the_mean_over_its_subset_draws():
    # KID's recipe written out draw by draw: the unbiased MMD^2 of each pair
    # of subsets, averaged. A set that fits in one subset is drawn whole.
    def kernel(x, y):
        return (x @ y.T / x.shape[1] + 1.0) ** 3

    def within(x):
        k = kernel(x, x)
        return (k.sum() - np.trace(k)) / (len(x) * (len(x) - 1))

    rng = np.random.default_rng(1)
    for size_a, size_b in ((3000, 400), (400, 3000), (1500, 1200), (300, 300)):
        a = rng.normal(size=(size_a, 6))
        b = rng.normal(size=(size_b, 6)) * 1.1 + 0.2
        m = min(500, size_a, size_b)
        draws = np.random.default_rng(4)
        values = []
        for _ in range(1 if m == size_a == size_b else 10):
            x = a[draws.choice(size_a, m, replace=False)]
            y = b[draws.choice(size_b, m, replace=False)]
            values.append(within(x) + within(y) - 2.0 * kernel(x, y).mean())
        kid = metrics.kernel_distance(a, b, subset_size=500, seed=4)
        assert kid == pytest.approx(np.mean(values), rel=1e-9, abs=1e-12)
        assert kid > 0.01


def test_metric_formulas_on_known_inputs():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(2000, 3))
    assert metrics.frechet_distance(a, a) == pytest.approx(0.0, abs=1e-4)
    # Shifting the mean by 2 in each of 3 dims adds 12.
    assert metrics.frechet_distance(a, a + 2.0) == pytest.approx(12.0, abs=1e-3)
    # Gaussians with covariances diag(1, 4) and diag(4, 1): the trace term
    # is (1 + 4) * 2 - 2 * 2 * sqrt(1 * 4) = 2.
    b = rng.normal(size=(200_000, 2))
    stretched = b * [1.0, 2.0], b * [2.0, 1.0]
    assert metrics.frechet_distance(*stretched) == pytest.approx(2.0, abs=0.05)
    # Fewer samples than features (singular covariances): finite and >= 0.
    few = rng.normal(size=(16, 64)), rng.normal(size=(16, 64))
    assert 0.0 <= metrics.frechet_distance(*few) < np.inf
    with pytest.raises(ValueError, match="at least 2 feature vectors.*: 5 and 1"):
        metrics.frechet_distance(few[0][:5], few[1][:1])
    # KID: the unbiased MMD^2 with the kernel (x.y / d + 1)^3, written out.
    x, y = rng.normal(size=(40, 3)), rng.normal(0.5, 1.0, size=(40, 3))
    kernel = {
        pair: (p @ q.T / 3 + 1) ** 3
        for pair, (p, q) in {"xx": (x, x), "yy": (y, y), "xy": (x, y)}.items()
    }
    mmd = sum((kernel[k].sum() - np.trace(kernel[k])) / (40 * 39) for k in ("xx", "yy"))
    mmd -= 2 * kernel["xy"].mean()
    assert metrics.kernel_distance(x, y) == pytest.approx(mmd, rel=1e-12)
    assert metrics.kernel_distance(x, y, subset_size=20) != pytest.approx(mmd)
    uniform = np.full((10, 10), 0.1)
    assert metrics.classifier_score(uniform) == pytest.approx(1.0)
    assert metrics.classifier_score(np.eye(10)) == pytest.approx(10.0, rel=1e-6)


def test_precision_and_recall_on_known_sets():
    rng = np.random.default_rng(0)
    real = rng.normal(size=(1000, 8))
    # The same distribution: most of each set lies in the other's manifold.
    same = metrics.precision_recall(real, rng.normal(size=(1000, 8)))
    assert min(same) > 0.7
    # A collapsed generator (a tenth of the spread): all of it looks real,
    # none of the real data is covered.
    collapsed = metrics.precision_recall(real, 0.1 * rng.normal(size=(1000, 8)))
    assert collapsed[0] > 0.99 and collapsed[1] < 0.05
    # Far away: neither.
    assert metrics.precision_recall(real, real + 100.0) == (0.0, 0.0)
    # Identical sets: each point lies in its own ball.
    assert metrics.precision_recall(real, real[::-1]) == (1.0, 1.0)
    # Hand-checked on a line: real {0, 1, 2, 3, 4} (radii to the third
    # neighbour 3, 2, 2, 2, 3) and generated {0, 0.1, 0.2, 0.3, 0.4} (radii
    # 0.3, 0.2, 0.2, 0.2, 0.3): every generated point lies within 3 of 0;
    # of the real points only 0 lies in a generated ball.
    line = np.arange(5.0)[:, None]
    assert metrics.precision_recall(line, line / 10) == (1.0, 0.2)
    with pytest.raises(ValueError, match="more than k=3 .* 3 real and 10 generated"):
        metrics.precision_recall(real[:3], real[:10])


def test_offline_reference_is_computed_once_per_classifier_file(
    classifier_dir, outputs, tmp_path
):
    _, out = outputs
    model, _ = metrics.mnist_classifier(classifier_dir)
    features, floor = metrics.offline_mnist_reference(model, classifier_dir)
    np.testing.assert_allclose(features, out["train"][0], rtol=1e-6)
    assert floor["fcd_real_floor"] == pytest.approx(
        metrics.frechet_distance(out["train"][0], out["test"][0]), rel=1e-6
    )
    assert floor["classifier_score_real"] == pytest.approx(
        metrics.classifier_score(out["test"][1]), rel=1e-6
    )
    again, floor_again = metrics.offline_mnist_reference(model, classifier_dir)
    assert again is features and floor_again == floor
    # Another classifier file (a rebuild, another folder) is scored afresh.
    path = metrics.classifier_path(classifier_dir)
    shutil.copy(path, tmp_path)
    shutil.copy(path.replace(".keras", ".json"), tmp_path)
    fresh, _ = metrics.offline_mnist_reference(model, tmp_path)
    assert fresh is not features
    np.testing.assert_array_equal(fresh, features)


def test_a_failed_cache_write_leaves_no_file(tmp_path, monkeypatch):
    """The classifier and its record are written under names of the
    process's and renamed into place: a write that fails leaves neither."""
    tiny = ktg.models.dcgan_discriminator(width=8)  # the write path only

    def trained(*args):
        return tiny, 0.5

    def disk_full(*args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(classifiers, "_fit_classifier", trained)
    monkeypatch.setattr(classifier_cache.json, "dump", disk_full)
    images = np.zeros((20, 28, 28, 1), "uint8")
    with pytest.raises(OSError, match="No space left"):
        metrics.data_classifier(images, np.arange(20) % 2, tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("damage", ["truncated model", "garbled record", "torn pair"])
def test_a_damaged_cached_classifier_is_trained_again(
    tmp_path, monkeypatch, caplog, damage
):
    """A cache cut by a kill (a truncated model file, a garbled record, a
    new model beside an old record) is never loaded: one warning line
    names it and the classifier is trained again; the mnist classifier
    falls back to the shipped one."""
    fits = []

    def trained(*args):
        fits.append(1)
        return ktg.models.dcgan_discriminator(width=8), 0.5

    monkeypatch.setattr(classifiers, "_fit_classifier", trained)
    images = np.zeros((20, 28, 28, 1), "uint8")
    labels = np.arange(20) % 2
    metrics.data_classifier(images, labels, tmp_path)
    (model_file,) = tmp_path.glob("*.keras")
    record_file = model_file.with_suffix(".json")
    record = json.loads(record_file.read_text())
    assert record["sha256"] == hashlib.sha256(model_file.read_bytes()).hexdigest()
    metrics.data_classifier(images, labels, tmp_path)
    assert len(fits) == 1  # whole: loaded
    if damage == "truncated model":
        model_file.write_bytes(model_file.read_bytes()[:1000])
    elif damage == "garbled record":
        record_file.write_text(record_file.read_text()[:30])
    else:
        record_file.write_text(json.dumps(dict(record, sha256="0" * 64)))
    with caplog.at_level("WARNING", logger="keras_tpugan"):
        model, again = metrics.data_classifier(images, labels, tmp_path)
    assert len(fits) == 2
    (warning,) = [
        r.getMessage() for r in caplog.records if "not whole" in r.getMessage()
    ]
    assert str(model_file) in warning and "trained again" in warning
    assert again["sha256"] == hashlib.sha256(model_file.read_bytes()).hexdigest()
    assert model.count_params() > 0
    # The MNIST classifier's cache: a damaged one is not preferred.
    shutil.copy(model_file, tmp_path / "mnist_classifier_v1.keras")
    (tmp_path / "mnist_classifier_v1.json").write_text(
        json.dumps(dict(again, sha256="1" * 64))
    )
    assert metrics.classifier_path(tmp_path) == metrics.SHIPPED_CLASSIFIER
    shutil.copy(record_file, tmp_path / "mnist_classifier_v1.json")
    assert metrics.classifier_path(tmp_path) == str(
        tmp_path / "mnist_classifier_v1.keras"
    )


def test_a_classifier_of_the_runs_own_labelled_images_is_trained_and_cached(tmp_path):
    """Slow (about 10-25 s): trains the metric network on 120 colour images."""
    rng = np.random.default_rng(0)
    labels = np.arange(120) % 3
    images = rng.integers(0, 40, (120, 32, 32, 3)).astype("uint8")
    images[np.arange(120), :, :, labels] += 200  # each class its own colour
    model, record = metrics.data_classifier(images, labels, tmp_path, epochs=3)
    assert record["num_classes"] == 3 and record["test_images"] == 12
    assert record["test_accuracy"] >= 0.9  # the colours are easy to tell apart
    features, probabilities = metrics.classifier_outputs(
        model, images[:5].astype("float32") / 127.5 - 1
    )
    assert features.shape == (5, 128) and probabilities.shape == (5, 3)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == 2 and files[0].startswith("data_classifier_")
    # Cached by a hash of the data: the same data loads it; other data trains anew.
    again, _ = metrics.data_classifier(images, labels, tmp_path, epochs=3)
    np.testing.assert_array_equal(again.get_weights()[-1], model.get_weights()[-1])
    assert len(list(tmp_path.iterdir())) == 2
    metrics.data_classifier(images, (labels + 1) % 3, tmp_path, epochs=1)
    assert len(list(tmp_path.iterdir())) == 4
    test = metrics.held_out_indices(120)
    assert len(test) == 12 and np.array_equal(test, metrics.held_out_indices(120))
    with pytest.raises(ValueError, match="at least 2 classes"):
        metrics.data_classifier(images, np.zeros(120), tmp_path)


def test_the_classifier_predicts_and_trains_compiled_with_the_same_outputs(
    tmp_path, classifier_dir, monkeypatch
):
    """Its augmentation, marked unfit for XLA by Keras, is left out of the
    network that computes the scores (an identity in inference), so on JAX
    the scores are compiled; on JAX the training step is compiled too."""
    import keras

    model, _ = metrics.mnist_classifier(classifier_dir)
    assert any(isinstance(x, keras.layers.RandomTranslation) for x in model.layers)
    network = classifiers._without_augmentation(model)
    assert not any(
        isinstance(x, keras.layers.RandomTranslation) for x in network.layers
    )
    assert network.count_params() == model.count_params()
    assert classifiers._without_augmentation(model) is network  # traced once
    if keras.backend.backend() == "jax":  # (TensorFlow: XLA as Keras decides)
        assert network.jit_compile
    images = np.random.default_rng(0).uniform(-1, 1, (32, 28, 28, 1))
    features, probabilities = metrics.classifier_outputs(model, images)
    whole = model(images.astype("float32"), training=False)
    np.testing.assert_allclose(
        features, keras.ops.convert_to_numpy(whole[0]), atol=1e-5
    )
    np.testing.assert_allclose(
        probabilities, keras.ops.convert_to_numpy(whole[1]), atol=1e-6
    )
    # Any other model is used as it is.
    plain = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    assert classifiers._without_augmentation(plain) is plain
    # The data classifier's training step: compiled on JAX.
    compiled = []
    fit = keras.Model.fit

    def recorded_fit(self, *args, **kwargs):
        compiled.append(self.jit_compile)
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(keras.Model, "fit", recorded_fit)
    labels = np.arange(20) % 2
    pixels = np.random.default_rng(1).integers(0, 255, (20, 16, 16, 1)).astype("uint8")
    metrics.data_classifier(pixels, labels, tmp_path, epochs=1)
    assert compiled == [keras.backend.backend() == "jax"]
