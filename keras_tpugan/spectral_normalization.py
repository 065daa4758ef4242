"""`StatelessSpectralNormalization`: spectral norm that survives a stateless step."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_tpugan")
class StatelessSpectralNormalization(keras.layers.SpectralNormalization):
    """Keras's `SpectralNormalization`, applied in every call.

    Keras's layer writes the normalized kernel `W / sigma(W)` into the
    wrapped layer's weight while training and uses the weight as it is in
    inference, trusting the last training call to have normalized it. The
    GAN runs its discriminator with `stateless_call`, which keeps the new
    values of non-trainable weights only: the raw kernel stays the
    parameter (its gradient flows through the normalization, as in Miyato
    et al., 2018), so inference would see an unnormalized network. This
    layer normalizes in every call, training or not, and updates the
    power-iteration vector only while training, so `evaluate`, validation
    and any other inference use the network that was trained.

    Args:
        layer: The `Dense` or `Conv` layer to wrap.
        power_iterations: Power iterations per call.
        **kwargs: Base layer arguments (`name`, `dtype`).

    Example:

    >>> layer = StatelessSpectralNormalization(keras.layers.Dense(4))
    >>> layer(np.ones((2, 3), "float32"), training=False).shape
    (2, 4)
    """

    def call(self, inputs, training=False):
        vector_u, kernel = ops.cond(
            ops.all(ops.equal(self.kernel.value, 0)),
            lambda: (self.vector_u.value, self.kernel.value),
            self.normalized_weights,
        )
        if training:
            self.vector_u.assign(vector_u)
        # The normalized kernel for this call only; the raw one stays.
        raw = ops.copy(self.kernel.value)  # a snapshot, not the variable
        self.kernel.assign(kernel)
        output = self.layer(inputs)
        self.kernel.assign(raw)
        return ops.cast(output, inputs.dtype)
