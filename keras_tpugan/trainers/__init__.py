"""The GAN's training step: the shared contract and one step per backend.

Start reading at `keras_tpugan.trainers.base` (`GANStep`: the contract and
the objectives both backends share). Keras picks its backend when it is
first imported (`KERAS_BACKEND`); `BackendGANStep` is the matching step,
which `keras_tpugan.GAN` inherits: `TensorFlowGANStep` (`tf_step.py`) or
`JAXGANStep` (`jax_step.py`).
"""

import keras

BACKENDS = ("tensorflow", "jax")

if keras.backend.backend() == "jax":
    from keras_tpugan.trainers.jax_step import JAXGANStep as BackendGANStep
elif keras.backend.backend() == "tensorflow":
    from keras_tpugan.trainers.tf_step import TensorFlowGANStep as BackendGANStep
else:
    raise ImportError(
        f"Expected the Keras backend to be one of {BACKENDS}. Received: "
        f"KERAS_BACKEND={keras.backend.backend()!r}. Set KERAS_BACKEND=jax or "
        "KERAS_BACKEND=tensorflow before importing keras."
    )

__all__ = ["BACKENDS", "BackendGANStep"]
