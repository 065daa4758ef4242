"""The backend half of `keras_tpugan.GAN`: its training step per backend.

Keras picks its backend when it is first imported (`KERAS_BACKEND`); the GAN
inherits the matching trainer: `TensorFlowTrainer` (`train_step(data)`, run
per replica by `tf.distribute`) or `JAXTrainer` (`train_step(state, data)`,
compiled by `jax.jit` over a `keras.distribution` mesh). Both share the loss
math written with `keras.ops` in `keras_tpugan.gan`.
"""

import keras

BACKENDS = ("tensorflow", "jax")

if keras.backend.backend() == "jax":
    from keras_tpugan.trainers.jax_trainer import JAXTrainer as Trainer
elif keras.backend.backend() == "tensorflow":
    from keras_tpugan.trainers.tensorflow_trainer import TensorFlowTrainer as Trainer
else:
    raise ImportError(
        f"Expected the Keras backend to be one of {BACKENDS}. Received: "
        f"KERAS_BACKEND={keras.backend.backend()!r}. Set KERAS_BACKEND=jax or "
        "KERAS_BACKEND=tensorflow before importing keras."
    )

__all__ = ["BACKENDS", "Trainer"]
