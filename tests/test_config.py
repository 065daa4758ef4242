import dataclasses

import pytest

from keras_tpugan.runs.config import TrainConfig
from keras_tpugan.runs.presets import PRESETS


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_are_valid(name):
    assert isinstance(TrainConfig.preset(name), TrainConfig)


def test_override_parses_types():
    cfg = TrainConfig.preset("smoke").override(
        [
            "epochs=3",
            "learning_rate=1e-3",
            "jit_compile=false",
            "gradient_penalty=r1",
            "penalty_weight=none",
        ]
    )
    assert cfg.epochs == 3 and cfg.learning_rate == 1e-3 and cfg.jit_compile is False
    assert cfg.gradient_penalty == "r1" and cfg.penalty_weight is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.epochs = 4


def test_bad_overrides_say_what_is_valid():
    cfg = TrainConfig()
    with pytest.raises(
        ValueError, match="Unknown setting 'epoch'. Valid settings: .*epochs"
    ):
        cfg.override(["epoch=3"])
    with pytest.raises(
        ValueError, match="Expected epochs to be int. Received: 'three'"
    ):
        cfg.override(["epochs=three"])
    with pytest.raises(ValueError, match="Expected key=value"):
        cfg.override(["epochs"])
    with pytest.raises(ValueError, match="Expected precision in"):
        cfg.override(["precision=fp8"])
    with pytest.raises(ValueError, match="Expected batch_size >= 1"):
        cfg.override(["batch_size=0"])
    with pytest.raises(ValueError, match="Expected a preset in"):
        TrainConfig.preset("huge")


def test_every_range_is_checked_once_at_the_edge():
    cfg = TrainConfig()
    with pytest.raises(ValueError, match=r"Expected `ema_decay` in \(0, 1\)"):
        cfg.override(["ema_decay=1.5"])
    with pytest.raises(ValueError, match=r"Expected `jit_compile` to be True, False"):
        cfg.override(["jit_compile=sometimes"])
    with pytest.raises(ValueError, match="Expected penalty_weight only with"):
        cfg.override(["penalty_weight=5"])
    with pytest.raises(ValueError, match="Expected penalty_weight > 0"):
        cfg.override(["gradient_penalty=r1", "penalty_weight=-1"])
    with pytest.raises(ValueError, match="Expected gradient_penalty in"):
        cfg.override(["gradient_penalty=gp"])
    with pytest.raises(ValueError, match="Expected norm in"):
        cfg.override(["norm=group"])
    with pytest.raises(ValueError, match="Expected `source` in"):
        cfg.override(["source=web"])
    ok = cfg.override(
        ["ema_decay=0.99", "gradient_penalty=wgan-gp", "penalty_weight=5"]
    )
    assert ok.ema_decay == 0.99 and ok.penalty_weight == 5.0


def test_train_without_a_preset_picks_the_demo_or_the_images_recipe():
    from keras_tpugan.cli import arguments
    from keras_tpugan.cli import main as cli

    def config(*argv):
        args = cli._parser().parse_args(["train", "--out", "runs/x", *argv])
        return arguments.config_from_args(args)

    assert config() == TrainConfig.preset("demo")
    # Your own data: the demo's recipe at the learning rate its RGB
    # ablation chose, the model sized for the images.
    own = config("--data", "photos", "--image-size", "64")
    assert own == dataclasses.replace(
        TrainConfig.preset("images"), dataset="photos", image_size=64
    )
    demo = TrainConfig.preset("demo")
    recipe = ("norm", "d_norm", "batch_size", "beta_1", "ema_halflife_images")
    assert [getattr(own, k) for k in recipe] == [getattr(demo, k) for k in recipe]
    assert own.learning_rate == 1e-3 and demo.learning_rate == 4e-3
    assert own.width is None and own.source == "auto" and own.latent_dim == 128
    # A preset named: its settings, the data replaced.
    smoke = config("--preset", "smoke", "--data", "cifar10", "--set", "epochs=2")
    assert smoke == dataclasses.replace(
        TrainConfig.preset("smoke"), dataset="cifar10", source="auto", epochs=2
    )
    with pytest.raises(ValueError, match="Expected width >= 1, or None"):
        TrainConfig(width=0)
