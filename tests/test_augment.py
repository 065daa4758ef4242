import keras
import numpy as np
import pytest
from conftest import batches, numpy_weights, random_images, tiny_gan

import keras_tpugan as ktg
from keras_tpugan.augment import NOISE_SIZE, DiffAugment
from keras_tpugan.runs.config import TrainConfig

pytestmark = pytest.mark.both_backends


def _noise(n, **columns):
    """Noise that applies every policy, with chosen columns."""
    noise = np.zeros((n, NOISE_SIZE), "float32")
    for index, value in columns.items():
        noise[:, int(index[1:])] = value
    return noise


def _np(x):
    return keras.ops.convert_to_numpy(x)


def test_translation_shifts_and_fills_with_the_background():
    images = np.arange(2 * 8 * 8, dtype="float32").reshape(2, 8, 8, 1) / 128 - 0.5
    augment = DiffAugment("translation", background=-1.0, translation=0.25)
    # reach = 2 pixels; noise 0.0 -> shift -2, 0.99 -> +2, 0.5 -> 0.
    noise = _noise(2, c3=0.99, c4=0.5)
    out = _np(augment(images, noise, 1.0))
    np.testing.assert_allclose(out[:, 2:, :, 0], images[:, :-2, :, 0])
    np.testing.assert_array_equal(out[:, :2], -1.0)
    # Probability 0 (no image drawn below it): unchanged.
    np.testing.assert_array_equal(_np(augment(images, noise, 0.0)), images)


def test_cutout_blanks_one_square_with_the_background():
    images = np.full((1, 8, 8, 3), 0.5, "float32")
    augment = DiffAugment("cutout", background=-1.0, cutout=0.5)
    out = _np(augment(images, _noise(1, c5=0.5, c6=0.5), 1.0))
    blank = out[0, :, :, 0] == -1.0
    # A 4x4 square from its drawn corner (noise 0.5 -> row and column 2).
    expected = np.zeros((8, 8), bool)
    expected[2:6, 2:6] = True
    np.testing.assert_array_equal(blank, expected)
    assert np.all(out[0][~blank] == 0.5)
    # At the border the square is clipped (noise 0 -> columns -2..1).
    out = _np(augment(images, _noise(1, c5=0.5, c6=0.0), 1.0))
    assert (out[0, :, :, 0] == -1.0).sum() == 8


def test_color_needs_rgb_and_keeps_gradients():
    with pytest.raises(ValueError, match="Expected RGB images"):
        tiny_gan(augment=DiffAugment("color"))
    images = keras.ops.convert_to_tensor(random_images(4)[..., [0, 0, 0]])
    out = DiffAugment("translation,cutout,color")(
        images, np.random.default_rng(0).uniform(size=(4, NOISE_SIZE)), 1.0
    )
    assert out.shape == (4, 28, 28, 3) and np.isfinite(_np(out)).all()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"policy": "flip"}, "Expected an augmentation policy"),
        ({"policy": ""}, "Expected an augmentation policy"),
        ({"probability": 1.5}, "probability in \\[0.0, 1.0\\]"),
        ({"probability": -0.1}, "probability in \\[0.0, 1.0\\]"),
        ({"adjustment_images": 0}, "adjustment_images > 0"),
    ],
)
def test_bad_augmentation_settings_are_one_clear_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DiffAugment(**kwargs)


@pytest.mark.parametrize(
    "override, message",
    [
        ("augment=translation,flip", "Expected an augmentation policy"),
        ("augment_probability=2", "probability in"),
        ("ema_halflife_images=0", "ema_halflife_images` > 0"),
        ("ema_halflife_images=-5", "ema_halflife_images` > 0"),
        ("d_norm=group", "Expected d_norm in"),
        ("d_beta_2=1.0", "Expected d_beta_2 in"),
    ],
)
def test_bad_recipe_settings_in_the_config(override, message):
    config = TrainConfig.preset("smoke")
    if override.startswith("augment_probability"):
        override = [override, "augment=translation"]
    else:
        override = [override]
    with pytest.raises(ValueError, match=message):
        config.override(override)


def test_ema_halflife_and_decay_are_exclusive_and_positive():
    with pytest.raises(ValueError, match="Expected one of `ema_decay`"):
        tiny_gan(ema_decay=0.9, ema_halflife_images=100)
    with pytest.raises(ValueError, match="ema_halflife_images` > 0"):
        tiny_gan(ema_halflife_images=0)


