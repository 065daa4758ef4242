"""What a Keras user plugs into `gan.fit` behaves as on a plain `keras.Model`."""

import re
import warnings

import keras
import numpy as np
import pytest
from conftest import batches, numpy_weights, random_images, tiny_gan, tiny_quality

import keras_tpugan as ktg

pytestmark = pytest.mark.both_backends


def _adams(g_rate=1e-3, d_rate=4e-3, **kwargs):
    return {
        "generator_optimizer": keras.optimizers.Adam(g_rate, **kwargs),
        "discriminator_optimizer": keras.optimizers.Adam(d_rate, **kwargs),
    }


def _rate(optimizer):
    return float(keras.ops.convert_to_numpy(optimizer.learning_rate))


def test_gan_optimizer_drives_both_networks_keeping_their_ratio():
    gan = tiny_gan(compile_kwargs=_adams())
    assert isinstance(gan.optimizer, ktg.GANOptimizer)
    assert gan.optimizer.optimizers == [
        gan.generator_optimizer,
        gan.discriminator_optimizer,
    ]
    # Unnamed optimizers are named after their network.
    assert gan.generator_optimizer.name == "generator_optimizer"
    assert gan.discriminator_optimizer.name == "discriminator_optimizer"
    assert _rate(gan.optimizer) == pytest.approx(1e-3)
    gan.optimizer.learning_rate = 2e-3
    assert _rate(gan.generator_optimizer) == pytest.approx(2e-3)
    assert _rate(gan.discriminator_optimizer) == pytest.approx(8e-3)
    # Named optimizers keep their names.
    named = tiny_gan(
        compile_kwargs={
            "generator_optimizer": keras.optimizers.Adam(name="g_adam"),
            "discriminator_optimizer": keras.optimizers.Adam(),
        }
    )
    assert named.generator_optimizer.name == "g_adam"


def test_learning_rate_callbacks_reach_both_optimizers():
    gan = tiny_gan(compile_kwargs=_adams())
    history = gan.fit(
        batches(random_images(16), 4),
        epochs=3,
        verbose=0,
        callbacks=[
            keras.callbacks.LearningRateScheduler(lambda epoch, rate: rate * 0.5),
            # Never an improvement after the first epoch: cuts at epochs 2, 3.
            keras.callbacks.ReduceLROnPlateau(
                "loss", factor=0.1, patience=0, min_delta=1e9
            ),
        ],
    )
    logged = history.history
    # The rates each epoch trained with: halved by the scheduler at every
    # epoch's start, cut by 10 after epochs 2 and 3 (after being logged).
    expected = [5e-4, 2.5e-4, 1.25e-5]
    assert logged["g_learning_rate"] == pytest.approx(expected, rel=1e-5)
    assert logged["d_learning_rate"] == pytest.approx(
        [4 * r for r in expected], rel=1e-5
    )
    # Keras's own log names say which network each rate trains.
    assert "learning_rate_generator_optimizer" in logged
    assert "learning_rate_discriminator_optimizer" in logged
    assert _rate(gan.generator_optimizer) == pytest.approx(expected[2] * 0.1)
    # One optimizer iteration per GAN step (what TensorBoard plots against).
    assert int(gan.optimizer.iterations) == 12


def _ema_run(callbacks=(), **adam_kwargs):
    keras.utils.set_random_seed(3)
    gan = tiny_gan(compile_kwargs=_adams(**adam_kwargs))
    gan.fit(batches(random_images(16), 4), epochs=2, verbose=0, callbacks=callbacks)
    return [keras.ops.convert_to_numpy(v) for v in gan.generator.trainable_variables]


