"""The migration guide (docs/guides/migrating.md) runs as written.

Each port's first block (the user's networks) and second block (the same
networks trained by `keras_tpugan.GAN`) run here, with the networks' widths,
the batch size and the data made small; where the guide says to change a
line, the test changes exactly that line, after checking that the GAN names
it (refusal or warning) on the code as the user brings it.
"""

import functools
import pathlib
import re

import keras
import numpy as np
import pytest
from conftest import photo_folder

import keras_tpugan as ktg

pytestmark = pytest.mark.both_backends

GUIDE = (
    pathlib.Path(__file__).resolve().parent.parent / "docs" / "guides" / "migrating.md"
)


def _blocks(heading):
    """The python blocks of one section of the guide: (networks, training)."""
    text = GUIDE.read_text()
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else len(text)]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 2, f"expected two python blocks under {heading!r}"
    return blocks


def _edited(code, old, new):
    """The guide's one-line change, applied where the guide says it is."""
    assert code.count(old) == 1, f"{old!r} is not once in the block"
    return code.replace(old, new)


def _run(code, scope):
    exec(compile(code, str(GUIDE), "exec"), scope)
    return scope


def _small(scope, names, width=8, batch_size=8):
    """The user's network builders at a small width, and a small batch."""
    for name in names:
        scope[name] = functools.partial(scope[name], width=width)
    scope.update(BATCH_SIZE=batch_size, EPOCHS=1)


def _digits(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)


def _check_trained(scope, image_shape):
    logged = scope["history"].history
    for key in ("d_loss", "g_loss", "d_real", "d_fake"):
        assert len(logged[key]) == 1 and np.isfinite(logged[key][0]), key
    images = keras.ops.convert_to_numpy(scope["gan"].generate(2, seed=0))
    assert images.shape == (2, *image_shape)
    assert images.min() >= -1 and images.max() <= 1
    assert images.min() < 0  # tanh output: the generator reaches below 0


def test_the_keras_io_dcgan_port_names_its_two_changes_and_trains(
    tmp_path, monkeypatch
):
    networks, training = _blocks("The keras-io DCGAN (faces, 64x64 RGB)")
    scope = _run(networks, {})
    with pytest.raises(ValueError, match="sigmoid"):
        ktg.GAN(
            scope["make_generator"](width=8),
            scope["make_discriminator"](width=8),
            latent_dim=scope["LATENT_DIM"],
        )
    networks = _edited(
        networks, 'layers.Dense(1, activation="sigmoid")', "layers.Dense(1)"
    )
    scope = _run(networks, {})
    with pytest.warns(UserWarning, match="'generator'.*sigmoid.*tanh"):
        ktg.GAN(
            scope["make_generator"](width=8),
            scope["make_discriminator"](width=8),
            latent_dim=scope["LATENT_DIM"],
        )
    networks = _edited(
        networks,
        'layers.Conv2D(3, 5, padding="same", activation="sigmoid")',
        'layers.Conv2D(3, 5, padding="same", activation="tanh")',
    )
    scope = _run(networks, {})
    _small(scope, ("make_generator", "make_discriminator"))
    # A folder of non-square photos, as the guide reads it.
    photo_folder(tmp_path / "celeba_photos", 8, shape=(80, 66, 3))
    monkeypatch.chdir(tmp_path)
    _run(training, scope)
    _check_trained(scope, (64, 64, 3))


def test_the_keras_io_wgan_gp_port_trains_unchanged_and_logs_as_the_guide_says():
    """Slow on JAX (about 20 s): the port's step, critic steps and gradient
    penalty included, is traced and compiled."""
    networks, training = _blocks("The keras-io WGAN-GP (digits)")
    scope = _run(networks, {})
    _small(scope, ("make_generator", "make_critic"))
    scope["x_train"] = _digits(16)
    # The critic's keras.layers.Dropout: a warning, as the guide's table says.
    with pytest.warns(UserWarning, match="KeyedDropout"):
        _run(training, scope)
    _check_trained(scope, (28, 28, 1))
    gan, logged = scope["gan"], scope["history"].history
    assert gan.discriminator_steps == 3 and gan.gradient_penalty == "wgan-gp"
    assert gan.penalty_weight == 10.0
    # The guide: d_loss is d_fake - d_real (the example's d_loss less the
    # weighted penalty), and the penalty is logged before its weight.
    np.testing.assert_allclose(
        logged["d_loss"][0], logged["d_fake"][0] - logged["d_real"][0], atol=1e-5
    )
    assert logged["penalty"][0] > 0


