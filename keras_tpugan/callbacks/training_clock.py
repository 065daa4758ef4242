"""`TrainingClock`: training seconds, the pauses left out."""

import time


class TrainingClock:
    """Wall seconds since it was made, less the time spent paused.

    `QualityMetrics` times training with it: scoring and validation pause
    it, so a score's `seconds` are the training's alone.

    Example:

    >>> clock = TrainingClock()
    >>> clock.pause(); clock.resume()
    >>> clock.seconds() >= 0
    True
    """

    def __init__(self):
        self._start = time.perf_counter()
        self._paused_total = 0.0
        self._paused_at = None

    def pause(self):
        """Stops counting (again: no effect)."""
        if self._paused_at is None:
            self._paused_at = time.perf_counter()

    def resume(self):
        """Counts again from now."""
        if self._paused_at is not None:
            self._paused_total += time.perf_counter() - self._paused_at
            self._paused_at = None

    def seconds(self):
        """The seconds counted so far."""
        now = self._paused_at or time.perf_counter()
        return now - self._start - self._paused_total