def test_optimizer_use_ema_and_swap_ema_weights_as_on_a_plain_model():
    """Slow (about 15-20 s): several GANs trained, each compiling its step."""
    plain = _ema_run()
    # An average that only holds the last value: the trained weights.
    for a, b in zip(_ema_run(use_ema=True, ema_momentum=0.0), plain, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # A real average: fit ends by writing it into the weights.
    averaged = _ema_run(use_ema=True, ema_momentum=0.9)
    assert max(np.abs(a - b).max() for a, b in zip(averaged, plain, strict=True)) > 1e-5
    # SwapEMAWeights swaps them in at each epoch's end and ends the same.
    swapped = _ema_run(
        callbacks=[keras.callbacks.SwapEMAWeights(swap_on_epoch=True)],
        use_ema=True,
        ema_momentum=0.9,
    )
    for a, b in zip(swapped, averaged, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_the_same_optimizer_for_both_networks_is_refused():
    adam = keras.optimizers.Adam()
    with pytest.raises(ValueError, match="Expected one optimizer per network"):
        tiny_gan(
            compile_kwargs={
                "generator_optimizer": adam,
                "discriminator_optimizer": adam,
            }
        )


def test_evaluate_scores_held_out_images_with_fixed_latents_and_trains_nothing():
    gan = tiny_gan(gradient_penalty="r1")
    held_out = batches(random_images(16, seed=5), 4)
    before = numpy_weights(gan)
    first = gan.evaluate(held_out, verbose=0, return_dict=True)
    second = gan.evaluate(held_out, verbose=0, return_dict=True)
    assert set(first) == {"d_loss", "d_real", "d_fake", "penalty", "g_loss", "loss"}
    assert first == second  # fixed latents, inference mode
    assert all(np.isfinite(v) for v in first.values())
    for a, b in zip(numpy_weights(gan), before, strict=True):
        np.testing.assert_array_equal(a, b)
    assert int(keras.ops.convert_to_numpy(gan.step_counter)) == 0
    # Other images, other values.
    other = gan.evaluate(batches(random_images(16, seed=6), 4), verbose=0)
    assert other != pytest.approx(first["loss"])


def test_validation_data_logs_val_losses_equal_to_evaluate():
    gan = tiny_gan(num_classes=2)
    labels = np.arange(16) % 2
    held_out = batches(random_images(16, seed=5), 4, labels=labels)
    history = gan.fit(
        batches(random_images(16), 4, labels=labels),
        epochs=2,
        verbose=0,
        validation_data=held_out,
    )
    logged = history.history
    for name in ("val_d_loss", "val_d_real", "val_d_fake", "val_g_loss", "val_loss"):
        assert len(logged[name]) == 2, name
    now = gan.evaluate(held_out, verbose=0, return_dict=True)
    for name in ("d_loss", "d_real", "d_fake", "g_loss"):
        assert logged[f"val_{name}"][-1] == pytest.approx(now[name], rel=1e-5)


def test_evaluate_is_the_same_on_1_and_2_replicas():
    values = []
    for replicas in (1, 2):
        keras.utils.set_random_seed(4)
        strategy = ktg.distribute.get_strategy("cpu", num_replicas=replicas)
        gan = tiny_gan(strategy=strategy, gradient_penalty="wgan-gp")
        values.append(
            gan.evaluate(
                batches(random_images(16, seed=5), 8), verbose=0, return_dict=True
            )
        )
    for name, value in values[0].items():
        assert values[1][name] == pytest.approx(value, rel=1e-5, abs=1e-6), name


def test_keras_best_logic_knows_which_way_scores_improve():
    gan = tiny_gan()
    callbacks = {
        name: keras.callbacks.EarlyStopping(name, patience=5)  # mode="auto"
        for name in ("fcd", "kid", "classifier_score", "val_fcd")
    }
    gan.fit(
        batches(random_images(8), 4),
        epochs=1,
        verbose=0,
        callbacks=list(callbacks.values()),
    )  # warns that the scores are missing; decides their direction anyway
    assert callbacks["fcd"].monitor_op is keras.ops.less
    assert callbacks["kid"].monitor_op is keras.ops.less
    assert callbacks["val_fcd"].monitor_op is keras.ops.less
    assert callbacks["classifier_score"].monitor_op is keras.ops.greater


@pytest.mark.parametrize(
    "images, hint",
    [
        (np.linspace(0, 1, 16 * 784).reshape(16, 28, 28, 1), "images \\* 2 - 1"),
        (np.linspace(0, 255, 16 * 784).reshape(16, 28, 28, 1), "images / 127.5 - 1"),
        (np.linspace(-3, 3, 16 * 784).reshape(16, 28, 28, 1), "rescale"),
    ],
)
def test_images_outside_the_generators_range_warn_once(images, hint):
    gan = tiny_gan()
    ds = batches(images.astype("float32"), 8, drop_remainder=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gan.fit(ds, epochs=1, verbose=0)
        gan.fit(ds, epochs=1, verbose=0)
    messages = [
        str(w.message) for w in caught if "Expected images in" in str(w.message)
    ]
    assert len(messages) == 1
    low, high = images[:8].min(), images[:8].max()  # the first batch
    assert f"[{low:.4g}, {high:.4g}]" in messages[0]
    assert re.search(hint, messages[0])


def test_images_in_range_and_load_images_data_do_not_warn():
    gan = tiny_gan()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gan.fit(batches(random_images(16), 8), epochs=1, verbose=0)
        gan.fit(
            ktg.data.load_images("mnist", batch_size=1000, source="offline"),
            epochs=1,
            steps_per_epoch=1,
            verbose=0,
        )
    assert not [w for w in caught if "Expected images in" in str(w.message)]


@pytest.mark.parametrize(
    "labels, message",
    [
        (np.arange(16) % 3, "Received: label 2"),
        (np.arange(16) - 1, "Received: label -1"),
        (np.eye(2, dtype="float32")[np.arange(16) % 2], r"shape \(\d+, 2\) \(one-hot"),
        (np.full(16, 0.5, "float32"), "Received: label 0.5"),
    ],
)
def test_labels_that_are_not_class_ids_are_refused_before_training(labels, message):
    gan = tiny_gan(num_classes=2)
    images = random_images(16)
    with pytest.raises(ValueError, match=message):
        gan.fit(images, labels, batch_size=8, verbose=0)
    ds = batches(images, 8, labels=labels, drop_remainder=False)
    with pytest.raises(ValueError, match=message):
        gan.fit(ds, verbose=0)
    assert int(keras.ops.convert_to_numpy(gan.step_counter)) == 0


def test_keras_tuner_objective_on_fcd_takes_the_best_scored_epoch(
    tmp_path, classifier_dir
):
    import keras_tuner as kt

    fcds = []

    class UsersHyperModel(kt.HyperModel):
        def build(self, hp):
            hp.Fixed("width", 8)
            return tiny_gan()

        def fit(self, hp, model, *args, **kwargs):
            quality = tiny_quality(classifier_dir, every_n_epochs=2)
            history = model.fit(
                batches(random_images(8), 4),
                epochs=4,
                verbose=0,
                callbacks=[*kwargs.get("callbacks", []), quality],
            )
            fcds.extend(history.history["fcd"])
            return history

    tuner = kt.GridSearch(
        UsersHyperModel(),
        objective=kt.Objective("fcd", "min"),
        directory=str(tmp_path),
        max_trials=1,
    )
    tuner.search()
    trial = tuner.oracle.get_best_trials(1)[0]
    assert trial.status == "COMPLETED"
    scored = [f for f in fcds if np.isfinite(f)]
    assert len(scored) == 2 and trial.score == pytest.approx(min(scored))


@pytest.mark.parametrize(
    "make",
    [
        keras.optimizers.Adam,
        keras.optimizers.AdamW,
        keras.optimizers.SGD,
        keras.optimizers.RMSprop,
        ktg.LARS,
    ],
)
def test_an_unnamed_optimizer_is_named_after_its_network_a_named_one_kept(make):
    from keras_tpugan.gan_checks import has_default_name

    first, second = make(), make()
    assert has_default_name(first), first.name
    assert has_default_name(second), second.name
    assert not has_default_name(make(name="mine"))
    gan = tiny_gan(
        compile_kwargs={
            "generator_optimizer": make(),
            "discriminator_optimizer": make(name="mine"),
        }
    )
    assert gan.generator_optimizer.name == "generator_optimizer"
    assert gan.discriminator_optimizer.name == "mine"
