import pytest
import tensorflow as tf

from keras_tpugan import distribute


def test_cpu_strategies():
    one = distribute.get_strategy("cpu", num_replicas=1)
    assert one.num_replicas_in_sync == 1
    four = distribute.get_strategy("cpu", num_replicas=4)
    assert isinstance(four, tf.distribute.MirroredStrategy)
    assert four.num_replicas_in_sync == 4
    assert distribute.get_strategy("cpu").num_replicas_in_sync == 4


def test_auto_on_a_machine_without_tpu_or_gpu_uses_the_cpus():
    strategy = distribute.get_strategy("auto")
    assert strategy.extended.worker_devices[0].endswith("CPU:0")


def test_explicit_kinds_that_are_missing_fail_clearly():
    with pytest.raises(ValueError, match="Expected a reachable TPU"):
        distribute.get_strategy("tpu")
    with pytest.raises(ValueError, match="at least one GPU"):
        distribute.get_strategy("gpu")
    with pytest.raises(ValueError, match="Expected `kind` to be one of"):
        distribute.get_strategy("cuda")
    with pytest.raises(ValueError, match="between 1 and the 4 CPU"):
        distribute.get_strategy("cpu", num_replicas=8)


def test_check_global_batch():
    strategy = distribute.get_strategy("cpu", num_replicas=4)
    assert distribute.check_global_batch(64, strategy) == 16
    with pytest.raises(
        ValueError,
        match="divisible by the 4 replica.*Received: global batch size 30"
        ".*for example 28",
    ):
        distribute.check_global_batch(30, strategy)


def test_chief():
    assert distribute.is_chief(distribute.get_strategy("cpu", num_replicas=2))