def test_the_keras_io_conditional_gan_port_takes_class_ids_and_generates_each_class():
    networks, training = _blocks(
        "The keras-io conditional GAN (digits with their labels)"
    )
    scope = _run(networks, {})
    # As the user brings them: one input each, so the GAN points at the
    # conditional contract; the generator's sigmoid is named.
    with pytest.raises(ValueError, match="second input.*docs/guides/migrating.md"):
        ktg.GAN(
            scope["make_generator"](width=8),
            scope["make_discriminator"](width=8),
            latent_dim=scope["LATENT_DIM"],
            num_classes=10,
        )
    networks = _edited(
        networks,
        'layers.Conv2D(1, 7, padding="same", activation="sigmoid")',
        'layers.Conv2D(1, 7, padding="same", activation="tanh")',
    )
    scope = _run(networks, {})
    _small(scope, ("make_generator", "make_discriminator"))
    scope["x_train"] = _digits(16)
    scope["y_train"] = np.arange(16) % 10
    _run(training, scope)
    _check_trained(scope, (28, 28, 1))
    assert scope["gan"].num_classes == 10
    assert keras.ops.convert_to_numpy(scope["digits"]).shape == (10, 28, 28, 1)
    # The wrapped networks keep the user's: the same weights, one layer each.
    generator = scope["gan"].generator
    assert any(layer.name == "generator" for layer in generator.layers)


def test_the_conditional_wrapper_still_names_a_sigmoid_generator_inside_it():
    networks, training = _blocks(
        "The keras-io conditional GAN (digits with their labels)"
    )
    scope = _run(networks, {})
    _small(scope, ("make_generator", "make_discriminator"))
    wrapper = training.split("\n\n\n# x_train")[0]  # the wrapper's definition
    _run(wrapper, scope)
    generator, discriminator = scope["with_labels"](
        scope["make_generator"](), scope["make_discriminator"]()
    )
    with pytest.warns(UserWarning, match="sigmoid.*tanh"):
        ktg.GAN(generator, discriminator, latent_dim=128, num_classes=10)


def test_the_tensorflow_tutorial_port_trains_with_its_networks_unchanged():
    networks, training = _blocks("The TensorFlow DCGAN tutorial (digits)")
    scope = _run(networks, {})
    scope.update(BATCH_SIZE=8, EPOCHS=1, x_train=_digits(16))
    with pytest.warns(UserWarning, match="KeyedDropout"):
        _run(training, scope)
    _check_trained(scope, (28, 28, 1))
    assert scope["gan"].latent_dim == 100


def _keras_io_subclass(hand_on=False, metrics=True):
    """keras-io's `GAN` class re-based on `keras_tpugan.GAN`, its `compile`
    and `metrics` kept (or mended as the message says)."""

    class KerasIOGAN(ktg.GAN):
        def compile(self, d_optimizer, g_optimizer, loss_fn):
            if hand_on:
                super().compile(
                    generator_optimizer=g_optimizer, discriminator_optimizer=d_optimizer
                )
            else:
                super().compile()
            self.d_optimizer = d_optimizer
            self.g_optimizer = g_optimizer
            self.loss_fn = loss_fn
            self.d_loss_metric = keras.metrics.Mean(name="d_loss")
            self.g_loss_metric = keras.metrics.Mean(name="g_loss")

    if metrics:
        KerasIOGAN.metrics = property(lambda self: [self.d_loss_metric])
    return KerasIOGAN(
        generator=ktg.models.dcgan_generator(latent_dim=8, width=8),
        discriminator=ktg.models.dcgan_discriminator(width=8),
        latent_dim=8,
    )


def test_a_keras_io_compile_and_metrics_kept_as_they_are_get_one_message_each():
    def compile_(gan):
        gan.compile(
            d_optimizer=keras.optimizers.Adam(1e-3),
            g_optimizer=keras.optimizers.Adam(1e-3),
            loss_fn=keras.losses.BinaryCrossentropy(),
        )

    with pytest.raises(ValueError) as info:
        compile_(_keras_io_subclass())
    message = str(info.value)
    assert "no attribute 'd_loss_metric'" in message
    assert "Delete the `metrics` property" in message and "migrating.md" in message
    # Without `metrics`, the optimizers compile never saw are named at fit.
    gan = _keras_io_subclass(metrics=False)
    compile_(gan)
    images = _digits(16).astype("float32")[..., None] / 127.5 - 1
    with pytest.raises(ValueError, match="`d_optimizer`, `g_optimizer`, set on"):
        gan.fit(images, batch_size=8, epochs=1, verbose=0)
    assert int(gan.optimizer.iterations) == 0
    # Handed on, they are the GAN's, and it trains.
    gan = _keras_io_subclass(hand_on=True, metrics=False)
    compile_(gan)
    gan.fit(images, batch_size=8, epochs=1, verbose=0)
    assert gan.generator_optimizer is gan.g_optimizer
    assert int(gan.g_optimizer.iterations) == 2
