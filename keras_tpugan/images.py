"""Turning batches of generated images into grids (PNG) and animations (GIF)."""

import math

import numpy as np
from PIL import Image


def to_uint8(images):
    """Maps float images in [-1, 1] to uint8 pixels.

    Args:
        images: Array `(n, h, w, c)` in [-1, 1].

    Returns:
        A uint8 array of the same shape.
    """
    images = np.asarray(images, dtype="float32")
    return np.clip(np.rint((images + 1.0) * 127.5), 0, 255).astype("uint8")


def grid_layout(num_images, num_classes=None):
    """The grid of a sample sheet: `(rows, cols, labels)`.

    Unconditional: a near-square grid of `num_images` cells, labels None.
    Conditional: one row per class, `ceil(num_images / num_classes)`
    columns, and the labels that fill it row by row.

    Args:
        num_images: Images wanted.
        num_classes: Classes of a conditional model, else None.

    Returns:
        `(rows, cols, labels)`; `labels` is an int32 array of
        `rows * cols` labels, or None.

    Example:

    >>> grid_layout(10)[:2]
    (3, 4)
    >>> grid_layout(10, num_classes=2)[:2]
    (2, 5)
    """
    if num_classes:
        cols = math.ceil(num_images / num_classes)
        labels = np.repeat(np.arange(num_classes), cols).astype("int32")
        return num_classes, cols, labels
    cols = math.ceil(math.sqrt(num_images))
    return math.ceil(num_images / cols), cols, None


def tile(images, rows=None, cols=None, pad=2, scale=1):
    """Tiles images into one grid image, padded by black lines.

    Args:
        images: Array `(n, h, w, c)` in [-1, 1] (c = 1 or 3).
        rows: Grid rows (default: enough for `cols`).
        cols: Grid columns (default: `ceil(sqrt(n))`).
        pad: Pixels between images and around the grid.
        scale: Integer upscaling of each pixel (nearest neighbour).

    Returns:
        A uint8 array `(H, W)` or `(H, W, 3)` where
        `H = rows * (h * scale + pad) + pad`, likewise `W`. Missing cells
        (when `n < rows * cols`) stay black.

    Example:

    >>> tile(np.zeros((4, 28, 28, 1))).shape
    (62, 62)
    """
    images = to_uint8(images)
    n, h, w, c = images.shape
    if c not in (1, 3):
        raise ValueError(f"Expected 1 or 3 channels. Received: {c} channels.")
    cols = cols or math.ceil(math.sqrt(n))
    rows = rows or math.ceil(n / cols)
    if rows * cols < n:
        raise ValueError(
            f"Expected rows * cols >= the {n} images. Received: rows={rows}, "
            f"cols={cols}."
        )
    if scale > 1:
        images = images.repeat(scale, axis=1).repeat(scale, axis=2)
        h, w = h * scale, w * scale
    grid = np.zeros((rows * (h + pad) + pad, cols * (w + pad) + pad, c), "uint8")
    for i, image in enumerate(images):
        r, q = divmod(i, cols)
        top, left = pad + r * (h + pad), pad + q * (w + pad)
        grid[top : top + h, left : left + w] = image
    return grid[..., 0] if c == 1 else grid


def save_grid(images, path, rows=None, cols=None, pad=2, scale=1):
    """Saves `tile(images, ...)` as a PNG file.

    Args:
        images: Array `(n, h, w, c)` in [-1, 1].
        path: Output file path.
        rows: As for `tile`.
        cols: As for `tile`.
        pad: As for `tile`.
        scale: As for `tile`.

    Returns:
        The path.
    """
    Image.fromarray(tile(images, rows, cols, pad, scale)).save(path)
    return path


def save_gif(frames, path, duration_ms=400):
    """Saves PNG files as an animated GIF that loops forever.

    Args:
        frames: Paths of the frames, in order.
        path: Output file path.
        duration_ms: Time each frame is shown.

    Returns:
        The path.
    """
    images = [Image.open(f).convert("P") for f in frames]
    images[0].save(
        path, save_all=True, append_images=images[1:], duration=duration_ms, loop=0
    )
    return path
