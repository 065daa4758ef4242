import functools
import warnings

import keras
import numpy as np
import pytest
from conftest import BACKEND, LATENT, batches, numpy_weights, random_images, tiny_gan

import keras_tpugan as ktg
from keras_tpugan.runs.config import TrainConfig

pytestmark = pytest.mark.both_backends

if BACKEND == "tensorflow":  # (the JAX pass runs without TensorFlow)
    import tensorflow as tf

GLOBAL_BATCH = 8
STEPS = 3


def _train(replicas, gan_kwargs, compile_kwargs=None, labels=None, seed=1, flat=False):
    keras.utils.set_random_seed(seed)
    strategy = ktg.distribute.get_strategy("cpu", num_replicas=replicas)
    gan = tiny_gan(strategy=strategy, compile_kwargs=compile_kwargs, **gan_kwargs)
    if flat:  # set before the first fit traces the step
        gan.flat_all_reduce = True
    ds = batches(random_images(GLOBAL_BATCH), GLOBAL_BATCH, labels=labels, repeat=STEPS)
    history = gan.fit(ds, epochs=1, verbose=0)
    weights = [w.numpy() for w in gan.generator.weights + gan.discriminator.weights]
    return weights, {k: v[-1] for k, v in history.history.items()}, gan


PARITY_CASES = {
    # Two critic steps and the R1 penalty with the hinge loss, without XLA
    # on TensorFlow; jitted on JAX, where the un-jitted R1 step runs op by op
    # (a gradient of a gradient: 100 s here) and is the jitted step without
    # `jax.jit` (the two agree on one device:
    # `test_xla_on_and_off_agree_in_float32`).
    "r1_hinge_n_critic_2": (
        {"gradient_penalty": "r1", "discriminator_steps": 2},
        {"jit_compile": BACKEND == "jax", "loss": "hinge"},
    ),
    # Batch statistics over the global batch: TensorFlow's synchronized
    # batch norm without XLA (XLA cannot run it under MirroredStrategy); on
    # JAX the statistics of the sharded global batch, jitted as above.
    "synchronized_batchnorm": (
        {"norm": "batch"},
        {"jit_compile": BACKEND == "jax"},
    ),
    # Labels, and the EMA generator by a fixed decay.
    "conditional_ema": ({"num_classes": 2, "ema_decay": 0.5}, {"jit_compile": True}),
    # Both networks from one generator forward, with a penalty and dropout.
    "simultaneous_r1_dropout": (
        {"update": "simultaneous", "gradient_penalty": "r1", "d_dropout": 0.3},
        {"jit_compile": True},
    ),
    # Dropout masks keyed by (seed, step, call, global example), here with
    # two discriminator steps, the WGAN-GP penalty and its own call.
    "dropout_wgan_gp": (
        {"d_dropout": 0.5, "gradient_penalty": "wgan-gp", "discriminator_steps": 2},
        {"jit_compile": True, "loss": "wasserstein"},
    ),
    # The quality recipe: augmentation (its numbers drawn for the global
    # batch), ADA's probability from all-reduced logits, EMA by half-life,
    # spectral normalization.
    "ada_spectral_halflife": (
        {
            "augment": ktg.DiffAugment(
                "translation,cutout",
                probability=0.5,
                adaptive=True,
                adjustment_images=64,
            ),
            "ema_halflife_images": 16,
            "d_norm": "spectral",
        },
        {"jit_compile": True},
    ),
}
# (The plain step, unconditional and alternating, with XLA, the
# non-saturating loss and Adam, runs inside `ada_spectral_halflife`; the
# other cases each add to it.)


# Also on 4 replicas (2 examples each): the case whose numbers are drawn per
# global example at every call (latents, WGAN-GP weights and dropout masks,
# two critic steps), where replicas 2 and 3 start at other offsets of the
# global batch. The other cases differ from it in what each replica
# computes, not in how replicas combine: 2 replicas already sum over more
# than one (the same all-reduce at 4), and replica 1 already reads its
# latents, augmentation numbers and masks at an offset of the global batch.
FOUR_REPLICAS = ("dropout_wgan_gp",)


def _reference(case):
    """The 1-replica run of a parity case, trained once per session."""
    return _replicated(case, 1)


@functools.cache
def _replicated(case, replicas):
    """A parity case's run on `replicas` replicas, trained once per session."""
    gan_kwargs, compile_kwargs = PARITY_CASES[case]
    return _train(replicas, gan_kwargs, compile_kwargs, _labels(case))


def _labels(case):
    return (
        np.arange(GLOBAL_BATCH) % 2 if "num_classes" in PARITY_CASES[case][0] else None
    )


@pytest.mark.parametrize("case", sorted(PARITY_CASES))
def test_same_weights_and_logs_on_1_2_4_replicas(case):
    """Slow (15-110 s a case): each case trains a fresh GAN on 1, 2 and for one
    case 4 replicas, and each training traces (and with XLA compiles) its step."""
    gan_kwargs = PARITY_CASES[case][0]
    ref_w, ref_logs, ref_gan = _reference(case)
    assert ref_gan.step_counter.numpy() == STEPS
    assert set(ref_logs) >= {"d_loss", "g_loss", "d_real", "d_fake"}
    if "gradient_penalty" in gan_kwargs:
        assert ref_logs["penalty"] > 0
    for replicas in (2, 4) if case in FOUR_REPLICAS else (2,):
        weights, logs, gan = _replicated(case, replicas)
        assert ktg.distribute.num_replicas(gan.strategy) == replicas
        for a, b in zip(ref_w, weights, strict=True):
            np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5)
        assert logs.keys() == ref_logs.keys()
        for key in ref_logs:
            np.testing.assert_allclose(logs[key], ref_logs[key], atol=1e-5, rtol=1e-5)
        if ref_gan.ema_generator is not None:
            for a, b in zip(
                numpy_weights(ref_gan.ema_generator),
                numpy_weights(gan.ema_generator),
                strict=True,
            ):
                np.testing.assert_allclose(a, b, atol=1e-5)


