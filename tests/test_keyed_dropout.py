"""KeyedDropout: masks keyed by (key, global example, feature)."""

import keras
import numpy as np
import pytest
from conftest import batches, random_images, tiny_gan

import keras_tpugan as ktg
from keras_tpugan import keyed_dropout
from keras_tpugan.runs.config import TrainConfig

pytestmark = pytest.mark.both_backends


def _numpy_hash(x):
    # The same finalizer written with NumPy's wrapping uint32 arithmetic: the
    # backend's numbers must be these, so TensorFlow and JAX agree.
    x = np.asarray(x, np.uint32)
    x ^= x >> np.uint32(16)
    x *= np.uint32(0x7FEB352D)
    x ^= x >> np.uint32(15)
    x *= np.uint32(0x846CA68B)
    x ^= x >> np.uint32(16)
    return x


def _layer(rate, key, first):
    layer = ktg.KeyedDropout(rate)
    layer.build((None, 3, 3, 2))
    layer.key.assign(np.array([key, first], "int32"))
    return layer


def test_uniforms_are_the_reference_hash_on_this_backend():
    counters = np.arange(1000, dtype=np.uint32) * np.uint32(7919)
    got = keras.ops.convert_to_numpy(keyed_dropout.keyed_uniform(12345, counters))
    bits = _numpy_hash(_numpy_hash(counters) ^ np.uint32(12345))
    np.testing.assert_array_equal(got, (bits >> np.uint32(8)) / np.float32(2**24))
    assert 0.45 < got.mean() < 0.55 and got.min() >= 0 and got.max() < 1


def test_mask_depends_on_the_global_example_not_the_split():
    x = np.random.default_rng(0).normal(size=(4, 3, 3, 2)).astype("float32")
    whole = _layer(0.5, 7, 0)(x, training=True)
    first_half = _layer(0.5, 7, 0)(x[:2], training=True)
    second_half = _layer(0.5, 7, 2)(x[2:], training=True)
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(whole),
        np.concatenate([first_half, second_half]),
    )
    other_key = keras.ops.convert_to_numpy(_layer(0.5, 8, 0)(x, training=True))
    assert not np.array_equal(other_key, whole)


def test_drops_the_rate_scales_the_rest_and_is_off_in_inference():
    x = np.ones((8, 3, 3, 2), "float32")
    layer = _layer(0.3, 99, 0)
    y = keras.ops.convert_to_numpy(layer(x, training=True))
    np.testing.assert_allclose(np.unique(y), [0.0, 1 / 0.7], rtol=1e-6)
    assert 0.2 < (y == 0).mean() < 0.4
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(layer(x)), x)


@pytest.mark.parametrize("rate", [-0.1, 1.0, "0.3"])
def test_bad_rates_are_one_clear_error(rate):
    with pytest.raises(ValueError, match=r"Expected rate in \[0, 1\)"):
        ktg.KeyedDropout(rate)
    with pytest.raises(ValueError, match=r"Expected `dropout` in \[0, 1\)"):
        ktg.models.dcgan_discriminator(width=8, dropout=rate)


def test_bad_rate_in_the_config():
    with pytest.raises(ValueError, match=r"Expected d_dropout in \[0, 1\).*1.5"):
        TrainConfig(d_dropout=1.5)


def test_discriminator_with_dropout_saves_and_loads(tmp_path):
    d = ktg.models.dcgan_discriminator(width=8, dropout=0.3)
    assert sum(isinstance(x, ktg.KeyedDropout) for x in d.layers) == 2
    d.save(tmp_path / "d.keras")
    loaded = keras.saving.load_model(tmp_path / "d.keras")
    rates = [x.rate for x in loaded.layers if isinstance(x, ktg.KeyedDropout)]
    assert rates == [0.3, 0.3]


def test_dropout_changes_training_and_leaves_the_stored_keys_alone():
    def train(rate):
        keras.utils.set_random_seed(1)
        gan = tiny_gan(d_dropout=rate)
        gan.fit(batches(random_images(8), 8, repeat=3), epochs=1, verbose=0)
        return gan

    plain, dropped = train(0.0), train(0.5)
    assert len(dropped._dropout_slots) == 2 and plain._dropout_slots == ()
    changed = [
        np.abs(a - b).max()
        for a, b in zip(
            plain.generator.get_weights(), dropped.generator.get_weights(), strict=True
        )
    ]
    assert max(changed) > 1e-4
    for layer in dropped.discriminator.layers:
        if isinstance(layer, ktg.KeyedDropout):
            np.testing.assert_array_equal(keras.ops.convert_to_numpy(layer.key), [0, 0])


def test_a_plain_keras_dropout_in_the_discriminator_warns():
    images = keras.Input((28, 28, 1))
    h = keras.layers.Dropout(0.3)(keras.layers.Flatten()(images))
    d = keras.Model(images, keras.layers.Dense(1, dtype="float32")(h))
    g = ktg.models.dcgan_generator(latent_dim=8, width=8)
    with pytest.warns(UserWarning, match="per replica.*KeyedDropout"):
        ktg.GAN(g, d, latent_dim=8)
