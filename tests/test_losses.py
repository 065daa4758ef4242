import keras
import numpy as np
import pytest

from keras_tpugan import losses

pytestmark = pytest.mark.both_backends

REAL = np.array([[2.0], [-1.0], [0.5]], "float32")
FAKE = np.array([[-3.0], [0.0], [1.5]], "float32")


def softplus(x):
    return np.log1p(np.exp(x))


EXPECTED = {
    "non_saturating": (
        softplus(-REAL[:, 0]) + softplus(FAKE[:, 0]),
        softplus(-FAKE[:, 0]),
    ),
    "hinge": (
        np.maximum(0, 1 - REAL[:, 0]) + np.maximum(0, 1 + FAKE[:, 0]),
        -FAKE[:, 0],
    ),
    "wasserstein": (FAKE[:, 0] - REAL[:, 0], -FAKE[:, 0]),
    "least_squares": (
        0.5 * ((REAL[:, 0] - 1) ** 2 + FAKE[:, 0] ** 2),
        0.5 * (FAKE[:, 0] - 1) ** 2,
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_per_example_values_match_the_formulas(name):
    loss = losses.get(name)
    d_expected, g_expected = EXPECTED[name]
    d = keras.ops.convert_to_numpy(loss.discriminator_loss(REAL, FAKE))
    g = keras.ops.convert_to_numpy(loss.generator_loss(FAKE))
    assert d.shape == (3,) and g.shape == (3,)
    assert d.dtype == np.float32
    np.testing.assert_allclose(d, d_expected, rtol=1e-6)
    np.testing.assert_allclose(g, g_expected, rtol=1e-6)


def test_bfloat16_logits_are_computed_in_float32():
    loss = losses.get("non_saturating")
    d = loss.discriminator_loss(
        keras.ops.cast(REAL, "bfloat16"), keras.ops.cast(FAKE, "bfloat16")
    )
    assert keras.backend.standardize_dtype(d.dtype) == "float32"


def test_label_smoothing():
    loss = losses.NonSaturatingLoss(label_smoothing=0.1)
    d = keras.ops.convert_to_numpy(loss.discriminator_loss(REAL, FAKE))
    expected = (
        0.9 * softplus(-REAL[:, 0]) + 0.1 * softplus(REAL[:, 0]) + softplus(FAKE[:, 0])
    )
    np.testing.assert_allclose(d, expected, rtol=1e-6)
    with pytest.raises(ValueError, match=r"label_smoothing` in \[0, 1\)"):
        losses.NonSaturatingLoss(label_smoothing=1.0)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_serialization_round_trip(name):
    loss = losses.get(name)
    config = keras.saving.serialize_keras_object(loss)
    clone = losses.get(config)
    assert type(clone) is type(loss) and clone.get_config() == loss.get_config()


def test_get_passes_instances_and_refuses_unknown_names():
    loss = losses.HingeLoss()
    assert losses.get(loss) is loss
    with pytest.raises(ValueError, match=r"one of \['hinge', 'least_squares'"):
        losses.get("minimax")
    # A Keras loss object gets the name of the loss it is here.
    with pytest.raises(ValueError, match=r"from_logits=True\)` is 'non_saturating'"):
        losses.get(keras.losses.BinaryCrossentropy(from_logits=True))