@functools.cache
def _one_device(jit_compile):
    """A GAN with dropout trained on one device, with or without XLA, once per
    session (two tests share each)."""
    return _train(1, {"d_dropout": 0.5}, {"jit_compile": jit_compile})


def test_training_changes_weights_and_logs_true_means():
    """Slow on JAX (about 15-50 s): the step runs without XLA, op by op, for the
    first time in the session (the run is shared with the XLA on/off test)."""
    ref_w, logs, gan = _one_device(jit_compile=False)
    keras.utils.set_random_seed(1)
    untrained = tiny_gan(d_dropout=0.5)
    before = [w.numpy() for w in untrained.generator.weights]
    trained = ref_w[: len(before)]  # (the generator's weights come first)
    assert any(np.abs(a - b).max() > 1e-4 for a, b in zip(before, trained, strict=True))
    # Non-saturating loss: d_loss >= 0 and g_loss > 0, finite.
    assert np.isfinite(list(logs.values())).all()
    assert logs["d_loss"] > 0 and logs["g_loss"] > 0


def test_xla_on_and_off_agree_in_float32():
    """The plain step and dropout's keyed masks, compiled whole by XLA or not."""
    xla_w, xla_logs, xla_gan = _one_device(jit_compile=True)
    ref_w, ref_logs, ref_gan = _one_device(jit_compile=False)
    assert xla_gan.xla and not ref_gan.xla
    for a, b in zip(ref_w, xla_w, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5)
    for key in ref_logs:
        np.testing.assert_allclose(xla_logs[key], ref_logs[key], atol=1e-5)


@pytest.mark.tensorflow_only
def test_latents_depend_on_seed_step_and_global_index_only():
    gan = tiny_gan()
    z_one = gan._draw_noise(0, 8, 8)[0]
    strategy = ktg.distribute.get_strategy("cpu", num_replicas=4)
    with strategy.scope():
        gan4 = tiny_gan(strategy=strategy)

    def per_replica():
        return gan4._draw_noise(0, 2, 8)[0]

    parts = strategy.experimental_local_results(strategy.run(tf.function(per_replica)))
    np.testing.assert_array_equal(np.concatenate(parts), z_one.numpy())
    # Distinct across replicas and across steps and streams.
    assert not np.allclose(parts[0], parts[1])
    assert not np.allclose(gan._draw_noise(1, 8, 8)[0], z_one)
    gan.step_counter.assign(1)
    assert not np.allclose(gan._draw_noise(0, 8, 8)[0], z_one)


@pytest.mark.jax_only
def test_jax_latents_depend_on_seed_step_and_stream_only():
    gan = tiny_gan()
    z, alpha, _, _ = gan._draw_noise(0, 0, 8)
    assert z.shape == (8, LATENT) and alpha.shape == (8,)
    np.testing.assert_array_equal(z, gan._draw_noise(0, 0, 8)[0])
    assert not np.allclose(z, gan._draw_noise(1, 0, 8)[0])  # next step
    assert not np.allclose(z, gan._draw_noise(0, 1, 8)[0])  # next stream
    other = tiny_gan(seed=1)
    assert not np.allclose(z, other._draw_noise(0, 0, 8)[0])


@pytest.mark.jax_only
def test_jax_step_sees_the_global_batch_sharded_over_the_devices():
    import jax

    strategy = ktg.distribute.get_strategy("cpu", num_replicas=4)
    gan = tiny_gan(strategy=strategy, compile_kwargs={"jit_compile": True})
    seen = {}
    step = gan.train_step

    def watched(state, data):
        def record(sharding):
            seen["sharding"] = sharding

        # A PyDataset's batch arrives as a tuple, as Keras standardizes it.
        images = data[0] if isinstance(data, tuple) else data
        jax.debug.inspect_array_sharding(images, callback=record)
        seen["shape"] = images.shape
        return step(state, data)

    gan.train_step = watched
    gan.fit(batches(random_images(8), 8), epochs=1, verbose=0)  # outside the scope
    assert seen["sharding"].num_devices == 4
    assert tuple(seen["sharding"].spec) == ("batch",)
    assert seen["shape"] == (8, 28, 28, 1)  # the global batch
    variable = gan.generator.trainable_variables[0].value
    assert len(variable.sharding.device_set) == 4  # replicated on the 4 devices


@pytest.mark.jax_only
def test_one_device_compiles_the_step_once_per_run(caplog):
    # A new GAN's variables, and the metrics Keras resets before every
    # epoch and validation, are committed to the device like the step's
    # outputs: jax.jit compiled a program per mix (three train steps and
    # two validation steps for this fit).
    import jax

    strategy = ktg.distribute.get_strategy("cpu", num_replicas=1)
    gan = tiny_gan(strategy=strategy, compile_kwargs={"jit_compile": True})
    with jax.log_compiles(True), caplog.at_level("WARNING", logger="jax"):
        gan.fit(
            batches(random_images(16), 8),
            validation_data=batches(random_images(8, seed=1), 8),
            epochs=3,
            verbose=0,
        )
    compiled = [r.getMessage().split(" with ")[0] for r in caplog.records]
    assert compiled.count("Compiling jit(train_step)") == 1, compiled
    assert compiled.count("Compiling jit(test_step)") == 1, compiled


