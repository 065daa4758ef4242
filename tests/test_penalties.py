import numpy as np
import pytest
from keras import ops

from keras_tpugan import penalties

pytestmark = pytest.mark.both_backends

W = np.arange(1, 5, dtype="float32").reshape(1, 2, 2, 1) / 10.0


def linear_critic(images):
    # D(x) = sum(w * x): its input gradient is w everywhere.
    return ops.sum(images * W, axis=(1, 2, 3))[:, None]


def normal(shape, seed):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def test_r1_of_a_linear_critic_is_half_the_squared_weight_norm():
    value = ops.convert_to_numpy(penalties.r1(linear_critic, normal([3, 2, 2, 1], 0)))
    np.testing.assert_allclose(value, [0.5 * float(np.sum(W**2))] * 3, rtol=1e-6)


def test_wgan_gp_of_a_linear_critic():
    real, fake = normal([3, 2, 2, 1], 1), normal([3, 2, 2, 1], 2)
    value = penalties.wgan_gp(linear_critic, real, fake, np.array([0.0, 0.5, 1.0]))
    norm = float(np.sqrt(np.sum(W**2)))
    np.testing.assert_allclose(
        ops.convert_to_numpy(value), [(norm - 1.0) ** 2] * 3, rtol=1e-5
    )


def test_wgan_gp_interpolates_between_real_and_fake():
    # D(x) = |x|^2 / 2 has input gradient x: the penalty is (|x_hat| - 1)^2,
    # and x_hat = alpha on 4 pixels between 0 and 1, so |x_hat| = 2 alpha.
    def critic(images):
        return 0.5 * ops.sum(ops.square(images), axis=(1, 2, 3))[:, None]

    real, fake = np.zeros([2, 2, 2, 1], "float32"), np.ones([2, 2, 2, 1], "float32")
    value = penalties.wgan_gp(critic, real, fake, np.array([0.25, 1.0], "float32"))
    np.testing.assert_allclose(ops.convert_to_numpy(value), [0.25, 1.0], rtol=1e-5)


def test_check_names():
    assert penalties.check(None) is None and penalties.check("r1") == "r1"
    with pytest.raises(ValueError, match="Received: gradient_penalty='wgan'"):
        penalties.check("wgan")
