"""`ImageSource`: what images to read and how, checked once where it is made."""

import dataclasses
import os
from typing import Any

from keras_tpugan.data.checks import describe
from keras_tpugan.tf_import import is_dataset

# How an image of another aspect ratio is brought to the target size:
# "crop": the largest centred window of the target's aspect ratio, resized;
# "pad": black borders to the target's aspect ratio, then resize;
# "squash": resize as it is (the aspect ratio changes).
RESIZE_POLICIES = ("crop", "pad", "squash")
# Where a dataset name is read from: TFDS, the offline MNIST subset, or
# "auto" (TFDS when it has the data or can download it, else the subset).
SOURCES = ("auto", "tfds", "offline")


@dataclasses.dataclass(frozen=True, eq=False)
class ImageSource:
    """What images to read and how: one value, checked once where it is made.

    `load_images`, `read_images` and `QualityMetrics.for_data` take one in
    place of their image options (their keyword form builds one with
    `ImageSource.of`), and the folder and TFDS readers read from it, so an
    image option is added here and nowhere else.

    Args:
        data: A TFDS dataset name, a folder of images, a numpy array of
            images, an `(images, labels)` tuple, or a `tf.data.Dataset`
            (see `load_images`).
        split: The TFDS split or a slice of one; `"train"` for data with
            no splits (folders, arrays, datasets).
        source: For a dataset name: `"auto"`, `"tfds"` or `"offline"`.
        image_size: An int (square) or `(height, width)` to bring every
            image to; None: the data's own size (a folder needs one). Held
            as `(height, width)` or None.
        channels: 1 (grey), 3 (RGB), or None (as the data).
        resize: How another aspect ratio is fitted: `"crop"`, `"pad"` or
            `"squash"`.
        image_key: The TFDS feature that holds the image.
        label_key: The TFDS feature that holds the label.
        data_dir: The TFDS data directory.
        stream_files: Decode a folder's files batch by batch instead of
            holding its images in memory.
        stream_tfds: Read a TFDS split's files batch by batch (a tf.data
            pipeline, on the TensorFlow backend) instead of holding them.

    Raises:
        ValueError: For an option out of range, a split for data without
            splits, a folder without `image_size`, or streaming of data that
            cannot stream, each saying what to pass instead.

    Example:

    >>> source = ImageSource("mnist", source="offline", image_size=32)
    >>> source.image_size, source.kind
    ((32, 32), 'name')
    """

    data: Any = "mnist"
    split: str = "train"
    source: str = "auto"
    image_size: Any = None
    channels: int | None = None
    resize: str = "crop"
    image_key: str | None = None
    label_key: str | None = None
    data_dir: str | None = None
    stream_files: bool = False
    stream_tfds: bool = False

    def __post_init__(self):
        object.__setattr__(self, "image_size", _checked_size(self.image_size))
        if self.channels not in (None, 1, 3) or isinstance(self.channels, bool):
            raise ValueError(
                "Expected channels=1 (grey), 3 (RGB) or None (as the data). "
                f"Received: channels={self.channels!r}."
            )
        if self.resize not in RESIZE_POLICIES:
            raise ValueError(
                f"Expected resize in {RESIZE_POLICIES}. Received: "
                f"resize={self.resize!r}."
            )
        if self.source not in SOURCES:
            raise ValueError(
                f"Expected `source` in {SOURCES}. Received: source={self.source!r}."
            )
        kind = self.kind
        if self.split != "train" and kind != "name":
            raise ValueError(
                "Expected split='train' for data with no splits (a folder, "
                f"arrays or a dataset). Received: split={self.split!r} with "
                f"{describe(self.data)}. Keep split='train', or pass only the "
                "part of the data to train on."
            )
        if self.stream_files and kind != "folder":
            raise ValueError(
                "Expected a folder of images with stream_files=True. Received: "
                f"{describe(self.data)}. Use stream_tfds for a TFDS name."
            )
        if self.stream_tfds and kind != "name":
            raise ValueError(
                "Expected a TFDS dataset name with stream_tfds=True. Received: "
                f"{describe(self.data)}. Use stream_files for a folder."
            )
        if kind == "folder" and self.image_size is None:
            raise ValueError(
                "Expected image_size (an int, or (height, width)) for the image "
                f"folder {self.data!r}: its images can have any size. Received: "
                "image_size=None. Pass the side to train at, such as "
                "image_size=64 (`--image-size 64` at the command line)."
            )

    @classmethod
    def of(cls, data="mnist", stream=False, **options):
        """An `ImageSource` from `load_images`' keyword form.

        `stream=True` streams a folder's files or a TFDS split, whichever
        `data` is. An `ImageSource` passed as `data` is returned as it is;
        an option beside it other than its default is refused.

        Args:
            data: An `ImageSource`, or the data (as `ImageSource.data`).
            stream: Read the data batch by batch.
            **options: The other fields of `ImageSource`, given explicitly.

        Returns:
            An `ImageSource`.
        """
        unknown = sorted(set(options) - set(cls.options()))
        if unknown:
            raise ValueError(
                f"Expected image options among {cls.options()}. Received: "
                f"{unknown}. Check the names."
            )
        if isinstance(data, cls):
            defaults = {f.name: f.default for f in dataclasses.fields(cls)}
            options = {k: v for k, v in options.items() if v != defaults[k]}
            if stream or options:
                beside = sorted(options) or ["stream"]
                raise ValueError(
                    "Expected the image options in the ImageSource, not beside "
                    f"it. Received: an ImageSource and {beside}. Make the "
                    "ImageSource with them (`dataclasses.replace(source, ...)` "
                    "changes one)."
                )
            return data
        kind = _kind(data)
        if stream and kind not in ("folder", "name"):
            raise ValueError(
                "Expected a folder of images or a TFDS dataset name with "
                "stream=True: only files are streamed. Received: "
                f"{describe(data)}. Use stream=False (the images held in memory "
                "as uint8), or write the images to a folder."
            )
        return cls(
            data,
            stream_files=bool(stream) and kind == "folder",
            stream_tfds=bool(stream) and kind == "name",
            **options,
        )

    @classmethod
    def options(cls):
        """The names `of` takes beside the data: the fields, and `stream`."""
        return tuple(f.name for f in dataclasses.fields(cls)[1:]) + ("stream",)

    @property
    def kind(self):
        """`"folder"`, `"name"` (TFDS or the offline subset), `"dataset"` (a
        `tf.data.Dataset`) or `"arrays"`."""
        return _kind(self.data)

    @property
    def streamed(self):
        """Whether the images are read batch by batch (either way)."""
        return self.stream_files or self.stream_tfds


def _kind(data):
    if isinstance(data, str):
        return "folder" if os.path.isdir(data) else "name"
    return "dataset" if is_dataset(data) else "arrays"


def _checked_size(image_size):
    """`(height, width)` from an int or a pair, or None."""
    if image_size is None:
        return None
    pair = (image_size, image_size) if isinstance(image_size, int) else image_size
    try:
        size = () if isinstance(pair, str) else tuple(int(s) for s in pair)
    except (TypeError, ValueError):
        size = ()
    if len(size) != 2 or min(size) < 1 or any(isinstance(s, bool) for s in pair):
        raise ValueError(
            "Expected image_size to be a positive int (square images) or "
            f"(height, width). Received: image_size={image_size!r}."
        )
    return size
