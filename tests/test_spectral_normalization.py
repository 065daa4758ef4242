import keras
import numpy as np
import pytest

from keras_tpugan.spectral_normalization import StatelessSpectralNormalization

pytestmark = pytest.mark.both_backends


def _np(x):
    return keras.ops.convert_to_numpy(x)


def test_normalizes_in_inference_too_and_keeps_the_raw_kernel(tmp_path):
    """Slow on JAX (about 5-35 s): 30 eager calls of the layer in training."""
    keras.utils.set_random_seed(0)  # the kernel and the power iteration's start
    layer = StatelessSpectralNormalization(keras.layers.Dense(4))
    x = np.random.default_rng(0).normal(size=(5, 3)).astype("float32")
    layer(x, training=False)
    raw = _np(layer.kernel).copy()
    for _ in range(30):  # power iterations converge while training
        layer(x, training=True)
    np.testing.assert_array_equal(_np(layer.kernel), raw)
    sigma = np.linalg.svd(raw, compute_uv=False)[0]
    expected = x @ (raw / sigma) + _np(layer.layer.bias)
    np.testing.assert_allclose(_np(layer(x, training=False)), expected, atol=1e-5)
    np.testing.assert_allclose(_np(layer(x, training=True)), expected, atol=1e-5)
    # Saved and loaded, it is the same layer.
    model = keras.Sequential([keras.Input((3,)), layer])
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    np.testing.assert_allclose(_np(loaded(x)), expected, atol=1e-5)


def test_a_spectral_discriminator_infers_as_it_trains():
    from conftest import batches, random_images, tiny_gan

    gan = tiny_gan(d_norm="spectral")
    gan.fit(batches(random_images(8), 4), epochs=2, verbose=0)
    d, x = gan.discriminator, random_images(4, seed=3)
    # The step's view: stateless, training (its new vectors discarded).
    trained, _ = d.stateless_call(
        [v.value for v in d.trainable_variables],
        [v.value for v in d.non_trainable_variables],
        x,
        training=True,
    )
    np.testing.assert_allclose(
        _np(d(x, training=False)), _np(trained), rtol=1e-3, atol=1e-4
    )
