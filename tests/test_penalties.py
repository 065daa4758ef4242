import numpy as np
import pytest
import tensorflow as tf

from keras_tpugan import penalties

W = tf.constant(np.arange(1, 5, dtype="float32").reshape(1, 2, 2, 1) / 10.0)


def linear_critic(images):
    # D(x) = sum(w * x): its input gradient is w everywhere.
    return tf.reduce_sum(images * W, axis=[1, 2, 3])[:, None]


def test_r1_of_a_linear_critic_is_half_the_squared_weight_norm():
    real = tf.random.normal([3, 2, 2, 1])
    value = penalties.r1(linear_critic, real).numpy()
    np.testing.assert_allclose(value, [0.5 * float(tf.reduce_sum(W**2))] * 3, rtol=1e-6)


def test_wgan_gp_of_a_linear_critic():
    real, fake = tf.random.normal([3, 2, 2, 1]), tf.random.normal([3, 2, 2, 1])
    value = penalties.wgan_gp(linear_critic, real, fake, tf.constant([0.0, 0.5, 1.0]))
    norm = float(tf.sqrt(tf.reduce_sum(W**2)))
    np.testing.assert_allclose(value.numpy(), [(norm - 1.0) ** 2] * 3, rtol=1e-5)


def test_wgan_gp_interpolates_between_real_and_fake():
    seen = []

    def critic(images):
        seen.append(images)
        return linear_critic(images)

    real, fake = tf.zeros([2, 2, 2, 1]), tf.ones([2, 2, 2, 1])
    penalties.wgan_gp(critic, real, fake, tf.constant([0.25, 0.75]))
    np.testing.assert_allclose(seen[0][:, 0, 0, 0].numpy(), [0.25, 0.75])


def test_check_names():
    assert penalties.check(None) is None and penalties.check("r1") == "r1"
    with pytest.raises(ValueError, match="Received: gradient_penalty='wgan'"):
        penalties.check("wgan")
