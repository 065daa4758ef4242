"""What `GAN.fit` and `GAN.evaluate` check of their input, and the order
they run callbacks in.

Everything here runs once per `fit` (or per dataset), never per step: an
accelerator would pay for a check inside the step.
"""

import warnings
import weakref

import keras
import numpy as np

from keras_tpugan import data as data_lib
from keras_tpugan import directions, gan_checks
from keras_tpugan.data.epoch_batches import underlying
from keras_tpugan.tf_import import is_dataset

# How far outside [-1, 1] images may stray (rounding) before fit warns.
RANGE_SLACK = 1e-3


def range_message(low, high):
    if low >= 0.0 and high <= 1.0 + RANGE_SLACK:
        fix = "images in [0, 1]? Map `images * 2 - 1`"
    elif low >= 0.0 and high <= 255.0 + RANGE_SLACK:
        fix = "0-255 pixels? Map `images / 127.5 - 1`"
    else:
        fix = "rescale them to [-1, 1]"
    return (
        "Expected images in [-1, 1], the range of the generator's tanh "
        f"output. Received: a first batch in [{low:.4g}, {high:.4g}] ({fix}, "
        "or load them with `keras_tpugan.data.load_images`, which scales "
        "them). The discriminator can tell real from generated images by "
        "their range alone."
    )


def check_labels(labels, num_classes):
    """Labels must be integer class ids in [0, num_classes), one per image."""
    shape = labels.shape
    if labels.ndim > 1 and not (labels.ndim == 2 and shape[1] == 1):
        raise ValueError(
            f"Expected integer class ids in [0, {num_classes}), one per image "
            f"(shape (batch,)). Received: labels of shape {shape} (one-hot?). "
            "Map `tf.argmax(labels, axis=-1)` over the dataset."
        )
    if labels.size == 0:
        return
    if not np.issubdtype(labels.dtype, np.integer):
        if not np.all(np.isfinite(labels)) or np.any(labels != np.round(labels)):
            bad = labels[~np.isfinite(labels) | (labels != np.round(labels))]
            raise ValueError(
                f"Expected integer class ids in [0, {num_classes}). Received: "
                f"label {bad.flat[0].item()!r} (dtype {labels.dtype}). Pass class ids, "
                "for example `tf.cast(labels, 'int32')` of whole numbers."
            )
    outside = labels[(labels < 0) | (labels >= num_classes)]
    if outside.size:
        raise ValueError(
            f"Expected class ids in [0, {num_classes}) for num_classes="
            f"{num_classes}. Received: label {outside.flat[0].item()!r}. Relabel the "
            "data, or build the GAN with a larger num_classes."
        )


class FitInput:
    """What `GAN.fit` and `GAN.evaluate` check of their input, and remember.

    The GAN holds one: the datasets whose first batch was checked (once per
    dataset, not per fit), whether the range warning was given, and
    whether the generator's range was checked.

    Args:
        gan: The `keras_tpugan.GAN`.
        output_range_checked: Whether the generator's output range is known
            already (from its last activation; see `gan_checks`).
    """

    def __init__(self, gan, output_range_checked):
        self.gan = gan
        self.output_range_checked = bool(output_range_checked)
        self.warned_range = False
        self.checked_datasets = weakref.WeakSet()

    def check(self, x, y, batch_size):
        """Checks `fit`'s or `evaluate`'s input before any step: not empty, and a
        global batch that splits evenly over the replicas; then its first batch
        (`check_first_batch`)."""
        replicas = self.gan.placement.replicas
        first_batch = None
        batches = underlying(x)  # an EpochBatches, or one repeated
        if batches is not None:
            global_batch = batches.batch_size
        elif isinstance(x, keras.utils.PyDataset):
            first_batch = first_batch_of(x)
            if first_batch is None:
                raise ValueError(
                    "Expected a dataset that yields batches; this "
                    f"{type(x).__name__} is empty (0 batches). Check its size "
                    "against the batch size."
                )
            global_batch = int(np.shape(keras.tree.flatten(first_batch)[0])[0])
        elif is_dataset(x):
            if int(x.cardinality()) == 0:
                raise ValueError(
                    "Expected a dataset that yields batches; this one is "
                    "empty (cardinality 0). Check its size against the batch "
                    "size: batches are dropped when `drop_remainder=True`."
                )
            spec = keras.tree.flatten(x.element_spec)[0]
            global_batch = spec.shape[0] if spec.shape.rank else None
            if global_batch is None and replicas > 1:
                raise ValueError(
                    f"Expected a dataset with a fixed global batch size under "
                    f"{replicas} replicas. Received: element_spec "
                    f"{x.element_spec} (unknown batch size). Batch it with "
                    "`drop_remainder=True`, as `keras_tpugan.data.load_images` "
                    "does."
                )
        else:
            global_batch = batch_size or 32
        if global_batch is not None:
            self.gan.placement.check_global_batch(global_batch)
        self.check_first_batch(x, y, first_batch)

    def check_first_batch(self, x, y, first_batch=None):
        """Checks the data's conventions once, on its first batch only.

        Nothing is checked per step (an accelerator would pay for it);
        `load_images` data is not looked at (it is made to the conventions).
        Reading one batch of a dataset with `.cache()` upstream is safe:
        TensorFlow discards a partly filled cache rather than truncate it.
        `first_batch` is the dataset's first batch when the caller has
        already read it.
        """
        if not (isinstance(x, keras.utils.PyDataset) or is_dataset(x)):
            self.check_conventions(x, y)
            return
        if data_lib.is_normalized(x) or x in self.checked_datasets:
            return
        if first_batch is None:
            first_batch = first_batch_of(x)
        if first_batch is None:
            return  # empty: `fit` says so
        images, labels, _ = keras.utils.unpack_x_y_sample_weight(first_batch)
        self.check_conventions(images, labels)
        self.checked_datasets.add(x)  # once per dataset, not per fit

    def check_generated_range(self):
        """Warns once when the generator's first batch has no negative pixel."""
        if self.output_range_checked:
            return
        self.output_range_checked = True
        # numpy latents from their own seed: the GAN's random state is untouched.
        images = self.gan.generate(8, seed=0, use_ema=False)
        gan_checks.warn_one_sided_samples(self.gan.generator, images, stacklevel=4)

    def check_conventions(self, x, y):
        """Checks labels and warns once about images outside [-1, 1]."""
        if x is None or "int" in str(getattr(x, "dtype", "")):
            return  # integer images are refused in the step, with the fix
        images = keras.ops.convert_to_numpy(x)
        if self.gan.num_classes is not None and y is not None:
            check_labels(keras.ops.convert_to_numpy(y), self.gan.num_classes)
        if images.size and not self.warned_range:
            low, high = float(np.nanmin(images)), float(np.nanmax(images))
            # A batch of [-1, 1] images without one negative pixel is not
            # plausible: it is [0, 1] data.
            if low < -1.0 - RANGE_SLACK or high > 1.0 + RANGE_SLACK or low >= 0:
                self.warned_range = True
                warnings.warn(range_message(low, high), stacklevel=4)

    def callbacks(self, callbacks, verbose="auto"):
        """`fit`'s callbacks ordered as it needs (`ordered_callbacks`), with
        a new `DataEpoch` first.

        Returns:
            `(callbacks, data_epoch)`.
        """
        data_epoch = _DataEpoch()
        return ordered_callbacks(callbacks, data_epoch, verbose), data_epoch


