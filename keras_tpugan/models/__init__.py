"""Generator and discriminator builders: the reference DCGAN, and a ResNet.

Both use `Conv2DTranspose`/strided `Conv2D` only (no `UpSampling2D`, whose
gradients do not compile under XLA), keep their last layer in float32 under
mixed precision, and draw nothing random of their own: the discriminator's
optional dropout is `KeyedDropout`, whose masks the GAN keys by its seed,
the step and the example, so a training step depends only on those.
`RECIPES` holds the recommended settings that `GAN.from_preset` builds.
"""

from keras_tpugan.models.dcgan import dcgan_discriminator, dcgan_generator
from keras_tpugan.models.global_batch_normalization import GlobalBatchNormalization
from keras_tpugan.models.recipes import RECIPES
from keras_tpugan.models.resnet import resnet_discriminator, resnet_generator
from keras_tpugan.models.settings import (
    ARCHITECTURES,
    D_NORMS,
    NORMS,
    default_width,
)

__all__ = [
    "ARCHITECTURES",
    "D_NORMS",
    "GlobalBatchNormalization",
    "NORMS",
    "RECIPES",
    "dcgan_discriminator",
    "dcgan_generator",
    "default_width",
    "resnet_discriminator",
    "resnet_generator",
]
