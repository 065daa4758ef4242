"""The metric classifiers: the MNIST classifier and classifiers of a run's
own classes.

An MNIST classifier trained on the offline subset (seeded; shipped with the
package with its test accuracy, so that every machine scores with the same
weights; `mnist_classifier(rebuild=True)` trains it anew into the cache)
provides the features and class probabilities the scores
(`keras_tpugan.metrics.scores`) are computed on. For any other labelled
data, `data_classifier` trains the same network on the run's own images
(cached by their hash). The standard FID network, for any images, is
`fid_inception.FIDInception`.
"""

import hashlib
import json
import logging
import os
import weakref

import keras
import numpy as np

from keras_tpugan import data
from keras_tpugan.metrics.classifier_cache import (
    cached_classifier,
    record_path,
    save_classifier,
)
from keras_tpugan.metrics.scores import classifier_score, frechet_distance

logger = logging.getLogger("keras_tpugan")

CLASSIFIER_VERSION = 1
MIN_ACCURACY = 0.97
# The classifier `mnist_classifier(rebuild=True)` trains with its defaults,
# shipped (written by `mnist_classifier("keras_tpugan/assets", rebuild=True)`).
CLASSIFIER_FILE = f"mnist_classifier_v{CLASSIFIER_VERSION}.keras"
SHIPPED_CLASSIFIER = os.path.join(
    os.path.dirname(os.path.dirname(__file__)), "assets", CLASSIFIER_FILE
)


def cache_dir():
    """The cache folder: `$KERAS_TPUGAN_CACHE`, else `~/.cache/keras_tpugan`."""
    default = os.path.join(os.path.expanduser("~"), ".cache", "keras_tpugan")
    return os.environ.get("KERAS_TPUGAN_CACHE", default)


def mnist_classifier(directory=None, rebuild=False, epochs=12, seed=0):
    """Returns the MNIST metric classifier and its record.

    The classifier was trained on the offline subset's 4,000 train digits
    and tested on its 1,000 held-out digits. The package ships one, trained
    with the defaults below, so that scores are comparable across machines
    and need no training. `rebuild=True` trains one anew and caches it in
    `directory` as `mnist_classifier_v1.keras` with a JSON record (test
    accuracy, seed); a cached one is then loaded in place of the shipped
    one. It is float32 whatever the global dtype policy.

    Args:
        directory: Cache folder (default: `cache_dir()`).
        rebuild: Train again and cache the result.
        epochs: Training epochs (when training).
        seed: Seed of the weights, the shuffling and the augmentation (when
            training).

    Returns:
        `(model, record)`: a `keras.Model` from images in [-1, 1] to
        `[features, probabilities]`, and a dict with `test_accuracy`.

    Example:

    >>> model, record = mnist_classifier()
    >>> record["test_accuracy"] >= 0.97
    True
    """
    if not rebuild:
        path = classifier_path(directory)
        with open(record_path(path)) as f:
            return keras.saving.load_model(path), json.load(f)
    path = _cached_classifier_path(directory)
    model, record = _train_classifier(epochs, seed)
    record = save_classifier(model, record, path)
    logger.warning(
        "trained the MNIST metric classifier: test accuracy %.4f (cached in %s)",
        record["test_accuracy"],
        path,
    )
    return model, record


def classifier_path(directory=None):
    """The file `mnist_classifier` loads its classifier from.

    Args:
        directory: Cache folder (default: `cache_dir()`).

    Returns:
        The path of the `.keras` file: the one cached in `directory` by a
        rebuild when there is one, else the one shipped with the package.
        Its record is the same path ending in `.json`.
    """
    cached = _cached_classifier_path(directory)
    if cached_classifier(cached, load=False) is not None:
        return cached
    return SHIPPED_CLASSIFIER


def _cached_classifier_path(directory):
    directory = directory or cache_dir()
    return os.path.join(directory, CLASSIFIER_FILE)


