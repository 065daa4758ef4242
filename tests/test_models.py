import keras
import numpy as np
import pytest

from keras_tpugan import models

pytestmark = pytest.mark.both_backends


@pytest.mark.parametrize("shape", [(28, 28, 1), (32, 32, 3), (64, 64, 3)])
def test_shapes(shape):
    """Slow on JAX in the parallel suite (up to about 35 s): the networks run
    eagerly, and JAX compiles each op the first time it runs."""
    g = models.dcgan_generator(latent_dim=16, image_shape=shape, width=16)
    d = models.dcgan_discriminator(image_shape=shape, width=16)
    assert g.output_shape == (None, *shape)
    images = g(np.zeros((2, 16), "float32"))
    assert d(images).shape == (2, 1)


def test_width_sets_the_widest_layer():
    g = models.dcgan_generator(latent_dim=16, image_shape=(64, 64, 3), width=32)
    convs = [
        layer for layer in g.layers if isinstance(layer, keras.layers.Conv2DTranspose)
    ]
    assert [c.filters for c in convs] == [16, 8, 4, 3]
    d = models.dcgan_discriminator(image_shape=(64, 64, 3), width=32)
    convs = [layer for layer in d.layers if isinstance(layer, keras.layers.Conv2D)]
    assert [c.filters for c in convs] == [4, 8, 16, 32]


def test_conditional_models_take_labels():
    g = models.dcgan_generator(latent_dim=16, width=16, num_classes=10)
    d = models.dcgan_discriminator(width=16, num_classes=10)
    labels, others = np.array([0, 1, 2]), np.array([3, 4, 5])
    images = np.asarray(g([np.zeros((3, 16), "float32"), labels]))
    assert images.shape == (3, 28, 28, 1)
    assert d([images, labels]).shape == (3, 1)
    assert not np.allclose(d([images, others]), d([images, labels]))


def test_no_upsampling_and_synchronized_batchnorm():
    g = models.dcgan_generator(latent_dim=16, width=16, norm="batch")
    assert not any(isinstance(layer, keras.layers.UpSampling2D) for layer in g.layers)
    norms = [
        layer
        for layer in g.layers
        if isinstance(layer, keras.layers.BatchNormalization)
    ]
    assert norms and all(
        isinstance(layer, models.GlobalBatchNormalization) for layer in norms
    )
    on_tf = keras.backend.backend() == "tensorflow"
    assert all(layer.synchronized == on_tf for layer in norms)
    assert "synchronized" not in norms[0].get_config()


def test_outputs_are_float32_under_mixed_bfloat16():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    g = models.dcgan_generator(latent_dim=16, width=16)
    d = models.dcgan_discriminator(width=16)
    images = g(np.zeros((2, 16), "float32"))
    assert keras.backend.standardize_dtype(images.dtype) == "float32"
    assert keras.backend.standardize_dtype(d(images).dtype) == "float32"
    assert g.layers[1].compute_dtype == "bfloat16"


def test_bad_arguments():
    with pytest.raises(ValueError, match="side is 7 or 4 times a power of two"):
        models.dcgan_generator(image_shape=(30, 30, 1))
    with pytest.raises(ValueError, match="multiple of 4 for 28x28"):
        models.dcgan_generator(width=6)
    with pytest.raises(ValueError, match="height == width"):
        models.dcgan_discriminator(image_shape=(28, 32, 1))
    with pytest.raises(ValueError, match="Expected `norm`"):
        models.dcgan_generator(norm="group")