def test_mixed_bfloat16_with_xla_trains_with_float32_variables():
    ktg.precision.configure("mixed_bfloat16")
    gan = tiny_gan(compile_kwargs={"jit_compile": True})
    assert gan.generator.layers[-2].compute_dtype == "bfloat16"
    history = gan.fit(batches(random_images(16), 8, repeat=2), epochs=2, verbose=0)
    for values in history.history.values():
        assert np.isfinite(values).all()
    for w in gan.generator.weights + gan.discriminator.weights:
        assert w.dtype == "float32"
    assert gan.discriminator.output.dtype == "float32"
    assert gan.generate(4, seed=0).dtype == np.float32


def test_mixed_float16_wraps_both_optimizers_in_loss_scaling():
    ktg.precision.configure("mixed_float16")
    if BACKEND == "jax":
        with pytest.raises(ValueError, match="mixed_bfloat16 or float32 policy"):
            tiny_gan(compile_kwargs={"jit_compile": False})
        return
    gan = tiny_gan(compile_kwargs={"jit_compile": False})
    for opt in (gan.generator_optimizer, gan.discriminator_optimizer):
        assert isinstance(opt, keras.optimizers.LossScaleOptimizer)
    history = gan.fit(batches(random_images(16), 8), epochs=1, verbose=0)
    assert np.isfinite(history.history["d_loss"]).all()
    assert int(gan.generator_optimizer.iterations.numpy()) == 2


def test_float32_optimizers_are_not_wrapped():
    gan = tiny_gan()
    assert not isinstance(gan.generator_optimizer, keras.optimizers.LossScaleOptimizer)
    assert gan.generator_optimizer.built and gan.discriminator_optimizer.built


def test_generate_shape_range_and_seed():
    gan = tiny_gan()
    images = gan.generate(5, seed=3)
    assert images.shape == (5, 28, 28, 1) and images.dtype == np.float32
    assert images.min() >= -1 and images.max() <= 1
    np.testing.assert_array_equal(images, gan.generate(5, seed=3))
    assert not np.allclose(images, gan.generate(5, seed=4))
    latents = np.zeros((2, LATENT), "float32")
    assert gan.generate(latents).shape == (2, 28, 28, 1)
    # In batches or not, the same images.
    np.testing.assert_allclose(gan.generate(5, seed=3, batch_size=2), images, atol=1e-6)


@pytest.mark.parametrize("num_classes", [None, 3])
def test_generate_is_one_compiled_call_per_generator(num_classes, monkeypatch):
    """`generate` calls the generator through one compiled function per
    generator (eagerly, JAX compiles each operation on its own and
    TensorFlow runs each layer from Python), with the eager call's images:
    on JAX one `jax.jit` program per batch shape, on TensorFlow one
    `tf.function` traced once for any batch size. JAX with
    `jit_compile=False` calls it eagerly."""
    gan = tiny_gan(num_classes=num_classes, ema_decay=0.99, norm="batch")
    latents = np.random.default_rng(0).normal(size=(7, LATENT)).astype("float32")
    labels = None if num_classes is None else np.arange(7) % num_classes
    inputs = latents if labels is None else [latents, labels]
    eager = keras.ops.convert_to_numpy(gan.ema_generator(inputs, training=False))
    images = gan.generate(latents, labels=labels, batch_size=4)  # batches of 4, 3
    np.testing.assert_allclose(images, eager, atol=1e-6)
    calls = gan.__dict__["_generator_calls"]
    (compiled,) = calls.values()  # the EMA generator's: one function
    if BACKEND == "tensorflow":  # one trace, whatever the batch size
        for batch_size in (5, 7, 2):
            gan.generate(latents, labels=labels, batch_size=batch_size)
        assert compiled.experimental_get_tracing_count() == 1
    else:
        assert compiled._cache_size() == 2  # two batch shapes, traced once each
        gan.generate(latents, labels=labels, batch_size=4)
        assert compiled._cache_size() == 2  # kept: not traced again
    gan.generate(3, seed=1, use_ema=False)
    assert len(calls) == 2  # the generator's own
    # Weights and moving statistics changed since: the new values are used,
    # not the traced ones.
    for v in gan.ema_generator.weights:
        v.assign(v.value * 0.5 + 0.1)
    eager = keras.ops.convert_to_numpy(gan.ema_generator(inputs, training=False))
    np.testing.assert_allclose(
        gan.generate(latents, labels=labels, batch_size=4), eager, atol=1e-6
    )
    if BACKEND != "jax":
        return
    import jax

    # Compiled off: eager, no jax.jit.
    gan.xla = False
    monkeypatch.setattr(jax, "jit", lambda *a, **k: pytest.fail("compiled"))
    gan.__dict__["_generator_calls"] = {}
    np.testing.assert_allclose(
        gan.generate(latents, labels=labels, batch_size=4), eager, atol=1e-6
    )
    assert not gan.__dict__["_generator_calls"]


@pytest.mark.tensorflow_only
def test_generate_on_two_replicas_is_the_eager_call():
    """Under a two-replica `MirroredStrategy` the traced generator reads the
    mirrored weights and batch-norm statistics as the eager call does."""
    strategy = ktg.distribute.get_strategy("cpu", num_replicas=2)
    gan = tiny_gan(num_classes=3, norm="batch", strategy=strategy)
    latents = np.random.default_rng(1).normal(size=(6, LATENT)).astype("float32")
    labels = np.arange(6) % 3
    with strategy.scope():
        for v in gan.generator.non_trainable_variables:
            v.assign(v.value + 0.25)
    eager = keras.ops.convert_to_numpy(gan.generator([latents, labels], training=False))
    images = gan.generate(latents, labels=labels, batch_size=4, use_ema=False)
    np.testing.assert_array_equal(images, eager)
    assert len(gan.__dict__["_generator_calls"]) == 1


