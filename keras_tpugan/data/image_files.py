"""Reading image files and fitting images to one size, without TensorFlow.

`read_folder` decodes a folder of image files (flat, or one subfolder per
class, searched recursively) into one uint8 array; `FolderImages` stands
for such an array without holding it, decoding the files of the rows it is
indexed with (streaming, for folders larger than memory); `fit_image`
brings one image to a size by the resize policy (`ImageSource.resize`). They
use Pillow and numpy only, so every backend can read images the same way.
"""

import concurrent.futures
import os
import warnings

import numpy as np
from PIL import Image

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp", ".bmp")
# Pillow modes with one colour channel.
_GREY_MODES = ("1", "L", "LA", "La", "I", "I;16", "I;16B", "I;16L", "F")


def fit_image(image, size, resize="crop"):
    """Brings one image to `size` by the resize policy.

    `"crop"` keeps the largest centred window of the target's aspect ratio
    (a square for square targets), `"pad"` adds black borders (0, which is
    -1 once scaled) around the image up to that aspect ratio, and `"squash"`
    resizes the whole image as it is. The resize is Lanczos (antialiased
    when shrinking), as image-dataset tools for GANs do.

    Args:
        image: An array `(h, w, c)`, uint8 or float32.
        size: `(height, width)`.
        resize: `"crop"`, `"pad"` or `"squash"` (`image_source.RESIZE_POLICIES`).

    Returns:
        An array `(*size, c)` of the input's dtype.

    Example:

    >>> fit_image(np.zeros((218, 178, 3), "uint8"), (64, 64)).shape
    (64, 64, 3)
    """
    height, width = size
    h, w = image.shape[:2]
    if resize == "crop":
        # The largest h' x w' window with w' / h' = width / height.
        crop_h, crop_w = min(h, w * height // width), min(w, h * width // height)
        top, left = (h - crop_h) // 2, (w - crop_w) // 2
        image = image[top : top + crop_h, left : left + crop_w]
    elif resize == "pad":
        pad_h, pad_w = max(h, -(-w * height // width)), max(w, -(-h * width // height))
        top, left = (pad_h - h) // 2, (pad_w - w) // 2
        padded = np.zeros((pad_h, pad_w, image.shape[2]), image.dtype)
        padded[top : top + h, left : left + w] = image
        image = padded
    if image.shape[:2] == (height, width):
        return np.ascontiguousarray(image)
    if image.dtype == np.uint8 and image.shape[2] in (1, 3):
        mode = "L" if image.shape[2] == 1 else "RGB"
        pil = Image.fromarray(image[..., 0] if mode == "L" else image, mode)
        out = np.asarray(pil.resize((width, height), Image.LANCZOS))
        return out.reshape(height, width, image.shape[2])
    # Float images (or other channel counts): one 32-bit plane at a time.
    planes = [
        np.asarray(
            Image.fromarray(image[..., c].astype("float32"), "F").resize(
                (width, height), Image.LANCZOS
            )
        )
        for c in range(image.shape[2])
    ]
    return np.stack(planes, axis=-1).astype(image.dtype)


def convert_channels(images, channels):
    """Converts images to 1 (luminance, as Pillow's "L") or 3 channels.

    Args:
        images: An array `(..., c)` with c in 1, 2 (grey + alpha), 3 or 4
            (RGB + alpha); alpha is dropped.
        channels: 1, 3 or None (keep grey as 1 and colour as 3).

    Returns:
        An array `(..., channels)` of the input's dtype.
    """
    have = images.shape[-1]
    if have not in (1, 2, 3, 4):
        raise ValueError(
            "Expected images with 1 (grey), 2 (grey + alpha), 3 (RGB) or 4 "
            f"(RGBA) channels. Received: shape {images.shape}."
        )
    images = images[..., :1] if have == 2 else images[..., :3]
    have = images.shape[-1]
    if channels is None or channels == have:
        return images
    if channels == 3:
        return np.repeat(images, 3, axis=-1)
    weights = np.array([0.299, 0.587, 0.114], "float32")
    grey = images.astype("float32") @ weights
    if images.dtype == np.uint8:
        grey = np.clip(np.rint(grey), 0, 255)
    return grey[..., None].astype(images.dtype)


def list_images(directory):
    """The files under `directory` and their class, in a fixed order.

    A folder with subfolders and no image files of its own is a labelled
    dataset: one class per subfolder (in sorted order), its files found
    recursively. Any other folder is one unlabelled set of every file
    under it.

    Args:
        directory: A folder.

    Returns:
        `(paths, labels, class_names)`: sorted paths (every file but
        hidden ones; those that are not images are skipped on reading),
        int32 class ids or None, and the class names or None.
    """
    entries = sorted(e for e in os.listdir(directory) if not e.startswith("."))
    subfolders = [e for e in entries if os.path.isdir(os.path.join(directory, e))]
    own_images = [
        e
        for e in entries
        if not os.path.isdir(os.path.join(directory, e))
        and e.lower().endswith(IMAGE_EXTENSIONS)
    ]
    if subfolders and not own_images:
        paths, labels = [], []
        for label, name in enumerate(subfolders):
            found = _files_under(os.path.join(directory, name))
            paths += found
            labels += [label] * len(found)
        return paths, np.array(labels, "int32"), subfolders
    return _files_under(directory), None, None


def _files_under(directory):
    found = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [os.path.join(root, f) for f in files if not f.startswith(".")]
    return sorted(found)


def read_folder(image_source):
    """Decodes every image under a folder into one uint8 array.

    png, jpg, webp and bmp files are read (searched recursively); other
    files and files that fail to decode are skipped, with one warning that
    says how many and names the first. Grey, palette, RGB and RGBA images
    are converted to `channels` (alpha dropped); with `channels=None`, 1 if
    every image is grey, else 3. Each image is brought to `image_size` by
    `fit_image`. Files are decoded on a pool of threads.

    Args:
        image_source: An `ImageSource` of a folder (flat, or one subfolder
            per class): its `image_size`, `channels` and `resize` apply.

    Returns:
        `(images, labels, class_names)`: uint8 `(n, h, w, c)`, int32
        labels or None, class names or None.
    """
    _, labels, class_names, decoded = _scan(image_source, _decode)
    channels = image_source.channels
    if channels is None:
        channels = 1 if all(grey for _, grey in decoded) else 3
    images = np.stack([convert_channels(pixels, channels) for pixels, _ in decoded])
    return images, labels, class_names


# Threads that decode files: Pillow releases the GIL while it decodes.
_WORKERS = min(32, (os.cpu_count() or 1) + 4)


class _Unreadable(Exception):
    """A file that is not a readable png, jpg, webp or bmp image."""


def _opened(path, read):
    """`read(image)` of a file opened with Pillow; `_Unreadable` when the file
    is not a png, jpg, webp or bmp image Pillow can read."""
    if not path.lower().endswith(IMAGE_EXTENSIONS):
        raise _Unreadable("not a png, jpg, webp or bmp file")
    try:
        with Image.open(path) as image:
            return read(image)
    except (OSError, ValueError, Image.DecompressionBombError) as e:
        raise _Unreadable(f"{type(e).__name__}: {e}") from e


def _decode(path, size, resize):
    """`(pixels, grey)`: one file's uint8 pixels `(h, w, c)` fitted to `size`."""

    def pixels(image):
        grey = image.mode in _GREY_MODES
        return np.asarray(image.convert("L" if grey else "RGB")), grey

    pixels, grey = _opened(path, pixels)
    pixels = pixels.reshape(*pixels.shape[:2], -1)
    return fit_image(pixels, size, resize), grey


def _header(path, size, resize):
    """A file's Pillow mode, from its header alone (no pixels decoded; `size`
    and `resize` are `_decode`'s, unused)."""
    return _opened(path, lambda image: image.mode)


def _scan(image_source, probe):
    """Lists a folder and probes every file.

    `probe(path, size, resize)` (`_decode` or `_header`) runs on a pool of
    threads; files it finds unreadable are skipped with one warning that
    says how many and names the first.

    Returns:
        `(paths, labels, class_names, values)` for the kept files:
        `values[i]` is what `probe` returned for `paths[i]`.
    """
    directory = image_source.data
    size, resize = image_source.image_size, image_source.resize
    paths, labels, class_names = list_images(directory)
    if not paths:
        raise ValueError(
            f"Expected image files ({', '.join(IMAGE_EXTENSIONS)}) in "
            f"{directory!r} or its subfolders. Received: an empty folder."
        )

    def run(path):
        try:
            return probe(path, size, resize), None
        except _Unreadable as e:
            return None, str(e)

    with concurrent.futures.ThreadPoolExecutor(_WORKERS) as pool:
        results = list(pool.map(run, paths))
    kept = [i for i, (value, _) in enumerate(results) if value is not None]
    skipped = [(paths[i], why) for i, (value, why) in enumerate(results) if not value]
    if not kept:
        raise ValueError(
            f"Expected readable images in {directory!r}. Received: {len(paths)} "
            f"file(s), none of them a readable png, jpg, webp or bmp image "
            f"(first: {skipped[0][0]!r}, {skipped[0][1]})."
        )
    if skipped:
        warnings.warn(
            f"Skipped {len(skipped)} of the {len(paths)} files under "
            f"{directory!r} that are not readable images (first: "
            f"{skipped[0][0]!r}, {skipped[0][1]}).",
            stacklevel=4,
        )
    return (
        [paths[i] for i in kept],
        None if labels is None else labels[kept],
        class_names,
        [results[i][0] for i in kept],
    )


class FolderImages:
    """The images of a folder as a uint8 array that is read from disk on demand.

    What `read_folder` returns, without holding it: only the paths are in
    memory, and indexing with rows (`images[rows]`) decodes those files (on
    a pool of threads) exactly as `read_folder` would have, so a dataset
    built on it yields the same batches. At construction every file's
    header is read (not its pixels): files that are not images are skipped
    with one warning, and `channels=None` becomes 1 if every image is grey,
    else 3. A file that passes the header check but fails to decode later
    raises a `ValueError` naming it.

    Args:
        image_source: An `ImageSource` of a folder (flat, or one subfolder
            per class): its `image_size`, `channels` and `resize` apply.

    Attributes:
        labels: int32 class ids (one per kept file) or None.
        class_names: The class subfolders, or None.
        paths: The kept files, in the stored (sorted) order.

    Example:

    ```python
    images = FolderImages(ImageSource("photos/", image_size=64))
    images.shape  # (n, 64, 64, 3); nothing decoded yet
    batch = images[np.array([3, 0, 7])]  # uint8 (3, 64, 64, 3)
    ```
    """

    dtype = np.dtype("uint8")
    ndim = 4

    def __init__(self, image_source):
        paths, labels, class_names, modes = _scan(image_source, _header)
        channels = image_source.channels
        if channels is None:
            channels = 1 if all(mode in _GREY_MODES for mode in modes) else 3
        self.directory = image_source.data
        self.paths = paths
        self.labels = labels
        self.class_names = class_names
        self.size, self.resize = image_source.image_size, image_source.resize
        self.channels = channels
        self.shape = (len(self.paths), *self.size, channels)
        self.nbytes = 0  # no pixels are held

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, rows):
        rows = np.asarray(rows)
        if rows.ndim != 1 or not np.issubdtype(rows.dtype, np.integer):
            raise ValueError(
                "Expected a 1-D array of integer rows. Received: "
                f"shape {rows.shape}, dtype {rows.dtype}."
            )
        with concurrent.futures.ThreadPoolExecutor(_WORKERS) as pool:
            images = list(pool.map(self._read, rows.tolist()))
        if not images:
            return np.zeros((0, *self.shape[1:]), "uint8")
        return np.stack(images)

    def _read(self, row):
        path = self.paths[row]
        try:
            pixels, _ = _decode(path, self.size, self.resize)
        except _Unreadable as e:
            raise ValueError(
                f"Expected every streamed file to decode. Received: {path!r}, "
                f"{e}. Remove or replace the file and resume the run "
                "(`--resume`)."
            ) from e
        return convert_channels(pixels, self.channels)
