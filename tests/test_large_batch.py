import keras
import numpy as np
import pytest
from conftest import batches, random_images, tiny_gan

from keras_tpugan import large_batch
from keras_tpugan.lars import LARS
from keras_tpugan.runs.config import TrainConfig
from keras_tpugan.runs.train import build_gan
from keras_tpugan.warmup import LinearWarmup

pytestmark = pytest.mark.both_backends


def lars_reference(weights, gradients, lr, momentum, eta, eps, decay, adapted):
    """LARS in numpy, step by step as in You et al. (2017)."""
    w, v = weights.astype("float64"), np.zeros_like(weights, "float64")
    for g in gradients:
        if adapted:
            w_norm, g_norm = np.linalg.norm(w), np.linalg.norm(g)
            ratio = (
                eta * w_norm / (g_norm + decay * w_norm + eps)
                if w_norm and g_norm
                else 1
            )
            step = lr * ratio * (g + decay * w)
        else:
            step = lr * g
        v = momentum * v + step
        w = w - v
    return w


@pytest.mark.parametrize("exclude", [None, ["kernel"]])
def test_lars_matches_the_numpy_reference(exclude):
    """A layer excluded by name steps as momentum SGD, on both backends
    (TensorFlow's update passes its own variables, which have no path)."""
    rng = np.random.default_rng(0)
    kernel = keras.Variable(rng.normal(size=(4, 3)).astype("float32"), name="kernel")
    bias = keras.Variable(rng.normal(size=(3,)).astype("float32"), name="bias")
    grads = [
        (
            rng.normal(size=(4, 3)).astype("float32"),
            rng.normal(size=(3,)).astype("float32"),
        )
        for _ in range(5)
    ]
    settings = dict(lr=0.5, momentum=0.9, eta=0.01, eps=1e-9, decay=1e-3)
    opt = LARS(
        learning_rate=settings["lr"],
        momentum=settings["momentum"],
        trust_coefficient=settings["eta"],
        epsilon=settings["eps"],
        weight_decay=settings["decay"],
        exclude_from_layer_adaptation=exclude,
    )
    expected_kernel = lars_reference(
        kernel.numpy(), [g[0] for g in grads], adapted=exclude is None, **settings
    )
    expected_bias = lars_reference(
        bias.numpy(), [g[1] for g in grads], adapted=False, **settings
    )
    for g_kernel, g_bias in grads:
        opt.apply([g_kernel, g_bias], [kernel, bias])
    np.testing.assert_allclose(kernel.numpy(), expected_kernel, atol=1e-6)
    np.testing.assert_allclose(bias.numpy(), expected_bias, atol=1e-6)
    assert int(opt.iterations.numpy()) == 5


def test_lars_excludes_names_and_validates():
    opt = LARS(exclude_from_layer_adaptation=["kernel"])
    assert not opt._adapted(keras.Variable(np.ones((2, 2)), name="kernel"))
    assert opt._adapted(keras.Variable(np.ones((2, 2)), name="other"))
    with pytest.raises(ValueError, match="trust_coefficient > 0"):
        LARS(trust_coefficient=0.0)


def test_warmup_ramps_then_hands_over():
    after = keras.optimizers.schedules.ExponentialDecay(1e-3, 10, 0.5)
    schedule = LinearWarmup(1e-3, warmup_steps=4, after=after)
    values = [float(schedule(step)) for step in (0, 1, 3, 4, 14)]
    np.testing.assert_allclose(values, [2.5e-4, 5e-4, 1e-3, 1e-3, 5e-4], rtol=1e-6)
    clone = LinearWarmup.from_config(schedule.get_config())
    assert float(clone(14)) == pytest.approx(5e-4)
    assert float(LinearWarmup(1e-3, 0)(0)) == pytest.approx(1e-3)


