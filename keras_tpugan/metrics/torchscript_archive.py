"""The tensors and settings of a TorchScript archive, read without PyTorch.

A TorchScript file (`torch.jit.save`) is a zip archive: `data.pkl` pickles
the module tree (each module's attributes: tensors, ints, lists of ints,
submodules) and each tensor's bytes sit in `data/<key>`. This reader
unpickles `data.pkl` with an unpickler that knows only the few globals such
a tree uses (module classes under `__torch__`, PyTorch's tensor rebuild,
its storage types, its int-list builder, `collections.OrderedDict`) and
refuses any other, so that reading a file runs none of its code. Written
here because no maintained package reads TorchScript weights without
importing PyTorch; it is all the FID network needs (`fid_inception`).
"""

import collections
import pickle
import zipfile

import numpy as np

_STORAGES = {
    "FloatStorage": "<f4",
    "DoubleStorage": "<f8",
    "HalfStorage": "<f2",
    "LongStorage": "<i8",
    "IntStorage": "<i4",
    "ShortStorage": "<i2",
    "CharStorage": "i1",
    "ByteStorage": "u1",
    "BoolStorage": "?",
}


class _Module:
    """A module of the tree: its pickled attributes, as a dict."""

    def __init__(self, *args):
        self.attributes = {}

    def __setstate__(self, state):
        self.attributes = dict(state)


class _Storage:
    def __init__(self, dtype):
        self.dtype = dtype


def _rebuild_tensor(storage, offset, size, stride, *unused):
    itemsize = storage.dtype.itemsize
    return np.lib.stride_tricks.as_strided(
        storage.array[offset:],
        shape=tuple(size),
        strides=tuple(s * itemsize for s in stride),
    ).copy()


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, archive, prefix):
        super().__init__(file)
        self.archive = archive
        self.prefix = prefix

    def find_class(self, module, name):
        if module.startswith("__torch__"):
            return type(name, (_Module,), {})
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _rebuild_tensor
        if module == "torch" and name in _STORAGES:
            return _Storage(np.dtype(_STORAGES[name]))
        if (module, name) == ("torch.jit._pickle", "build_intlist"):
            return list
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        raise pickle.UnpicklingError(
            f"a TorchScript weights file holds modules, tensors and ints; "
            f"this one refers to `{module}.{name}`, which is none of them"
        )

    def persistent_load(self, pid):
        # ("storage", storage type, key, location, number of elements)
        _, storage, key, _, count = pid
        data = self.archive.read(f"{self.prefix}data/{key}")
        storage = _Storage(storage.dtype)
        storage.array = np.frombuffer(data, storage.dtype, count)
        return storage


def read_torchscript(path):
    """Reads every tensor and setting of a TorchScript archive.

    Args:
        path: A file written by `torch.jit.save`.

    Returns:
        A dict from each attribute's dotted path in the module tree (such as
        `"net.layers.conv.weight"` or `"net.layers.conv.padding"`) to a numpy
        array (a tensor) or a Python value (an int, a bool, a list of ints).
        Submodules are not entries: their attributes are.

    Raises:
        ValueError: `path` is not a TorchScript archive, or holds something
            other than modules, tensors and plain values.

    Example:

    >>> weights = read_torchscript("default_1.pt")  # doctest: +SKIP
    >>> weights["net.layers.conv.weight"].shape  # doctest: +SKIP
    (32, 3, 3, 3)
    """
    try:
        with zipfile.ZipFile(path) as archive:
            pickles = [n for n in archive.namelist() if n.endswith("/data.pkl")]
            if len(pickles) != 1:
                raise ValueError("it has no single `data.pkl`")
            prefix = pickles[0][: -len("data.pkl")]
            with archive.open(pickles[0]) as file:
                root = _Unpickler(file, archive, prefix).load()
    except (zipfile.BadZipFile, pickle.UnpicklingError, KeyError, EOFError) as e:
        raise ValueError(
            f"Expected a TorchScript archive (a zip written by torch.jit.save). "
            f"Received: {path}, which cannot be read as one ({e})."
        ) from None
    except ValueError as e:
        if str(e).startswith("Expected"):
            raise
        raise ValueError(
            f"Expected a TorchScript archive (a zip written by torch.jit.save). "
            f"Received: {path}, which cannot be read as one ({e})."
        ) from None
    if not isinstance(root, _Module):
        raise ValueError(
            f"Expected a TorchScript archive whose data.pkl holds a module. "
            f"Received: {path}, which holds a {type(root).__name__}."
        )
    values = {}
    _flatten(root, "", values)
    return values


def _flatten(module, prefix, values):
    for name, value in module.attributes.items():
        if isinstance(value, _Module):
            _flatten(value, f"{prefix}{name}.", values)
        elif isinstance(value, (np.ndarray, int, float, bool, list)):
            values[f"{prefix}{name}"] = value
