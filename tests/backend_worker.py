"""Runs in its own process on one Keras backend, for `test_backends.py`.

    python backend_worker.py BACKEND DIR   # train, wait for the other, load

`train`: for each case, builds the tiny GAN, loads the initial weights and
the latents the test wrote to DIR (the same for both backends), trains
`STEPS` steps on one real batch (one step per epoch, so each step's logs
are kept) with those
latents in place of the GAN's own draw, and saves the logs, the weights,
the generator and the whole GAN (`.keras`) and images generated from them.
`load`: loads the generator and GAN the other backend saved and generates
the same images.
"""

import json
import os
import sys
import time

if __name__ == "__main__":  # (test_backends.py imports the constants only)
    BACKEND, DIR = sys.argv[1:3]
    os.environ["KERAS_BACKEND"] = BACKEND
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import ops  # noqa: E402

import keras_tpugan as ktg  # noqa: E402
from keras_tpugan import keyed_dropout  # noqa: E402
from keras_tpugan.runs import sample

LATENT = 8
BATCH = 8
STEPS = 3
# (The non-saturating loss runs in the simultaneous case, the alternating
# update in the other two.)
CASES = {
    # With dropout: its masks are a hash, the same numbers on both backends.
    "wgan_gp_n_critic_2_ema_dropout": (
        {
            "gradient_penalty": "wgan-gp",
            "discriminator_steps": 2,
            "ema_decay": 0.9,
            "d_dropout": 0.3,
        },
        {"loss": "wasserstein"},
    ),
    # Both networks from one forward: TensorFlow's two tapes, JAX's vjp.
    "simultaneous": ({"update": "simultaneous"}, {"loss": "non_saturating"}),
    "conditional_r1_hinge": (
        {"num_classes": 2, "gradient_penalty": "r1"},
        {"loss": "hinge"},
    ),
}


def build(case):
    gan_kwargs, compile_kwargs = CASES[case]
    gan_kwargs = dict(gan_kwargs)
    dropout = gan_kwargs.pop("d_dropout", 0.0)
    num_classes = gan_kwargs.get("num_classes")
    gan = ktg.GAN(
        ktg.models.dcgan_generator(latent_dim=LATENT, width=8, num_classes=num_classes),
        ktg.models.dcgan_discriminator(
            width=8, num_classes=num_classes, dropout=dropout
        ),
        latent_dim=LATENT,
        **gan_kwargs,
    )
    gan.compile(jit_compile=True, **compile_kwargs)
    return gan


def use_fixed_noise(gan, noise):
    """Replaces the GAN's latent draw by the given arrays, per step and stream."""
    z, alpha = noise["z"], noise["alpha"]

    def pick(step, stream):
        # (latents, WGAN-GP weights, augmentation numbers: none here, and
        # the dropout key with the first example: hashed on either backend)
        dropout = None
        if gan._dropout_slots:
            dropout = (keyed_dropout.key_of(7, ops.cast(step, "int32") * 4 + stream), 0)
        return (
            ops.take(z, step, axis=0)[stream],
            ops.take(alpha, step, axis=0)[stream],
            None,
            dropout,
        )

    if BACKEND == "jax":
        gan._draw_noise = lambda step, stream, global_batch: pick(step, stream)
    else:
        gan._draw_noise = lambda stream, local, global_batch: pick(
            gan.step_counter.value, stream
        )


def train(case):
    gan = build(case)
    gan.generator.load_weights(os.path.join(DIR, f"{case}_g.weights.h5"))
    gan.discriminator.load_weights(os.path.join(DIR, f"{case}_d.weights.h5"))
    if gan.ema_generator is not None:
        gan.ema_generator.set_weights(gan.generator.get_weights())
    use_fixed_noise(gan, np.load(os.path.join(DIR, "noise.npz")))
    data = np.load(os.path.join(DIR, "images.npz"))
    inputs = data["images"]
    if gan.num_classes:
        inputs = (inputs, data["labels"])
    ds = tf.data.Dataset.from_tensor_slices(inputs).batch(BATCH)
    history = gan.fit(ds, epochs=STEPS, verbose=0)
    out = os.path.join(DIR, f"{BACKEND}_{case}")
    weights = gan.generator.weights + gan.discriminator.weights
    if gan.ema_generator is not None:
        weights += gan.ema_generator.weights
    np.savez(out + "_weights.npz", *[ops.convert_to_numpy(w) for w in weights])
    with open(out + "_logs.json", "w") as f:
        json.dump({k: [float(x) for x in v] for k, v in history.history.items()}, f)
    gan.generator.save(out + "_generator.keras")
    gan.save(out + "_gan.keras")
    np.save(out + "_generated.npy", gan.generate(4, seed=5))
    np.save(out + "_raw.npy", gan.generate(4, seed=5, use_ema=False))


def load(case):
    other = "jax" if BACKEND == "tensorflow" else "tensorflow"
    saved = os.path.join(DIR, f"{other}_{case}")
    generator = sample.load_generator(saved + "_generator.keras")
    images, _ = sample.generate(generator, 4, seed=5)
    gan = keras.saving.load_model(saved + "_gan.keras")
    out = os.path.join(DIR, f"{BACKEND}_loaded_{case}")
    np.save(out + "_raw.npy", images)
    np.save(out + "_generated.npy", gan.generate(4, seed=5))
    # The loaded GAN is compiled and goes on training on this backend.
    data = np.load(os.path.join(DIR, "images.npz"))
    inputs = data["images"]
    if gan.num_classes:
        inputs = (inputs, data["labels"])
    gan.fit(tf.data.Dataset.from_tensor_slices(inputs).batch(BATCH), verbose=0)
    np.save(out + "_step.npy", ops.convert_to_numpy(gan.step_counter))


def wait_for_the_other(timeout_seconds=600):
    """Returns once the other backend's process has trained every case."""
    other = "jax" if BACKEND == "tensorflow" else "tensorflow"
    marker = os.path.join(DIR, f"{other}_trained")
    deadline = time.monotonic() + timeout_seconds
    while not os.path.exists(marker):
        if time.monotonic() > deadline:
            sys.exit(f"{other} did not finish training within {timeout_seconds} s")
        time.sleep(0.1)


if __name__ == "__main__":
    for name in CASES:
        train(name)
    open(os.path.join(DIR, f"{BACKEND}_trained"), "w").close()
    wait_for_the_other()
    for name in CASES:
        load(name)
    print("worker done")