def first_batch_of(data):
    """The first batch of a `PyDataset` or `tf.data.Dataset`; None when empty.

    A `PyDataset`'s batch that is not a tuple is the images alone.
    """
    if isinstance(data, keras.utils.PyDataset):
        if data.num_batches == 0:
            return None
        batch = data[0]
        return batch if isinstance(batch, tuple) else (batch,)
    try:
        return next(iter(data.take(1)))
    except StopIteration:
        return None


def empty_dataset_error():
    return ValueError(
        "Expected the dataset to yield at least one batch, but it yielded "
        "nothing: check its size against the batch size (batches are "
        "dropped when `drop_remainder=True`)."
    )


def ordered_callbacks(callbacks, first, verbose="auto"):
    """`callbacks` (a list or a `CallbackList`) ordered to run as `fit` needs.

    `first`, then the callbacks that add to the logs (a `log_order`, lowest
    first), then the others in their given order; last, where Keras would
    add its progress bar (`verbose` not 0, none given), a progress bar that
    leaves out unscored epochs' scores (`_ScoredProgbar`).
    """

    def ordered(items):
        producers = [c for c in items if getattr(c, "log_order", None) is not None]
        producers.sort(key=lambda c: c.log_order)
        return [first, *producers, *(c for c in items if c not in producers)]

    if isinstance(callbacks, keras.callbacks.CallbackList):
        # With History, which `fit` returns (Keras adds it to plain lists only).
        merged = keras.callbacks.CallbackList(
            ordered(callbacks.callbacks), add_history=True, model=callbacks.model
        )
        merged.set_params(callbacks.params)
        return merged
    items = ordered(list(callbacks or []))
    if verbose != 0 and not any(
        isinstance(c, keras.callbacks.ProgbarLogger) for c in items
    ):
        items.append(_ScoredProgbar())
    return items


class _ScoredProgbar(keras.callbacks.ProgbarLogger):
    """Keras's progress bar, without the scores of unscored epochs.

    `QualityMetrics` logs the worst value each score can take (`inf`,
    `-inf`) on the epochs it does not score, so that Keras's "best" logic
    never picks them; printed, they read as a failure. This bar leaves
    them out of the line it prints; the logs, the history and the other
    callbacks keep them.
    """

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, directions.scored_logs(logs))


class _DataEpoch(keras.callbacks.Callback):
    """Keys the shuffle order of `load_images` data on the epoch; counts
    epochs and the batches of the last one; logs both networks' learning
    rates (`g_learning_rate`, `d_learning_rate`, the rates the epoch trained
    with).

    `data.set_epoch` is public: a loop that iterates the data by hand calls
    it itself.
    """

    # Its batch hook only counts: Keras may call it from a thread, and need
    # not wait for each step's logs (JAX dispatches steps ahead so).
    async_safe = True

    def __init__(self):
        super().__init__()
        self.count = 0
        self.batches = 0

    def on_epoch_begin(self, epoch, logs=None):
        data_lib.set_epoch(epoch)
        self.count += 1
        self.batches = 0

    def on_train_batch_end(self, batch, logs=None):
        # Counted here, not read from the trackers: across processes a
        # metric read outside the step is an all-reduce.
        self.batches += 1

    def on_epoch_end(self, epoch, logs=None):
        if logs is None:
            return
        for prefix, optimizer in (
            ("g", self.model.generator_optimizer),
            ("d", self.model.discriminator_optimizer),
        ):
            rate = keras.ops.convert_to_numpy(optimizer.learning_rate)
            logs[f"{prefix}_learning_rate"] = float(rate)