def offline_mnist_reference(model, directory=None):
    """The offline subset's real features and floors, computed once a process.

    The features of the 4,000 train digits and the floors (FCD and
    classifier score of the 1,000 held-out digits) depend only on the
    classifier's weights: every `QualityMetrics` of a sweep or a tuner
    search reuses them while the cached classifier file is unchanged.

    Args:
        model: The classifier `mnist_classifier(directory)` returned.
        directory: Its cache folder (default: `cache_dir()`).

    Returns:
        `(real_features, floor)`: a float64 array `(4000, 128)` and a dict
        with `fcd_real_floor` and `classifier_score_real`.
    """
    path = classifier_path(directory)
    stat = os.stat(path)
    key = (os.path.realpath(path), stat.st_mtime_ns, stat.st_size)
    if key not in _REFERENCES:
        real = data.to_unit(data.offline_mnist("train")[0])
        held_out = data.to_unit(data.offline_mnist("test")[0])
        real_features, _ = classifier_outputs(model, real)
        held_features, held_probs = classifier_outputs(model, held_out)
        floor = {
            "fcd_real_floor": frechet_distance(real_features, held_features),
            "classifier_score_real": classifier_score(held_probs),
        }
        real_features.flags.writeable = False
        _REFERENCES[key] = real_features, floor
    real_features, floor = _REFERENCES[key]
    return real_features, dict(floor)


# offline_mnist_reference's results, by classifier file.
_REFERENCES = {}


def _train_classifier(epochs, seed):
    keras.utils.set_random_seed(seed)
    x_train, y_train = data.offline_mnist("train")
    x_test, y_test = data.offline_mnist("test")
    x_train, x_test = data.to_unit(x_train), data.to_unit(x_test)
    model, accuracy = _fit_classifier(
        x_train, y_train, x_test, y_test, 10, epochs, seed, "mnist_classifier"
    )
    record = {
        "test_accuracy": accuracy,
        "train_images": len(x_train),
        "test_images": len(x_test),
        "epochs": epochs,
        "seed": seed,
        "version": CLASSIFIER_VERSION,
    }
    return model, record


def _fit_classifier(x_train, y_train, x_test, y_test, num_classes, epochs, seed, name):
    """The metric network: a small CNN, trained; `(model, test accuracy)`."""
    layers = keras.layers
    inputs = keras.Input(x_train.shape[1:], dtype="float32")
    augmentation = layers.RandomTranslation(
        0.1, 0.1, fill_value=-1.0, seed=seed, dtype="float32"
    )
    if keras.backend.backend() == "jax":
        # Keras marks the layer unfit for XLA (TensorFlow's image transform
        # has no XLA kernel), which leaves the whole model's training step
        # uncompiled; on JAX the transform is jax.numpy and compiles.
        augmentation.supports_jit = True
    h = augmentation(inputs)
    # Two blocks down to 7x7 or 8x8 for 28- and 32-pixel images; one more
    # per doubling of the side above 32.
    blocks = 2 + max(0, int(np.log2(max(x_train.shape[1:3]) / 32)))
    for filters in (32, 64, 128, 128, 128)[:blocks]:
        h = layers.Conv2D(
            filters, 3, padding="same", activation="relu", dtype="float32"
        )(h)
        h = layers.Conv2D(
            filters, 3, padding="same", activation="relu", dtype="float32"
        )(h)
        h = layers.MaxPooling2D(dtype="float32")(h)
    h = layers.Flatten(dtype="float32")(h)
    features = layers.Dense(128, activation="relu", name="features", dtype="float32")(h)
    dropped = layers.Dropout(0.3, seed=seed, dtype="float32")(features)
    logits = layers.Dense(num_classes, dtype="float32")(dropped)
    probabilities = layers.Softmax(name="probabilities", dtype="float32")(logits)
    trainer = keras.Model(inputs, probabilities)
    trainer.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    trainer.fit(x_train, y_train, batch_size=64, epochs=epochs, verbose=0)
    accuracy = float(trainer.evaluate(x_test, y_test, verbose=0)[1])
    return keras.Model(inputs, [features, probabilities], name=name), accuracy