def test_conditional_generate_uses_labels():
    gan = tiny_gan(num_classes=3)
    z = np.random.default_rng(0).normal(size=(3, LATENT)).astype("float32")
    a = gan.generate(z, labels=[0, 0, 0])
    b = gan.generate(z, labels=[2, 2, 2])
    assert not np.allclose(a, b)
    assert gan.generate(6, seed=0).shape == (6, 28, 28, 1)
    # The range is checked as `fit` checks it, the count by generate.
    with pytest.raises(ValueError, match=r"class ids in \[0, 3\).*label 5"):
        gan.generate(z, labels=[0, 1, 5])
    with pytest.raises(ValueError, match=r"Expected 3 labels in \[0, 3\)"):
        gan.generate(z, labels=[0, 1])


def test_save_and_load_keras_file_round_trip(tmp_path):
    gan = tiny_gan(gradient_penalty="r1", compile_kwargs={"loss": "hinge"})
    gan.fit(batches(random_images(16), 8), epochs=1, verbose=0)
    path = str(tmp_path / "gan.keras")
    gan.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert isinstance(loaded, ktg.GAN)
    np.testing.assert_array_equal(loaded.generate(4, seed=7), gan.generate(4, seed=7))
    assert loaded.gradient_penalty == "r1" and loaded.penalty_weight == 10.0
    assert isinstance(loaded.adversarial_loss, ktg.losses.HingeLoss)
    assert int(loaded.step_counter.numpy()) == 2
    assert int(loaded.generator_optimizer.iterations.numpy()) == 2
    for a, b in zip(
        gan.discriminator_optimizer.variables,
        loaded.discriminator_optimizer.variables,
        strict=True,
    ):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # Training goes on from the loaded state.
    loaded.fit(batches(random_images(16), 8), epochs=1, verbose=0)
    assert int(loaded.step_counter.numpy()) == 4


def test_get_config_round_trip():
    gan = tiny_gan(num_classes=2, discriminator_steps=3, seed=5)
    clone = ktg.GAN.from_config(gan.get_config())
    assert clone.num_classes == 2 and clone.discriminator_steps == 3 and clone.seed == 5
    assert clone.update == "alternating"
    simultaneous = ktg.GAN.from_config(tiny_gan(update="simultaneous").get_config())
    assert simultaneous.update == "simultaneous"
    assert clone.latent_dim == LATENT
    compile_config = gan.get_compile_config()
    assert compile_config["loss"]["class_name"] == "NonSaturatingLoss"
    clone.compile_from_config(compile_config)
    assert clone.generator_optimizer.learning_rate.numpy() == pytest.approx(2e-4)


@pytest.mark.tensorflow_only
def test_simultaneous_update_is_the_tutorials_joint_step():
    sgd = keras.optimizers.SGD
    gan = tiny_gan(
        update="simultaneous",
        compile_kwargs={
            "generator_optimizer": sgd(0.1),
            "discriminator_optimizer": sgd(0.1),
            "jit_compile": False,
        },
    )
    g, d = (
        keras.models.clone_model(gan.generator),
        keras.models.clone_model(gan.discriminator),
    )
    g.set_weights(gan.generator.get_weights())
    d.set_weights(gan.discriminator.get_weights())
    images = random_images(8)
    z = gan._draw_noise(0, 8, 8)[0]
    # The tutorial's step by hand: one forward, each loss by its own network.
    with tf.GradientTape() as g_tape, tf.GradientTape() as d_tape:
        fake = g(z, training=True)
        real_logits, fake_logits = d(images, training=True), d(fake, training=True)
        g_loss = tf.reduce_mean(tf.nn.softplus(-fake_logits))
        d_loss = tf.reduce_mean(tf.nn.softplus(-real_logits)) + tf.reduce_mean(
            tf.nn.softplus(fake_logits)
        )
    g_grads = g_tape.gradient(g_loss, g.trainable_variables)
    d_grads = d_tape.gradient(d_loss, d.trainable_variables)
    history = gan.fit(batches(images, 8), epochs=1, verbose=0).history
    assert history["g_loss"][0] == pytest.approx(float(g_loss), abs=1e-5)
    assert history["d_loss"][0] == pytest.approx(float(d_loss), abs=1e-5)
    for model, grads, trained in (
        (g, g_grads, gan.generator),
        (d, d_grads, gan.discriminator),
    ):
        for variable, grad, new in zip(
            model.trainable_variables, grads, trained.trainable_variables, strict=True
        ):
            expected = variable.numpy() - 0.1 * grad.numpy()
            np.testing.assert_allclose(new.numpy(), expected, atol=1e-5)


# ----------------------------------------------------------------- bad input


def test_bad_update_settings_are_one_clear_error():
    with pytest.raises(ValueError, match="Expected `update` in.*'joint'"):
        tiny_gan(update="joint")
    with pytest.raises(ValueError, match="discriminator_steps=1 with update='simul"):
        tiny_gan(update="simultaneous", discriminator_steps=2)
    # The CLI's settings are checked by the same function, with its words.
    with pytest.raises(ValueError, match="discriminator_steps=1 with update='simul"):
        TrainConfig(update="simultaneous", discriminator_steps=2)
    with pytest.raises(ValueError, match="Expected `discriminator_steps` >= 1"):
        TrainConfig(discriminator_steps=0)


