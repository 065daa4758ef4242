"""`prepare`: the one set-up that train, sweep, tune and bench share."""

import dataclasses

import keras
import numpy as np
import pytest
from conftest import BACKEND

from keras_tpugan import distribute
from keras_tpugan.data.epoch_batches import EpochBatches
from keras_tpugan.runs.config import TrainConfig
from keras_tpugan.runs.prepared_run import PreparedRun, build_gan, prepare

pytestmark = pytest.mark.both_backends

SMOKE = TrainConfig.preset("smoke")


def test_prepare_seeds_applies_precision_loads_and_counts():
    config = dataclasses.replace(SMOKE, precision="mixed_bfloat16", batch_size=128)
    strategy = distribute.get_strategy("cpu", num_replicas=2)
    run = prepare(config, strategy)
    assert isinstance(run, PreparedRun) and run.config is config
    assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"
    assert run.replicas == 2 and run.strategy is strategy
    assert run.info["source"] == "offline" and run.info["num_examples"] == 4000
    assert run.steps_per_epoch == 4000 // 128
    if BACKEND == "tensorflow":  # tf.data
        assert run.dataset.element_spec.shape.as_list() == [128, 28, 28, 1]
    else:  # keras_tpugan.EpochBatches, which needs no TensorFlow
        assert isinstance(run.dataset, EpochBatches)
        assert run.dataset[0].shape == (128, 28, 28, 1) and len(run.dataset) == 31
    gan = run.build_gan()
    assert gan.generator.dtype_policy.name == "mixed_bfloat16"
    assert gan.latent_dim == config.latent_dim and gan.seed == config.seed
    # The placement, asked of the strategy once, is the GAN's too.
    placement = run.placement
    assert isinstance(placement, distribute.Placement)
    assert (placement.replicas, placement.processes, placement.chief) == (2, 1, True)
    assert placement.to_dict() == {
        "backend": BACKEND,
        "strategy": distribute.strategy_name(strategy),
        "replicas": 2,
        "processes": 1,
        "device_kind": "CPU",
    }
    assert gan.placement is placement  # given, not asked of the strategy again
    other = distribute.Placement.of(distribute.get_strategy("cpu", num_replicas=1))
    with pytest.raises(ValueError, match="Expected the placement of the strategy"):
        gan.set_placement(other)
    with pytest.raises(ValueError, match=r"divisible by the 2 replica\(s\)"):
        placement.check_global_batch(3)


def test_prepare_seeds_the_weights():
    first = prepare(SMOKE).build_gan().generator.get_weights()
    second = prepare(SMOKE).build_gan().generator.get_weights()
    other = prepare(dataclasses.replace(SMOKE, seed=1)).build_gan()
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], other.generator.get_weights()[0])


def test_the_config_trains_and_validates_on_slices_of_splits():
    config = SMOKE.override(["split=train[:10%]", "validation_split=test[:128]"])
    run = prepare(config)
    assert run.info["num_examples"] == 400 and run.steps_per_epoch == 400 // 64
    assert sum(1 for _ in run.validation) == 2  # 128 held-out digits, batches of 64


def test_prepare_takes_arrays_in_place_of_the_dataset():
    images = np.zeros((70, 28, 28, 1), "float32")
    run = prepare(SMOKE, data=images)
    assert run.info["source"] == "numpy" and run.steps_per_epoch == 70 // 64
    # Arrays have no splits: a config's slice is refused, not ignored.
    with pytest.raises(ValueError, match="Expected split='train' for data with"):
        prepare(SMOKE.override(["split=train[:10%]"]), data=images)


def test_prepare_refuses_what_cannot_run():
    with pytest.raises(
        ValueError, match="Expected a keras_tpugan.runs.config.TrainConfig"
    ):
        prepare({"batch_size": 64})
    # The global batch is checked against the replicas once, by `fit`,
    # before any step.
    four = distribute.get_strategy("cpu", num_replicas=4)
    run = prepare(dataclasses.replace(SMOKE, batch_size=30, width=8), four)
    gan = run.build_gan()
    with pytest.raises(ValueError, match="divisible by the 4 replica"):
        gan.fit(run.dataset, epochs=1, verbose=0)
    assert gan.optimizer.iterations.numpy() == 0


def test_the_config_sets_steps_per_execution_and_refuses_zero():
    gan = build_gan(TrainConfig(width=8, steps_per_execution=3), (28, 28, 1))
    assert gan.steps_per_execution == 3
    with pytest.raises(ValueError, match="Expected steps_per_execution >= 1"):
        TrainConfig(steps_per_execution=0)