def held_out_indices(n, seed=0):
    """The tenth of `n` images `data_classifier` holds out (at least one).

    Args:
        n: Number of images.
        seed: The classifier's seed.

    Returns:
        Sorted int indices.
    """
    order = np.random.default_rng(seed).permutation(n)
    return np.sort(order[: max(1, n // 10)])


def data_classifier(images, labels, directory=None, epochs=12, seed=0):
    """A metric classifier trained on a run's own labelled images, cached.

    The FCD idea for any data: the same small CNN as `mnist_classifier`,
    trained on these images (any size and channels) to tell their classes
    apart; its penultimate features and probabilities then give the FCD,
    the classifier score (its ceiling is the number of classes) and KID of
    generated images against these. A fixed tenth of the images (at least
    one) is held out to measure its accuracy. It is cached in `directory`
    under a hash of the images, labels and settings, so the runs of one
    dataset share one classifier.

    Args:
        images: uint8 pixels or float images in [-1, 1], `(n, h, w, c)`.
        labels: Class ids `(n,)` in `[0, num_classes)`.
        directory: Cache folder (default: `cache_dir()`).
        epochs: Training epochs.
        seed: Seed of the split, the weights and the augmentation.

    Returns:
        `(model, record)`: a model from images in [-1, 1] to `[features,
        probabilities]`, and a dict with `test_accuracy` and `num_classes`.
    """
    images = np.asarray(images)
    labels = np.asarray(labels).astype("int32").reshape(-1)
    num_classes = int(labels.max()) + 1
    if len(images) < 2 or len(labels) != len(images) or num_classes < 2:
        raise ValueError(
            "Expected at least 2 labelled images of at least 2 classes to "
            f"train a metric classifier. Received: {len(images)} images, "
            f"{len(labels)} labels, {num_classes} class(es)."
        )
    digest = hashlib.sha256()
    for part in (images, labels):
        digest.update(str((part.shape, part.dtype)).encode())
        digest.update(np.ascontiguousarray(part).tobytes())
    digest.update(f"{epochs},{seed},{CLASSIFIER_VERSION}".encode())
    directory = directory or cache_dir()
    path = os.path.join(directory, f"data_classifier_{digest.hexdigest()[:16]}.keras")
    cached = cached_classifier(path)
    if cached is not None:
        return cached
    keras.utils.set_random_seed(seed)
    x = data.to_unit(images)
    test = held_out_indices(len(x), seed)
    train = np.setdiff1d(np.arange(len(x)), test)
    model, accuracy = _fit_classifier(
        x[train],
        labels[train],
        x[test],
        labels[test],
        num_classes,
        epochs,
        seed,
        "data_classifier",
    )
    record = {
        "test_accuracy": accuracy,
        "train_images": len(train),
        "test_images": len(test),
        "num_classes": num_classes,
        "image_shape": list(images.shape[1:]),
        "epochs": epochs,
        "seed": seed,
        "version": CLASSIFIER_VERSION,
    }
    record = save_classifier(model, record, path)
    logger.warning(
        "trained a metric classifier on the run's %d images of %d classes: test "
        "accuracy %.4f (cached in %s)",
        len(images),
        num_classes,
        accuracy,
        path,
    )
    return model, record


def classifier_outputs(model, images, batch_size=500):
    """Features and class probabilities of images in [-1, 1].

    Args:
        model: A model returned by `mnist_classifier`.
        images: Array `(n, 28, 28, 1)` in [-1, 1].
        batch_size: Images per call.

    Returns:
        `(features, probabilities)` as float64 numpy arrays.
    """
    network = _without_augmentation(model)
    features, probabilities = [], []
    for i in range(0, len(images), batch_size):
        # Keras's compiled predict step: a traced function (a third less
        # time than calling the layers eagerly on TensorFlow).
        batch = np.asarray(images[i : i + batch_size], "float32")
        f, p = network.predict_on_batch(batch)
        features.append(keras.ops.convert_to_numpy(f))
        probabilities.append(keras.ops.convert_to_numpy(p))
    return (
        np.concatenate(features).astype("float64"),
        np.concatenate(probabilities).astype("float64"),
    )


def _without_augmentation(model):
    """The classifier from after its training augmentation to its outputs.

    The augmentation (`RandomTranslation`) passes images through unchanged
    in inference, but Keras marks it unfit for XLA, so a model holding it
    predicts without `jit_compile`: on JAX, one operation at a time. The
    model from the augmentation's output on computes the same features and
    probabilities and compiles as a whole on JAX. Kept per model, so its
    predict step is traced once. Any other model is returned as it is.
    """
    if model not in _INFERENCE:
        augmentation = [
            layer for layer in model.layers if isinstance(layer, _AUGMENTATION)
        ]
        network = model
        if len(augmentation) == 1 and augmentation[0].input is model.inputs[0]:
            network = keras.Model(
                augmentation[0].output, model.outputs, name=model.name
            )
        _INFERENCE[model] = network
    return _INFERENCE[model]


_AUGMENTATION = keras.layers.RandomTranslation
# _without_augmentation's models, by classifier (dropped with it).
_INFERENCE = weakref.WeakKeyDictionary()