def test_images_of_the_wrong_shape_are_refused():
    gan = tiny_gan()
    ds = batches(np.zeros((8, 32, 32, 1), "float32"), 4)
    with pytest.raises(ValueError, match=r"Expected images of shape \(28, 28, 1\)"):
        gan.fit(ds, epochs=1, verbose=0)


def test_uint8_images_are_refused_with_the_fix():
    gan = tiny_gan()
    ds = batches(np.zeros((8, 28, 28, 1), "uint8"), 4)
    with pytest.raises(ValueError, match="dtype uint8.*load_images"):
        gan.fit(ds, epochs=1, verbose=0)


def test_empty_dataset_is_refused():
    gan = tiny_gan()
    ds = batches(random_images(3), 4)
    with pytest.raises(ValueError, match="empty"):
        gan.fit(ds, epochs=1, verbose=0)
    if BACKEND == "tensorflow":  # a tf.data dataset of unknown size
        unknown = (
            tf.data.Dataset.from_tensor_slices(random_images(3))
            .filter(lambda x: False)
            .batch(4)
        )
        with pytest.raises(ValueError, match="yielded nothing"):
            gan.fit(unknown, epochs=1, verbose=0)


def test_labels_without_num_classes_are_refused():
    gan = tiny_gan()
    ds = batches(random_images(8), 4, labels=np.zeros(8, "int32"))
    with pytest.raises(ValueError, match="num_classes=None"):
        gan.fit(ds, epochs=1, verbose=0)


def test_num_classes_without_labels_is_refused():
    gan = tiny_gan(num_classes=2)
    with pytest.raises(ValueError, match=r"Expected \(images, labels\) batches"):
        gan.fit(batches(random_images(8), 4), epochs=1, verbose=0)


def test_unconditional_models_with_num_classes_are_refused():
    with pytest.raises(ValueError, match="Expected a generator with 2 input"):
        ktg.GAN(
            ktg.models.dcgan_generator(latent_dim=LATENT, width=8),
            ktg.models.dcgan_discriminator(width=8),
            latent_dim=LATENT,
            num_classes=2,
        )


def test_latent_dim_must_match_the_generator():
    with pytest.raises(
        ValueError, match=r"generator's input size 8\. Received: latent_dim=16"
    ):
        ktg.GAN(
            ktg.models.dcgan_generator(latent_dim=8, width=8),
            ktg.models.dcgan_discriminator(width=8),
            latent_dim=16,
        )


def test_models_without_inputs_or_with_a_sigmoid_are_refused():
    discriminator = ktg.models.dcgan_discriminator(width=8)
    no_inputs = keras.Sequential([keras.layers.Dense(28 * 28)])
    with pytest.raises(ValueError, match=r"generator with defined inputs.*keras.Input"):
        ktg.GAN(no_inputs, discriminator, latent_dim=LATENT)
    generator = ktg.models.dcgan_generator(latent_dim=LATENT, width=8)
    for last in (
        keras.layers.Dense(1, activation="sigmoid"),
        keras.layers.Activation("softmax"),
    ):
        squashed = keras.Sequential(
            [keras.Input((28, 28, 1)), keras.layers.Flatten(), last]
        )
        with pytest.raises(
            ValueError, match="outputs logits.*applies (sigmoid|softmax)"
        ):
            ktg.GAN(generator, squashed, latent_dim=LATENT)
    logits = keras.Sequential(
        [keras.Input((28, 28, 1)), keras.layers.Flatten(), keras.layers.Dense(1)]
    )
    assert ktg.GAN(generator, logits, latent_dim=LATENT).discriminator is logits


def test_unknown_loss_and_penalty_names_are_refused():
    with pytest.raises(ValueError, match="Expected `loss` to be one of"):
        tiny_gan(compile_kwargs={"loss": "nonsaturating"})
    with pytest.raises(ValueError, match="Expected `gradient_penalty` to be one of"):
        tiny_gan(gradient_penalty="gp")


def test_global_batch_not_divisible_by_replicas_is_refused():
    strategy = ktg.distribute.get_strategy("cpu", num_replicas=4)
    gan = tiny_gan(strategy=strategy)
    ds = batches(random_images(12), 6)
    with pytest.raises(ValueError, match="divisible by the 4 replica"):
        gan.fit(ds, epochs=1, verbose=0)
    if BACKEND == "tensorflow":  # a tf.data dataset of unknown batch size
        unbatched_size = tf.data.Dataset.from_tensor_slices(random_images(8)).batch(4)
        with pytest.raises(ValueError, match="fixed global batch size"):
            gan.fit(unbatched_size, epochs=1, verbose=0)


def test_compile_refuses_what_the_gan_owns():
    with pytest.raises(ValueError, match="does not take `optimizer`"):
        tiny_gan(compile_kwargs={"optimizer": "adam"})


@pytest.mark.tensorflow_only
def test_synchronized_batchnorm_with_xla_under_mirrored_is_explained():
    strategy = ktg.distribute.get_strategy("cpu", num_replicas=2)
    with pytest.raises(ValueError, match="synchronized BatchNormalization"):
        tiny_gan(norm="batch", strategy=strategy, compile_kwargs={"jit_compile": True})
    gan = tiny_gan(
        norm="batch", strategy=strategy, compile_kwargs={"jit_compile": "auto"}
    )
    assert gan.xla is False


