"""A user's WGAN-GP under each `jit_compile` setting: seconds per step and ratios.

Usage:
    python benchmarks/jit_compile.py                 # batch 64, 3 critic steps
    python benchmarks/jit_compile.py --batch-size 256 --steps 10 --rounds 3

The networks are those a user brings from the usual Keras WGAN-GP example
(written here from its description, not copied): a critic of four strided
5x5 convolutions (64 to 512 filters) with LeakyReLU and dropout, and a
generator that upsamples a 4x4x256 tensor with convolutions and batch
normalization to 32x32 and crops to 28x28. `keras_tpugan.GAN` trains them
with the Wasserstein loss, the WGAN-GP penalty and `discriminator_steps`
critic steps, compiled with `jit_compile="auto"` (the default), `False` and
`True`. Each setting is timed in interleaved rounds after two untimed
ones (tracing, compiling), on the same batch, and the table gives the
best round's seconds per step and its ratio to `jit_compile=False`: a
ratio above 1 is slower. "auto" follows Keras: XLA off on a CPU-only
machine, on with a GPU or TPU.
"""

import argparse
import time

import keras
import numpy as np

import keras_tpugan as ktg

SETTINGS = ("auto", False, True)


def critic(width):
    """The critic: strided 5x5 convolutions, LeakyReLU, dropout, one logit."""
    layers = keras.layers
    inputs = keras.Input((28, 28, 1))
    h = layers.ZeroPadding2D(2)(inputs)  # 32x32, as the example pads MNIST
    for i, filters in enumerate((width, 2 * width, 4 * width, 8 * width)):
        h = layers.Conv2D(filters, 5, strides=2, padding="same")(h)
        h = layers.LeakyReLU(0.2)(h)
        if i in (1, 2):
            h = layers.Dropout(0.3)(h)
    h = layers.Dropout(0.2)(layers.Flatten()(h))
    return keras.Model(inputs, layers.Dense(1)(h), name="critic")


def generator(latent_dim, width):
    """The generator: dense to 4x4, three upsampling convolutions, tanh, crop."""
    layers = keras.layers
    inputs = keras.Input((latent_dim,))
    h = layers.Dense(4 * 4 * 4 * width, use_bias=False)(inputs)
    h = layers.LeakyReLU(0.2)(layers.BatchNormalization()(h))
    h = layers.Reshape((4, 4, 4 * width))(h)
    for filters in (2 * width, width):
        h = layers.UpSampling2D()(h)
        h = layers.Conv2D(filters, 3, padding="same", use_bias=False)(h)
        h = layers.LeakyReLU(0.2)(layers.BatchNormalization()(h))
    h = layers.UpSampling2D()(h)
    h = layers.Conv2D(1, 3, padding="same", activation="tanh")(h)
    return keras.Model(inputs, layers.Cropping2D(2)(h), name="generator")


def time_settings(batch_size=64, steps=5, rounds=2, critic_steps=3, width=64):
    """Seconds per step of the WGAN-GP under each `jit_compile` setting.

    Args:
        batch_size: Images per step.
        steps: Steps per timed call.
        rounds: Timed rounds per setting, interleaved; the best is kept.
        critic_steps: Critic updates per generator update.
        width: Filters of the critic's first convolution (64 in the example).

    Returns:
        A list of dicts, one per setting: `jit_compile`, `xla` (what it
        resolved to), `seconds_per_step`, `vs_off` (ratio to `False`).
    """
    latent_dim = 128
    images = np.random.default_rng(0).uniform(-1, 1, (batch_size, 28, 28, 1))
    data = np.repeat(images.astype("float32"), steps, axis=0)
    gans = {}
    for setting in SETTINGS:
        keras.utils.set_random_seed(0)
        gan = ktg.GAN(
            generator(latent_dim, width),
            critic(width),
            latent_dim=latent_dim,
            gradient_penalty="wgan-gp",
            discriminator_steps=critic_steps,
        )
        gan.compile(loss="wasserstein", jit_compile=setting)
        gans[setting] = gan
    best = {setting: float("inf") for setting in SETTINGS}
    # Two untimed rounds first: the first traces or compiles each step, and
    # on TensorFlow a step traced before the other GANs were built is traced
    # once more at its next `fit`.
    for round_ in range(rounds + 2):
        for setting, gan in gans.items():
            started = time.perf_counter()
            gan.fit(data, batch_size=batch_size, epochs=1, shuffle=False, verbose=0)
            seconds = (time.perf_counter() - started) / steps
            if round_ >= 2:
                best[setting] = min(best[setting], seconds)
    return [
        {
            "jit_compile": setting,
            "xla": bool(gans[setting].xla),
            "seconds_per_step": best[setting],
            "vs_off": best[setting] / best[False],
        }
        for setting in SETTINGS
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--critic-steps", type=int, default=3)
    parser.add_argument("--width", type=int, default=64)
    args = parser.parse_args(argv)
    rows = time_settings(
        batch_size=args.batch_size,
        steps=args.steps,
        rounds=args.rounds,
        critic_steps=args.critic_steps,
        width=args.width,
    )
    print(
        f"WGAN-GP, batch {args.batch_size}, {args.critic_steps} critic steps, "
        f"width {args.width}, backend {keras.backend.backend()}"
    )
    print("| jit_compile | XLA | s/step | vs False |")
    print("|---|---|---:|---:|")
    for row in rows:
        print(
            f"| {row['jit_compile']!r} | {'on' if row['xla'] else 'off'} | "
            f"{row['seconds_per_step']:.3f} | {row['vs_off']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