def test_a_resnet_config_builds_trains_under_xla_and_saves(tmp_path):
    """Slow on JAX in the parallel suite (about 35 s): the conditional ResNet's
    step (spectral norm, conditional norms) compiles with XLA, and its
    generator runs again, eagerly, after loading."""
    config = dataclasses.replace(
        SMOKE,
        architecture="resnet",
        d_norm="spectral",
        width=16,
        latent_dim=8,
        jit_compile=True,
        conditional=True,
    )
    gan = build_gan(config, (16, 16, 3), num_classes=2)
    # The config's architecture, sized as asked, the norm from the config.
    assert any(hasattr(layer, "power_iterations") for layer in gan.discriminator.layers)
    assert gan.generator.output_shape == (None, 16, 16, 3)
    rng = np.random.default_rng(0)
    images = rng.uniform(-1, 1, (16, 16, 16, 3)).astype("float32")
    labels = (np.arange(16) % 2).astype("int32")
    before = [w.copy() for w in gan.generator.get_weights()]
    history = gan.fit(images, labels, batch_size=8, epochs=1, verbose=0)
    assert np.isfinite(history.history["d_loss"]).all()
    moved = [
        not np.array_equal(a, b)
        for a, b in zip(before, gan.generator.get_weights(), strict=True)
    ]
    assert all(moved) and gan.xla
    gan.save(tmp_path / "gan.keras")
    loaded = keras.saving.load_model(tmp_path / "gan.keras", safe_mode=True)
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(loaded.generate(4, labels=[0, 1, 0, 1], seed=3)),
        keras.ops.convert_to_numpy(gan.generate(4, labels=[0, 1, 0, 1], seed=3)),
    )
    with pytest.raises(ValueError, match="d_norm='spectral' and d_dropout=0"):
        dataclasses.replace(SMOKE, architecture="resnet")


def _unnamed(config):
    if isinstance(config, dict):
        names = ("name", "keras_history", "output_layers", "input_layers")
        return {k: _unnamed(v) for k, v in config.items() if k not in names}
    if isinstance(config, (list, tuple)):
        return [_unnamed(v) for v in config]
    return config


@pytest.mark.parametrize(
    "preset, image_shape", [("demo", (28, 28, 1)), ("images", (16, 16, 3))]
)
def test_from_preset_trains_as_the_command_lines_preset(preset, image_shape):
    """`GAN.from_preset` builds the recipe the CLI's preset of the same name
    trains: the same networks, optimizers and average, the same steps."""
    from keras_tpugan import GAN

    config = dataclasses.replace(TrainConfig.preset(preset), precision="float32")
    keras.mixed_precision.set_global_policy("float32")
    keras.utils.set_random_seed(3)
    ours = GAN.from_preset(preset, image_shape)
    keras.utils.set_random_seed(3)
    cli = build_gan(config, image_shape)
    for network in ("generator", "discriminator"):
        # The same layers with the same settings (Keras numbers unnamed layers
        # per process: their names differ).
        assert _unnamed(getattr(ours, network).get_config()) == _unnamed(
            getattr(cli, network).get_config()
        )
    assert ours.get_config().keys() == cli.get_config().keys()
    assert ours.ema_halflife_images == cli.ema_halflife_images == 20_000
    for role in ("generator_optimizer", "discriminator_optimizer"):
        ours_opt, cli_opt = (getattr(g, role).get_config() for g in (ours, cli))
        assert ours_opt == cli_opt
    assert float(ours.generator_optimizer.learning_rate) == pytest.approx(
        config.learning_rate
    )
    images = np.random.default_rng(0).uniform(-1, 1, (32, *image_shape))
    logs = [
        gan.fit(images, batch_size=16, epochs=1, verbose=0, shuffle=False).history
        for gan in (ours, cli)
    ]
    assert logs[0] == logs[1]
    np.testing.assert_array_equal(ours.generate(4, seed=0), cli.generate(4, seed=0))
    with pytest.raises(ValueError, match=r"Expected a preset in \['demo', 'images'\]"):
        GAN.from_preset("demo-conditional", image_shape)


def test_from_preset_keeps_the_users_networks_and_optimizers():
    from keras_tpugan import GAN, models

    generator = models.dcgan_generator(latent_dim=8, image_shape=(8, 8, 1), width=8)
    optimizer = keras.optimizers.SGD(0.1)
    gan = GAN.from_preset(
        "images",
        (8, 8, 1),
        generator=generator,
        discriminator_optimizer=optimizer,
        latent_dim=8,
    )
    assert gan.generator is generator and gan.latent_dim == 8
    assert gan.discriminator_optimizer is optimizer
    assert gan.generator_optimizer.get_config()["beta_1"] == 0.0
    assert gan.discriminator.layers[1].__class__.__name__ != "Conv2D"  # spectral
    with pytest.raises(ValueError, match="Expected image_shape as"):
        GAN.from_preset("images", (8, 8))
