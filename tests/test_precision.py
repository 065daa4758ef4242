import logging

import keras
import pytest
import tensorflow as tf

from keras_tpugan import distribute, precision
from keras_tpugan.runs.config import TrainConfig
from keras_tpugan.runs.prepared_run import prepare


@pytest.mark.parametrize("name", [p for p in precision.POLICIES if p != "auto"])
def test_configure_sets_the_global_policy(name):
    assert precision.configure(name).name == name
    assert keras.mixed_precision.global_policy().name == name
    assert precision.needs_loss_scaling() == (name == "mixed_float16")


def test_unknown_policy():
    with pytest.raises(ValueError, match="Received: policy='bfloat16'"):
        precision.configure("bfloat16")


@pytest.mark.parametrize(
    "accelerator, amx, expected",
    [
        (("tpu", None), False, "mixed_bfloat16"),
        (("gpu", (9, 0)), False, "mixed_bfloat16"),
        (("gpu", (7, 5)), False, "float32"),
        (("gpu", None), False, "float32"),
        (("cpu", None), True, "mixed_bfloat16"),
        (("cpu", None), False, "float32"),
    ],
)
def test_auto_picks_bfloat16_only_where_it_is_native(
    monkeypatch, caplog, accelerator, amx, expected
):
    monkeypatch.setattr(precision, "_accelerator", lambda strategy: accelerator)
    monkeypatch.setattr(precision, "_cpu_has_amx_bf16", lambda: amx)
    with caplog.at_level(logging.INFO, logger="keras_tpugan"):
        assert precision.configure("auto").name == expected
    assert f"precision auto = {expected}: " in caplog.text
    assert keras.mixed_precision.global_policy().name == expected


@pytest.mark.parametrize("one_device", [False, True])
def test_auto_on_this_machine_follows_its_devices(one_device):
    # One device is TensorFlow's default strategy, which lists no devices.
    strategy = distribute.get_strategy("auto", num_replicas=1) if one_device else None
    policy, reason = precision.resolve(strategy)
    accelerators = tf.config.list_logical_devices(
        "TPU"
    ) + tf.config.list_logical_devices("GPU")
    if not accelerators and keras.backend.backend() == "tensorflow":
        with open("/proc/cpuinfo") as f:
            amx = "amx_bf16" in f.read().split()
        assert policy == ("mixed_bfloat16" if amx else "float32")
        assert reason.startswith("CPU")


def test_explicit_policies_win_over_auto():
    config = TrainConfig.preset("smoke").override(["precision=mixed_bfloat16"])
    prepare(config, distribute.get_strategy("cpu", num_replicas=1))
    assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"
