import keras
import numpy as np
import pytest

from keras_tpugan import models
from keras_tpugan.models import resnet

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


def test_the_default_width_follows_the_reference_dcgan_plan():
    # 64 filters next to the images at every resolution, doubling inward.
    sides = (28, 32, 64, 128)
    assert [models.default_width((s, s, 3)) for s in sides] == [128, 256, 512, 1024]
    g = models.dcgan_generator(latent_dim=100, image_shape=(64, 64, 3))
    assert g.layers[1].units == 4 * 4 * 512
    convs = [
        layer for layer in g.layers if isinstance(layer, keras.layers.Conv2DTranspose)
    ]
    assert [c.filters for c in convs] == [256, 128, 64, 3]
    d = models.dcgan_discriminator(image_shape=(64, 64, 3))
    convs = [layer for layer in d.layers if isinstance(layer, keras.layers.Conv2D)]
    assert [c.filters for c in convs] == [64, 128, 256, 512]
    # The reference DCGAN's discriminator has 2.77M parameters (ndf=64);
    # the generator 3.58M, plus LayerNormalization's 0.25M here.
    assert d.count_params() == 2_764_737
    assert 3_500_000 < g.count_params() < 3_900_000
    # MNIST's size keeps the former default of 128.
    assert models.dcgan_generator(latent_dim=8).layers[1].units == 7 * 7 * 128


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


def test_resnet_models_at_32_64_and_128_pixels():
    for side in (32, 64, 128):
        g = models.resnet_generator(latent_dim=8, image_shape=(side, side, 3), width=32)
        d = models.resnet_discriminator(image_shape=(side, side, 3), width=32)
        assert g.output_shape == (None, side, side, 3) and d.output_shape == (None, 1)
    # Sized for the resolution: blocks halve the filters from the default
    # width (64 at the least); the discriminator mirrors it.
    g = models.resnet_generator(image_shape=(64, 64, 3))
    d = models.resnet_discriminator(image_shape=(64, 64, 3))
    assert g.layers[1].units == 4 * 4 * 512
    g_convs = [
        layer.filters for layer in g.layers if type(layer) is keras.layers.Conv2D
    ]
    # Per block (4x4 to 64x64: four): the shortcut's 1x1, then two 3x3;
    # then the image's 3x3.
    assert g_convs == [256] * 3 + [128] * 3 + [64] * 3 + [64] * 3 + [3]
    wrapped = [layer.layer for layer in d.layers if hasattr(layer, "power_iterations")]
    # Every convolution and the logit layer spectrally normalized.
    assert len(wrapped) == 3 * 4 + 2 + 1
    assert not any(type(layer) is keras.layers.Conv2D for layer in d.layers)
    assert [w.filters for w in wrapped if hasattr(w, "filters")][::3] == [
        64, 128, 256, 512, 512,
    ]  # fmt: skip
    assert keras.backend.standardize_dtype(d.output.dtype) == "float32"


def test_resnet_upsampling_is_nearest_neighbour_and_conditioning_matters():
    """Slow on JAX (about 10-30 s): a conditional ResNet generator and
    discriminator at 16x16 are built and run eagerly, op by op."""
    inputs = keras.Input((4, 4, 16))
    upsample = keras.Model(inputs, resnet.upsample(inputs))
    x = np.random.default_rng(0).normal(size=(2, 4, 4, 16)).astype("float32")
    expected = np.repeat(np.repeat(x, 2, axis=1), 2, axis=2)
    np.testing.assert_array_equal(np.asarray(upsample(x)), expected)
    g = models.resnet_generator(
        latent_dim=8, image_shape=(16, 16, 3), width=16, num_classes=3, norm="layer"
    )
    d = models.resnet_discriminator(image_shape=(16, 16, 3), width=16, num_classes=3)
    z = np.random.default_rng(1).normal(size=(3, 8)).astype("float32")
    labels, others = np.array([0, 1, 2], "int32"), np.array([1, 2, 0], "int32")
    images = np.asarray(g([z, labels]))
    assert images.shape == (3, 16, 16, 3) and np.abs(images).max() <= 1
    # Untrained, the class scales are 1 and shifts 0: move them to see the
    # conditioning reach the images; the projection reaches the logits.
    for layer in g.layers:
        if isinstance(layer, keras.layers.Embedding):
            layer.embeddings.assign(
                np.random.default_rng(2).normal(size=layer.embeddings.shape)
            )
    assert not np.allclose(np.asarray(g([z, labels])), np.asarray(g([z, others])))
    assert not np.allclose(d([images, others]), d([images, labels]))
