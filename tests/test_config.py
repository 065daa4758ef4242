import dataclasses

import pytest

from keras_tpugan.config import PRESETS, TrainConfig


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