def test_ema_halflife_spans_the_same_images_at_any_batch():
    gan = tiny_gan(ema_halflife_images=1000, ema_rampup=None)
    # After 1000 images the old average weighs one half, at batch 8 or 64.
    for batch in (8.0, 64.0):
        decay = float(_np(gan.ema_rate(0.0, batch)))
        assert decay ** (1000 / batch) == pytest.approx(0.5, rel=1e-5)
    ramped = tiny_gan(ema_halflife_images=1000, ema_rampup=0.05)
    # Step 0 at batch 8: half-life 0.05 x 8 images, far below 1000.
    assert float(_np(ramped.ema_rate(0.0, 8.0))) < 0.01


def test_adaptive_probability_moves_with_the_real_logits_and_is_logged():
    augment = DiffAugment(
        "translation", probability=0.2, adaptive=True, adjustment_images=100
    )
    up = augment.next_probability(0.2, 0.9, 10.0)
    down = augment.next_probability(0.2, 0.1, 10.0)
    assert float(_np(up)) == pytest.approx(0.3) and float(_np(down)) == pytest.approx(
        0.1
    )
    assert float(_np(augment.next_probability(0.95, 0.9, 10.0))) == 1.0
    gan = tiny_gan(augment=augment)
    after_each_step = []
    record = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: after_each_step.append(
            float(logs["augment_p"])
        )
    )
    history = gan.fit(
        batches(random_images(16), 4), epochs=2, verbose=0, callbacks=[record]
    )
    logged = history.history
    assert "augment_p" in logged and "d_real_sign" in logged
    p = float(_np(gan.augment_probability))
    assert logged["augment_p"][-1] == pytest.approx(p) == after_each_step[-1]
    # Every step moves it by batch / adjustment_images = 4 / 100, up or down
    # with the real logits' sign (it may come back to where it was: the
    # weights are not seeded), and never out of [0, 1].
    assert len(after_each_step) == 8
    for before, after in zip(
        [0.2] + after_each_step[:-1], after_each_step, strict=True
    ):
        assert 0.0 <= after <= 1.0
        if after not in (0.0, 1.0):
            assert abs(after - before) == pytest.approx(0.04, abs=1e-6)


def test_augmented_gan_saves_and_loads_with_its_probability(tmp_path):
    gan = tiny_gan(
        augment=DiffAugment("translation,cutout", adaptive=True),
        ema_halflife_images=500,
    )
    gan.fit(batches(random_images(8), 4), epochs=1, verbose=0)
    gan.save(tmp_path / "gan.keras")
    loaded = keras.saving.load_model(tmp_path / "gan.keras")
    assert loaded.augment.get_config() == gan.augment.get_config()
    assert loaded.ema_halflife_images == 500.0
    assert float(_np(loaded.augment_probability)) == float(_np(gan.augment_probability))
    for a, b in zip(numpy_weights(loaded), numpy_weights(gan), strict=True):
        np.testing.assert_array_equal(a, b)


def test_spectral_norm_discriminator_trains_and_saves(tmp_path):
    d = ktg.models.dcgan_discriminator(width=8, norm="spectral")
    assert any(
        isinstance(layer, keras.layers.SpectralNormalization) for layer in d.layers
    )
    gan = ktg.GAN(ktg.models.dcgan_generator(latent_dim=8, width=8), d, latent_dim=8)
    gan.compile()
    history = gan.fit(batches(random_images(8), 4), epochs=1, verbose=0)
    assert np.isfinite(history.history["d_loss"][-1])
    d.save(tmp_path / "d.keras")
    keras.saving.load_model(tmp_path / "d.keras")


def test_a_conditional_gan_trains_with_augmentation_and_validation():
    gan = tiny_gan(num_classes=2, augment="translation,cutout")
    labels = np.arange(16) % 2
    history = gan.fit(
        batches(random_images(16), 4, labels=labels),
        epochs=1,
        verbose=0,
        validation_data=batches(random_images(8, seed=2), 4, labels=labels[:8]),
    )
    logged = history.history
    assert np.isfinite(logged["d_loss"][0]) and np.isfinite(logged["val_d_loss"][0])
    # A fixed probability: logged, not adapted.
    assert logged["augment_p"] == [1.0] and "d_real_sign" not in logged
