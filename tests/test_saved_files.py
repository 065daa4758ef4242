"""Files saved by earlier versions still load and generate the same images.

The fixtures were saved on the TensorFlow backend by the code of commit
`b5e8214` (before the package's modules moved into subpackages): a GAN of
the demo recipe at width 8 with 8 latents, fitted one epoch of two steps on
random images, saved whole (`GAN.save`, what `keras-tpugan train` writes as
`snapshots/gan_epoch_NNNN.keras`) and as its EMA generator alone (what it
writes as `generator.keras`), with the images both gave for four latents.
"""

import pathlib

import keras
import numpy as np
import pytest

import keras_tpugan as ktg

pytestmark = pytest.mark.both_backends

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="module")
def expected():
    with np.load(FIXTURES / "demo_gan_width8_expected.npz") as saved:
        return dict(saved)


def test_a_saved_gan_loads_and_generates_the_images_it_did(expected):
    gan = keras.saving.load_model(FIXTURES / "demo_gan_width8.keras", safe_mode=True)
    assert isinstance(gan, ktg.GAN) and gan.ema_generator is not None
    assert gan.latent_dim == 8
    images = gan.generate(expected["latents"])
    assert images.shape == (4, 28, 28, 1)
    np.testing.assert_allclose(images, expected["gan"], atol=1e-4)


def test_a_saved_generator_loads_and_generates_the_images_it_did(expected):
    generator = keras.saving.load_model(
        FIXTURES / "demo_generator_width8.keras", safe_mode=True
    )
    images = keras.ops.convert_to_numpy(
        generator(expected["latents"], training=False)
    ).astype("float32")
    np.testing.assert_allclose(images, expected["generator"], atol=1e-4)
    # The EMA generator is what the whole GAN generates with.
    np.testing.assert_allclose(expected["generator"], expected["gan"], atol=1e-6)