@pytest.mark.tensorflow_only
def test_steps_per_execution_under_mirrored_is_refused():
    strategy = ktg.distribute.get_strategy("cpu", num_replicas=2)
    with pytest.raises(ValueError, match="steps_per_execution=1"):
        tiny_gan(strategy=strategy, compile_kwargs={"steps_per_execution": 2})


# Without XLA on TensorFlow too (an un-jitted JAX step runs op by op: minutes).
@pytest.mark.parametrize("jit_compile", [True] + [False] * (BACKEND != "jax"))
def test_steps_per_execution_gives_the_weights_of_one_step_per_call(jit_compile):

    def train(steps_per_execution):
        keras.utils.set_random_seed(1)
        gan = tiny_gan(
            compile_kwargs={
                "steps_per_execution": steps_per_execution,
                "jit_compile": jit_compile,
            },
            ema_halflife_images=16,
            discriminator_steps=2,
        )
        # 4 steps per epoch, 2 epochs: executions of 3 steps, then 1.
        history = gan.fit(batches(random_images(16), 4), epochs=2, verbose=0)
        return gan, history.history

    one, one_logs = train(1)
    three, three_logs = train(3)
    assert int(keras.ops.convert_to_numpy(three.step_counter)) == 8
    for a, b in zip(numpy_weights(one), numpy_weights(three), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=1e-6)
    for key in one_logs:
        np.testing.assert_allclose(three_logs[key], one_logs[key], atol=1e-6)


def test_xla_compiles_the_whole_step_on_one_device_only():
    one = tiny_gan(compile_kwargs={"jit_compile": True})
    assert one.xla and one.xla_whole_step
    two = tiny_gan(
        strategy=ktg.distribute.get_strategy("cpu", num_replicas=2),
        compile_kwargs={"jit_compile": True},
    )
    # JAX's jit compiles any step whole; TensorFlow's optimizer updates
    # under a multi-replica strategy stay outside XLA.
    assert two.xla and two.xla_whole_step == (BACKEND == "jax")
    assert not tiny_gan(compile_kwargs={"jit_compile": False}).xla_whole_step


def test_auto_xla_follows_keras_off_on_cpu_only_tensorflow_on_jax():
    # Keras's own jit_compile="auto": XLA off on a TensorFlow machine with
    # no GPU or TPU (this one), jax.jit on JAX.
    if BACKEND == "tensorflow":
        assert [d.device_type for d in tf.config.list_physical_devices()] == ["CPU"]
    one = tiny_gan(compile_kwargs={"jit_compile": "auto"})
    two = tiny_gan(
        strategy=ktg.distribute.get_strategy("cpu", num_replicas=2),
        compile_kwargs={"jit_compile": "auto"},
    )
    assert one.xla == two.xla == (BACKEND == "jax")
    assert tiny_gan(compile_kwargs={"jit_compile": True}).xla


def test_ema_generator_tracks_the_generator_and_is_used_to_generate(tmp_path):
    gan = tiny_gan(ema_decay=0.75)
    before = [w.numpy() for w in gan.generator.weights]
    np.testing.assert_array_equal(
        gan.generate(2, seed=0), gan.generate(2, seed=0, use_ema=False)
    )
    gan.step_counter.assign(100)  # past the warm-up: the decay is 0.75
    gan.fit(batches(random_images(8), 8), epochs=1, verbose=0)  # one step
    for average, new, old in zip(
        gan.ema_generator.weights, gan.generator.weights, before, strict=True
    ):
        expected = 0.75 * old + 0.25 * new.numpy() if new.trainable else new.numpy()
        np.testing.assert_allclose(average.numpy(), expected, atol=1e-6)
    ema_images = gan.generate(2, seed=0)
    assert not np.allclose(ema_images, gan.generate(2, seed=0, use_ema=False))
    path = str(tmp_path / "gan.keras")
    gan.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert loaded.ema_decay == 0.75
    np.testing.assert_array_equal(loaded.generate(2, seed=0), ema_images)
    with pytest.raises(ValueError, match=r"ema_decay` in \(0, 1\)"):
        tiny_gan(ema_decay=1.0)


def test_ema_warm_up_follows_the_generator_at_first():
    gan = tiny_gan(ema_decay=0.999)
    before = [w.numpy() for w in gan.generator.weights]
    gan.fit(batches(random_images(8), 8), epochs=1, verbose=0)  # step 0
    # decay = min(0.999, 1 / 10) = 0.1 at step 0.
    for average, new, old in zip(
        gan.ema_generator.weights, gan.generator.weights, before, strict=True
    ):
        if new.trainable:
            np.testing.assert_allclose(
                average.numpy(), 0.1 * old + 0.9 * new.numpy(), atol=1e-6
            )


def test_fit_takes_a_callback_list_and_still_keys_the_data_epoch():
    gan = tiny_gan()
    ds = ktg.data.load_images("mnist", batch_size=1000, source="offline")
    ends = []
    recorder = keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: ends.append(epoch)
    )
    given = keras.callbacks.CallbackList([recorder], model=gan)
    gan.fit(ds, epochs=2, steps_per_epoch=1, callbacks=given, verbose=0)
    assert ends == [0, 1]
    assert ktg.data.current_epoch() == 1
    assert int(gan.step_counter.numpy()) == 2


# Between them: labels, two critic steps with a penalty and dropout, the
# joint update, augmentation with ADA, spectral normalization and the EMA.
FLAT_CASES = [
    "conditional_ema",
    "dropout_wgan_gp",
    "simultaneous_r1_dropout",
    "ada_spectral_halflife",
]


