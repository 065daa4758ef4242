"""`ImageSchedule`: when a callback's work is due, in images seen."""

import numbers


class ImageSchedule:
    """Says after which training steps a callback's work is due, in images seen.

    The work is due after the step at which each multiple of
    `every_n_images` is reached (mid-epoch if need be), so runs with
    different batch sizes do it after the same numbers of images, and a
    device that trains faster does it no more often. A resumed run goes on
    with its schedule from the steps it had trained. `QualityMetrics` and
    `SampleGrid` use it when given `every_n_images`; they count the steps
    from `on_epoch_begin` and `on_train_batch_end`. With
    `steps_per_execution` > 1 the work waits for the end of the steps run
    together.

    Args:
        every_n_images: The interval, in images (an int >= 1).
        global_batch_size: Images per step over all replicas (an int >= 1).

    Example:

    ```python
    schedule = ImageSchedule(every_n_images=1000, global_batch_size=256)
    schedule.start(steps=0)
    schedule.epoch_begin()
    [schedule.batch_end(batch) for batch in range(8)]  # due after 4 and 8
    ```
    """

    def __init__(self, every_n_images, global_batch_size):
        if not _is_positive_int(every_n_images) or not _is_positive_int(
            global_batch_size
        ):
            raise ValueError(
                "Expected every_n_images >= 1 with the global_batch_size (images "
                f"per step), both ints. Received: every_n_images={every_n_images!r}, "
                f"global_batch_size={global_batch_size!r}. Pass the batch size "
                "over all replicas as global_batch_size."
            )
        self.every_n_images = every_n_images
        self.global_batch_size = global_batch_size
        self.start(0)

    def start(self, steps):
        """Starts counting from `steps` already trained (a resumed run's)."""
        self.steps = steps
        self._next = (self.images // self.every_n_images + 1) * self.every_n_images
        self.epoch_begin()

    def epoch_begin(self):
        """Starts an epoch's count of batches (from `on_epoch_begin`)."""
        self._batch = -1

    @property
    def images(self):
        """The images seen so far."""
        return self.steps * self.global_batch_size

    def batch_end(self, batch):
        """Counts the steps of the epoch up to `batch`.

        Args:
            batch: The index `on_train_batch_end` is given: the epoch's last
                step so far (with `steps_per_execution` > 1, the last of the
                steps run together).

        Returns:
            True when the work is due after this step.
        """
        self.steps += batch - self._batch
        self._batch = batch
        if self.images < self._next:
            return False
        self._next = (self.images // self.every_n_images + 1) * self.every_n_images
        return True


def _is_positive_int(value):
    return (
        isinstance(value, numbers.Integral)
        and not isinstance(value, bool)
        and value >= 1
    )
