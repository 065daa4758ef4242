import keras
import pytest

from keras_tpugan import precision


@pytest.mark.parametrize("name", precision.POLICIES)
def test_configure_sets_the_global_policy(name):
    assert precision.configure(name).name == name
    assert keras.mixed_precision.global_policy().name == name
    assert precision.needs_loss_scaling() == (name == "mixed_float16")


def test_unknown_policy():
    with pytest.raises(ValueError, match="Received: policy='bfloat16'"):
        precision.configure("bfloat16")