@pytest.mark.parametrize("name", ["lars", "lamb", "adam"])
def test_optimizers_survive_config_and_keras_save(name, tmp_path):
    opt = large_batch.make_optimizer(name, 1e-3, warmup_steps=5)
    clone = type(opt).from_config(opt.get_config())
    assert clone.get_config() == opt.get_config()
    gan = tiny_gan(
        compile_kwargs={
            "generator_optimizer": large_batch.make_optimizer(
                name, 1e-3, warmup_steps=5
            ),
            "discriminator_optimizer": large_batch.make_optimizer(name, 1e-3),
        }
    )
    gan.fit(batches(random_images(8), 4), epochs=1, verbose=0)
    path = str(tmp_path / "gan.keras")
    gan.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert type(loaded.generator_optimizer) is type(opt)
    schedule = loaded.generator_optimizer._learning_rate
    assert isinstance(schedule, LinearWarmup) and schedule.warmup_steps == 5
    np.testing.assert_array_equal(loaded.generate(2, seed=0), gan.generate(2, seed=0))
    for a, b in zip(
        gan.generator_optimizer.variables,
        loaded.generator_optimizer.variables,
        strict=True,
    ):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_learning_rate_scaling():
    assert large_batch.scaled_learning_rate(1e-4, 256, 64, "linear") == pytest.approx(
        4e-4
    )
    assert large_batch.scaled_learning_rate(1e-4, 256, 64, "sqrt") == pytest.approx(
        2e-4
    )
    assert large_batch.scaled_learning_rate(1e-4, 256, 64, "none") == 1e-4
    with pytest.raises(ValueError, match="Expected lr_scaling in"):
        large_batch.scaled_learning_rate(1e-4, 256, 64, "cubic")


def test_config_builds_lars_with_warmup():
    cfg = TrainConfig.preset("smoke").override(
        ["optimizer=lars", "warmup_epochs=2", "learning_rate=1.0"]
    )
    gan = build_gan(cfg, (28, 28, 1), steps_per_epoch=10)
    assert isinstance(gan.generator_optimizer, LARS)
    assert gan.generator_optimizer._learning_rate.warmup_steps == 20
    with pytest.raises(ValueError, match="steps_per_epoch with warmup_epochs"):
        build_gan(cfg, (28, 28, 1))
    with pytest.raises(ValueError, match="Expected optimizer in"):
        cfg.override(["optimizer=sgd"])


def test_config_scales_the_learning_rate_with_the_batch():
    cfg = TrainConfig.preset("smoke").override(
        [
            "lr_scaling=sqrt",
            "base_batch_size=64",
            "batch_size=256",
            "learning_rate=1e-4",
        ]
    )
    assert cfg.scaled_learning_rate == pytest.approx(2e-4)
    gan = build_gan(cfg, (28, 28, 1))
    assert float(gan.generator_optimizer.learning_rate.numpy()) == pytest.approx(2e-4)
    with pytest.raises(ValueError, match="Expected lr_scaling in"):
        cfg.override(["lr_scaling=cubic"])


def test_sqrt_adam_scales_the_rate_beta_2_and_epsilon():
    assert large_batch.scaled_adam_moments(0.999, 1e-7, 256, 64, "sqrt-adam") == (
        pytest.approx(0.996),
        pytest.approx(5e-8),
    )
    assert large_batch.scaled_adam_moments(0.999, 1e-7, 256, 64, "sqrt") == (
        0.999,
        1e-7,
    )
    with pytest.raises(ValueError, match="Expected beta_2 to stay in"):
        large_batch.scaled_adam_moments(0.9, 1e-7, 1024, 64, "sqrt-adam")
    cfg = TrainConfig.preset("smoke").override(
        [
            "lr_scaling=sqrt-adam",
            "base_batch_size=64",
            "batch_size=256",
            "learning_rate=1e-4",
            "d_learning_rate=4e-4",
            "d_beta_1=0.0",
        ]
    )
    gan = build_gan(cfg, (28, 28, 1))
    g, d = gan.generator_optimizer, gan.discriminator_optimizer
    assert float(g.learning_rate.numpy()) == pytest.approx(2e-4)
    assert float(d.learning_rate.numpy()) == pytest.approx(8e-4)  # two time-scales
    assert g.beta_1 == 0.5 and d.beta_1 == 0.0
    assert g.beta_2 == d.beta_2 == pytest.approx(0.996)
    assert g.epsilon == pytest.approx(5e-8)
    with pytest.raises(ValueError, match="Expected beta_2 to stay in"):
        cfg.override(["beta_2=0.9", "batch_size=1024"])
