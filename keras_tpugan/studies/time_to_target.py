"""`TimeToTarget`: when a search's trial reaches its quality target."""

import keras


class TimeToTarget(keras.callbacks.Callback):
    """Records (seconds, images seen, FCD or FID) per epoch; can stop at a
    target.

    A search's trial (`tuning.GANHyperModel`) fits in chunks, one "epoch"
    per evaluation; this callback runs after `Throughput` and
    `QualityMetrics`, so both the time and the score are in the logs.

    Args:
        speed: The trial's `callbacks.Throughput` (its training seconds and
            global batch size).
        target_fcd: The distance to reach.
        distance: The logged distance to follow: `"fcd"` or `"fid"`.
    """

    def __init__(self, speed, target_fcd, distance="fcd"):
        super().__init__()
        self.speed, self.target_fcd, self.distance = speed, target_fcd, distance
        self.time_cap = None  # set: stop at the target or past the cap
        # `reached`: the steps, images and seconds at the target, once met.
        self.curve, self.reached = [], None

    def on_epoch_end(self, epoch, logs=None):
        seconds = self.speed.total_seconds
        steps = (epoch + 1) * self.params["steps"]
        images = steps * self.speed.global_batch_size
        fcd = logs[self.distance]
        self.curve.append((seconds, images, fcd))
        if self.reached is None and fcd <= self.target_fcd:
            self.reached = {"steps": steps, "images": images, "seconds": seconds}
        if self.time_cap is not None and (
            self.reached is not None or seconds > self.time_cap
        ):
            self.model.stop_training = True

    @property
    def best(self):
        """The lowest distance scored, or None before any."""
        return min((c[2] for c in self.curve), default=None)