@pytest.mark.jax_only
@pytest.mark.parametrize("case", FLAT_CASES)
def test_flat_all_reduce_gives_the_weights_and_logs_of_one_device(case):
    """Slow (up to about 20 s a case): a 4-device training compiled with
    `jax.shard_map`, beside the shared 1-device reference."""
    # Each device's own examples under jax.shard_map, the gradients and
    # logged shares summed as one buffer: the same as one device.
    gan_kwargs, compile_kwargs = PARITY_CASES[case]
    ref_w, ref_logs, _ = _reference(case)
    weights, logs, gan = _train(4, gan_kwargs, compile_kwargs, _labels(case), flat=True)
    assert gan.flat_all_reduce
    for a, b in zip(ref_w, weights, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5)
    assert logs.keys() == ref_logs.keys()
    for key in ref_logs:
        np.testing.assert_allclose(logs[key], ref_logs[key], atol=1e-5, rtol=1e-5)


def test_bfloat16_all_reduce_rounds_the_sum_over_replicas_only():
    """Slow (about 20-40 s): two trainings in bfloat16, each compiling its step
    with XLA, against the float32 runs of the `dropout_wgan_gp` parity case
    (shared)."""
    case = "dropout_wgan_gp"  # two critic steps, XLA on both backends
    gan_kwargs, compile_kwargs = PARITY_CASES[case]

    def trained(replicas):
        kwargs = {**compile_kwargs, "all_reduce_dtype": "bfloat16"}
        return _train(replicas, gan_kwargs, kwargs)

    one, _, one_gan = _replicated(case, 1)
    assert one_gan.all_reduce_dtype == "float32"
    one_bf16, _, _ = trained(1)
    for a, b in zip(one, one_bf16, strict=True):
        np.testing.assert_array_equal(a, b)  # nothing crosses replicas
    two, two_logs, _ = _replicated(case, 2)
    two_bf16, bf16_logs, gan = trained(2)
    assert gan.all_reduce_dtype == "bfloat16"
    assert gan.flat_all_reduce == (BACKEND == "jax")
    rounded = max(np.abs(a - b).max() for a, b in zip(two, two_bf16, strict=True))
    exact = max(np.abs(a - b).max() for a, b in zip(one, two, strict=True))
    print(f"bfloat16 all-reduce moved the weights by up to {rounded:.2e}")
    assert exact <= 1e-5 < rounded < 2e-3
    for key in ("d_loss", "g_loss"):  # the logged shares stay float32
        np.testing.assert_allclose(bf16_logs[key], two_logs[key], atol=1e-2)


def test_all_reduce_dtype_is_checked():
    gan = tiny_gan()
    with pytest.raises(ValueError, match="Expected `all_reduce_dtype` in"):
        gan.compile(all_reduce_dtype="float16")
    with pytest.raises(ValueError, match="all_reduce_dtype"):
        TrainConfig(all_reduce_dtype="int8")


@pytest.mark.jax_only
def test_bfloat16_all_reduce_with_batchnorm_is_refused_on_jax():
    strategy = ktg.distribute.get_strategy("cpu", num_replicas=2)
    with pytest.raises(ValueError, match="without BatchNormalization"):
        tiny_gan(
            strategy=strategy,
            compile_kwargs={"all_reduce_dtype": "bfloat16"},
            norm="batch",
        )


def test_a_sigmoid_inside_nested_discriminator_models_is_refused():
    generator = ktg.models.dcgan_generator(latent_dim=LATENT, width=8)
    head = keras.Sequential([keras.Input((784,)), keras.layers.Dense(1, "sigmoid")])
    images = keras.Input((28, 28, 1))
    nested = keras.Model(images, head(keras.layers.Flatten()(images)))
    # A sigmoid layer inside a Sequential inside a Sequential, then a reshape.
    inner = keras.Sequential([keras.Input((1,)), keras.layers.Activation("sigmoid")])
    deeper = keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            keras.layers.Flatten(),
            keras.layers.Dense(1),
            keras.Sequential([keras.Input((1,)), inner]),
            keras.layers.Reshape((1,)),
        ]
    )
    for discriminator in (nested, deeper):
        with pytest.raises(ValueError, match="outputs logits.*applies sigmoid"):
            ktg.GAN(generator, discriminator, latent_dim=LATENT)


def test_a_generator_that_cannot_reach_minus_one_gets_one_warning_at_its_line():
    discriminator = ktg.models.dcgan_discriminator(width=8)

    def generator(last):
        return keras.Sequential(
            [
                keras.Input((LATENT,)),
                keras.Sequential(
                    [keras.Input((LATENT,)), keras.layers.Dense(784), last]
                ),
                keras.layers.Reshape((28, 28, 1)),
            ],
            name="my_generator",
        )

    with pytest.warns(UserWarning) as caught:
        ktg.GAN(
            keras.Sequential(
                [keras.Input((LATENT,)), keras.layers.Dense(784, "sigmoid")]
                + [keras.layers.Reshape((28, 28, 1))],
                name="my_generator",
            ),
            discriminator,
            latent_dim=LATENT,
        )
    assert len(caught) == 1 and caught[0].filename == __file__
    message = str(caught[0].message)
    assert "'my_generator' ends in sigmoid" in message and "tanh" in message
    with pytest.warns(UserWarning, match="ends in relu"):
        ktg.GAN(generator(keras.layers.ReLU()), discriminator, latent_dim=LATENT)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ktg.GAN(generator(keras.layers.Activation("tanh")), discriminator, LATENT)
        ktg.GAN(ktg.models.dcgan_generator(LATENT, width=8), discriminator, LATENT)


