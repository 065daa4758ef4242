"""What the throughput benchmarks divide by: the FLOPs a model does per
example, the FLOP/s of a large matmul on this device, and the device's
name.

FLOPs per image are counted from the layer shapes (multiply-adds x 2 of the
convolutions and dense layers; Keras has no FLOP counter).
"""

import time

import keras
import numpy as np

from keras_tpugan.tf_import import tf


def forward_flops(model):
    """Forward FLOPs per example of a functional model's conv/dense layers."""
    total = 0
    for layer in model.layers:
        if isinstance(layer, keras.layers.Conv2DTranspose):
            _, h, w, c_in = layer.input.shape
            k = np.prod(layer.kernel_size)
            total += 2 * h * w * c_in * k * layer.filters
        elif isinstance(layer, keras.layers.Conv2D):
            _, h, w, c_out = layer.output.shape
            k = np.prod(layer.kernel_size)
            total += 2 * h * w * c_out * k * layer.input.shape[-1]
        elif isinstance(layer, keras.layers.Dense):
            total += 2 * layer.input.shape[-1] * layer.units
    return int(total)


def matmul_flops_per_sec(dtype, n=2048, repeats=10):
    """FLOP/s of an n x n matmul chain on the backend's first device.

    On TensorFlow the better of its own kernel and XLA's; on JAX, XLA's.
    """
    if keras.backend.backend() == "jax":
        return _jax_matmul_flops_per_sec(dtype, n, repeats)
    a = tf.cast(tf.random.normal([n, n]), dtype)
    best = 0.0
    for xla in (False, True):

        @tf.function(jit_compile=xla)
        def chain(x):
            for _ in range(repeats):
                x = tf.matmul(x, a) * 0.01
            return x

        chain(a).numpy()  # trace and compile
        start = time.perf_counter()
        chain(a).numpy()
        best = max(best, 2 * n**3 * repeats / (time.perf_counter() - start))
    return best


def _jax_matmul_flops_per_sec(dtype, n, repeats):
    import jax

    a = jax.numpy.asarray(np.random.default_rng(0).normal(size=(n, n)), dtype)

    @jax.jit
    def chain(x):
        for _ in range(repeats):
            x = (x @ a) * 0.01
        return x

    chain(a).block_until_ready()  # trace and compile
    start = time.perf_counter()
    chain(a).block_until_ready()
    return 2 * n**3 * repeats / (time.perf_counter() - start)


def device_and_versions():
    """The backend's first device and the backend's version, as one line."""
    if keras.backend.backend() == "jax":
        import jax

        device = jax.devices()[0]
        name = f"{device.platform}:{device.id} ({device.device_kind})"
        return f"{name}; JAX {jax.__version__}"
    device = tf.config.list_logical_devices()[0].name
    return f"{device}; TF {tf.__version__}"
