"""The recommended recipes: networks, optimizers and generator average, by name.

`GAN.from_preset(name, image_shape)` (`from_preset`) builds and compiles
one; the command line's presets of the same names hold these settings and
add the data and the schedule. Each part won its ablation on MNIST (a batch-normalized
generator, a spectrally normalized discriminator, Adam with `beta_1 = 0`,
a generator average over a fixed span of images); the measurements are in
the docs' ablations page (docs/results/ablations.md).
"""

import keras

from keras_tpugan.models.dcgan import dcgan_discriminator, dcgan_generator

# Each recipe: `TrainConfig` settings, under the same names.
RECIPES = {
    # Small images (the MNIST demo): a narrow DCGAN and Adam at 4e-3.
    "demo": dict(
        latent_dim=64,
        width=64,
        norm="batch",
        d_norm="spectral",
        learning_rate=4e-3,
        beta_1=0.0,
        ema_halflife_images=20_000,
    ),
    # Your own images: the DCGAN sized for the resolution
    # (`default_width`) and Adam at 1e-3, the best of three rates on both
    # seeds of an RGB benchmark at 32x32.
    "images": dict(
        latent_dim=128,
        width=None,
        norm="batch",
        d_norm="spectral",
        learning_rate=1e-3,
        beta_1=0.0,
        ema_halflife_images=20_000,
    ),
}


def from_preset(
    gan_class,
    preset,
    image_shape,
    num_classes=None,
    generator=None,
    discriminator=None,
    generator_optimizer=None,
    discriminator_optimizer=None,
    latent_dim=None,
    width=None,
    seed=0,
):
    """Builds and compiles a GAN with the recommended recipe.

    The recipe of the command line's preset of the same name
    (`models.RECIPES`): a DCGAN with a batch-normalized generator and a
    spectrally normalized discriminator, both trained by Adam with
    `beta_1=0`, and an average of the generator whose half-life is
    20,000 images. Networks and optimizers given replace the recipe's.
    Build it inside the strategy's scope, as any model.

    `GAN.from_preset` is this function as a class method.

    Args:
        gan_class: The class to build (`GAN.from_preset` passes its own).
        preset: `"images"` (your own images: the networks sized for
            `image_shape`, Adam at 1e-3) or `"demo"` (small images
            such as MNIST: a narrow DCGAN, Adam at 4e-3).
        image_shape: `(height, width, channels)` of the training images.
        num_classes: For a class-conditional GAN, the number of classes.
        generator: A generator in place of the recipe's.
        discriminator: A discriminator in place of the recipe's.
        generator_optimizer: An optimizer in place of the recipe's.
        discriminator_optimizer: Likewise, for the discriminator.
        latent_dim: The latent size (default: the recipe's; give the
            one of your own generator).
        width: Filters of the recipe networks' widest layer (default: the
            recipe's: 64 for `"demo"`, sized for the resolution by
            `models.default_width` for `"images"`).
        seed: The GAN's seed (latents, dropout, augmentation).

    Returns:
        A compiled GAN of `gan_class`.

    Example:

    ```python
    gan = keras_tpugan.GAN.from_preset("images", image_shape=(64, 64, 3))
    gan.fit(keras_tpugan.data.load_images("photos/", image_size=64), epochs=30)
    ```
    """
    if preset not in RECIPES:
        raise ValueError(
            f"Expected a preset in {sorted(RECIPES)}. Received: {preset!r}. Use "
            '"images" for your own images, "demo" for small ones such as MNIST.'
        )
    if len(tuple(image_shape)) != 3:
        raise ValueError(
            "Expected image_shape as (height, width, channels). Received: "
            f"{image_shape!r}."
        )
    recipe = RECIPES[preset]
    image_shape = tuple(int(n) for n in image_shape)
    latent_dim = latent_dim or recipe["latent_dim"]
    width = width or recipe["width"]
    if generator is None:
        generator = dcgan_generator(
            latent_dim=latent_dim,
            image_shape=image_shape,
            width=width,
            num_classes=num_classes,
            norm=recipe["norm"],
        )
    if discriminator is None:
        discriminator = dcgan_discriminator(
            image_shape=image_shape,
            width=width,
            num_classes=num_classes,
            norm=recipe["d_norm"],
        )
    gan = gan_class(
        generator=generator,
        discriminator=discriminator,
        latent_dim=latent_dim,
        num_classes=num_classes,
        seed=seed,
        ema_halflife_images=recipe["ema_halflife_images"],
    )
    gan.compile(
        generator_optimizer=generator_optimizer or _adam(recipe),
        discriminator_optimizer=discriminator_optimizer or _adam(recipe),
    )
    return gan


def _adam(recipe):
    return keras.optimizers.Adam(recipe["learning_rate"], beta_1=recipe["beta_1"])