def test_a_generator_whose_first_batch_has_no_negative_pixel_warns_at_fit():
    # A sigmoid no layer shows (inside a Lambda): seen on the first generated
    # batch, at the user's fit line, once.
    generator = keras.Sequential(
        [
            keras.Input((LATENT,)),
            keras.layers.Dense(784),
            keras.layers.Lambda(keras.ops.sigmoid),
            keras.layers.Reshape((28, 28, 1)),
        ],
        name="my_generator",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # nothing at GAN(...)
        gan = ktg.GAN(generator, ktg.models.dcgan_discriminator(width=8), LATENT)
    gan.compile()  # on JAX a jitted step: an un-jitted one runs op by op
    ds = batches(random_images(8), 8)
    with pytest.warns(UserWarning) as caught:
        gan.fit(ds, verbose=0)
    (warning,) = [w for w in caught if "negative pixel" in str(w.message)]
    assert warning.filename == __file__
    message = str(warning.message)
    assert "'my_generator' made a first batch in [0" in message and "tanh" in message
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        gan.fit(ds, verbose=0)  # once
    # A tanh generator: no warning at fit.
    gan = tiny_gan()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        gan.fit(ds, verbose=0)


def test_generate_refuses_the_labels_fit_refuses_with_the_same_messages():
    gan = tiny_gan(num_classes=3)
    with pytest.raises(ValueError, match=r"integer class ids.*label 1\.7"):
        gan.generate(2, labels=[1.0, 1.7])
    with pytest.raises(ValueError, match=r"one-hot\?.*argmax"):
        gan.generate(3, labels=np.eye(3))
    with pytest.raises(ValueError, match="class ids in \\[0, 3\\).*label 3"):
        gan.generate(2, labels=[0, 3])
    assert gan.generate(2, labels=np.array([2.0, 0.0]), seed=0).shape == (2, 28, 28, 1)


def test_a_subclass_that_overrides_metrics_is_refused_at_compile():
    class OwnTrackers(ktg.GAN):  # keras-io's pattern
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.d_loss_tracker = keras.metrics.Mean(name="d_loss")

        @property
        def metrics(self):
            return [self.d_loss_tracker]

    class MoreMetrics(ktg.GAN):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.extra = keras.metrics.Mean(name="extra")

        @property
        def metrics(self):
            return super().metrics + [self.extra]

    class SameMetrics(ktg.GAN):
        @property
        def metrics(self):
            return super().metrics

    networks = (
        ktg.models.dcgan_generator(latent_dim=LATENT, width=8),
        ktg.models.dcgan_discriminator(width=8),
    )
    with pytest.raises(ValueError, match=r"leaves out \['d_loss', .*no `d_loss_t"):
        OwnTrackers(*networks, latent_dim=LATENT).compile()
    with pytest.raises(ValueError, match=r"leaves out \[\] and adds \['extra'\]"):
        MoreMetrics(*networks, latent_dim=LATENT).compile()
    gan = SameMetrics(*networks, latent_dim=LATENT)
    gan.compile()
    history = gan.fit(batches(random_images(16), 8), epochs=2, verbose=0)
    assert len(history.history["d_loss"]) == 2


@keras.saving.register_keras_serializable(package="tests")
class OwnCompileNames(ktg.GAN):
    """keras-io's `compile(d_optimizer, g_optimizer, loss_fn)`, passed on."""

    def compile(self, d_optimizer, g_optimizer, loss_fn):
        self.named_by_the_user = True
        super().compile(
            discriminator_optimizer=d_optimizer,
            generator_optimizer=g_optimizer,
            loss=loss_fn,
        )


def test_a_subclass_compile_with_its_own_argument_names_saves_and_loads(tmp_path):
    gan = OwnCompileNames(
        ktg.models.dcgan_generator(latent_dim=LATENT, width=8),
        ktg.models.dcgan_discriminator(width=8),
        latent_dim=LATENT,
    )
    gan.compile(
        d_optimizer=keras.optimizers.Adam(1e-3),
        g_optimizer=keras.optimizers.Adam(2e-3),
        loss_fn="hinge",
    )
    gan.fit(batches(random_images(16), 8), epochs=1, verbose=0)
    gan.save(tmp_path / "gan.keras")
    # Keras compiles a loaded model from its saved compile settings: the
    # GAN's own, whatever the subclass's `compile` calls them.
    loaded = keras.saving.load_model(tmp_path / "gan.keras", safe_mode=True)
    assert type(loaded) is OwnCompileNames and loaded.compiled
    assert type(loaded.adversarial_loss) is type(gan.adversarial_loss)
    assert float(loaded.discriminator_optimizer.learning_rate) == pytest.approx(1e-3)
    assert float(loaded.generator_optimizer.learning_rate) == pytest.approx(2e-3)
    np.testing.assert_array_equal(loaded.generate(2, seed=0), gan.generate(2, seed=0))
    loaded.fit(batches(random_images(16), 8), epochs=1, verbose=0)  # trains on


def test_a_subclass_that_overrides_the_step_is_refused_with_the_hooks():
    class OwnStep(ktg.GAN):  # keras-io's pattern
        def train_step(self, *args):
            raise AssertionError("never called")

    networks = (
        ktg.models.dcgan_generator(latent_dim=LATENT, width=8),
        ktg.models.dcgan_discriminator(width=8),
    )
    with pytest.raises(
        ValueError, match=r"Received: `.*OwnStep.train_step`, which overrides it"
    ) as error:
        OwnStep(*networks, latent_dim=LATENT).compile()
    assert "AdversarialLoss" in str(error.value)
