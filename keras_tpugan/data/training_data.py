"""`TrainingData`: a run's training batches and held-out split, loaded together."""

import dataclasses
import logging
from typing import Any

from keras_tpugan.data.image_source import ImageSource
from keras_tpugan.data.loading import load_images

logger = logging.getLogger("keras_tpugan")


@dataclasses.dataclass(frozen=True, eq=False)
class TrainingData:
    """A run's data: its training batches and its held-out split.

    Made by `TrainingData.load` from one `ImageSource`, so that a run reads
    its data in one call and the held-out split is read with the training
    data's image options.

    Attributes:
        dataset: The training batches (`load_images`: global batches).
        info: `load_images`'s info dict of the training data.
        validation: The held-out split in batches for `fit(...,
            validation_data=...)`, or None.
        steps_per_epoch: Batches per epoch (None when the size is unknown).

    Example:

    >>> source = ImageSource("mnist", source="offline")
    >>> data = TrainingData.load(source, batch_size=64, validation_split="test")
    >>> data.steps_per_epoch, data.validation.element_spec.shape
    (62, TensorShape([64, 28, 28, 1]))
    """

    dataset: Any
    info: dict
    validation: Any = None
    steps_per_epoch: int | None = None

    @classmethod
    def load(
        cls,
        source,
        batch_size,
        labels=False,
        seed=0,
        xflip=False,
        validation_split=None,
        replicas=1,
    ):
        """Loads the training batches and, when asked, the held-out split.

        Args:
            source: An `ImageSource` of the training data.
            batch_size: The global batch size.
            labels: If True both yield `(images, labels)`.
            seed: Seed of the training shuffle and of `xflip`.
            xflip: Mirror training images left-right at random.
            validation_split: The split to hold out (a split of the same
                dataset name, in its stored order, never mirrored), or None.
                A split smaller than a batch is read in one smaller batch
                that still splits over the replicas. Data without splits (a
                folder, arrays) has none: no validation, said in the log.
            replicas: Replicas the validation batch must split over.

        Returns:
            A `TrainingData`.

        Raises:
            ValueError: When `source` is not an `ImageSource`, or
                `validation_split` names no split of the dataset.
        """
        if not isinstance(source, ImageSource):
            raise ValueError(
                "Expected a keras_tpugan.data.ImageSource. Received: "
                f"{type(source).__name__}. Make one with ImageSource.of(data, ...)."
            )
        dataset, info = load_images(
            source,
            batch_size=batch_size,
            labels=labels,
            seed=seed,
            xflip=xflip,
            return_info=True,
        )
        validation = None
        if validation_split is not None:
            validation = _held_out(
                source, validation_split, batch_size, labels, replicas
            )
        return cls(
            dataset=dataset,
            info=info,
            validation=validation,
            steps_per_epoch=(info["num_examples"] or 0) // batch_size or None,
        )


def _held_out(source, split, batch_size, labels, replicas):
    if source.kind != "name":
        what = {"folder": "a folder of images", "dataset": "a tf.data.Dataset"}
        logger.info(
            "validation: none (%s has no splits).", what.get(source.kind, "an array")
        )
        return None
    held_out = dataclasses.replace(source, split=split)

    def load(batch):
        return load_images(
            held_out, batch_size=batch, labels=labels, shuffle=False, return_info=True
        )

    # The split's size first: one that is smaller than a training batch is
    # validated in one smaller batch (still split evenly over the replicas).
    try:
        _, info = load(replicas)
    except ValueError as e:
        if "Unknown split" not in str(e):
            raise
        raise ValueError(
            f"Expected validation_split to name a split of {source.data!r}. "
            f"Received: validation_split={split!r} ({e}). Set it to one of "
            "those splits, or to None (`--set validation_split=none`)."
        ) from e
    count = info["num_examples"]
    if count is not None and count < batch_size:
        batch_size = count - count % replicas
    dataset, _ = load(batch_size)
    logger.info("validation: %s images of split %r.", count, split)
    return dataset
