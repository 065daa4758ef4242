"""`ScoringShare`: whether a scheduled score (or sample grid) keeps within its
share of the time."""

import time

from keras_tpugan import distribute


class ScoringShare:
    """Keeps scoring within about `max_share` of the time.

    A score costs the same whatever the step's speed, so on a fast device
    a fixed schedule would spend most of the run scoring. A scheduled score
    is allowed when the training seconds since the last score are at least
    `(1 - max_share) / max_share` times that score's cost. The first is
    allowed when no cost is known yet; told a lower bound of that cost
    (`expected`), it is judged as if a score of that cost had ended when
    training began. `QualityMetrics` asks it at each scheduled point and
    tells it each score's cost.

    Args:
        max_share: The share of the time, in (0, 1); None: every score is
            allowed.

    Example:

    >>> share = ScoringShare(max_share=0.25)
    >>> share.scored(cost=3.0, seconds=10.0)  # a score of 3 s, 10 s in
    >>> share.allows(seconds=14.0), share.allows(seconds=19.0)
    (False, True)
    >>> share.skipped
    1
    """

    def __init__(self, max_share):
        if max_share is not None and (
            isinstance(max_share, bool) or not 0 < max_share < 1
        ):
            raise ValueError(
                "Expected max_share in (0, 1) or None (no limit). Received: "
                f"max_share={max_share!r}. Pass 0.1 to spend at most about a "
                "tenth of the time scoring."
            )
        self.max_share = max_share
        self.skipped = 0  # scores not allowed
        self._cost = self._scored_at = None

    def allows(self, seconds, strategy=None, agree=True):
        """Whether a score now, `seconds` of training in, keeps the share
        (counted in `skipped` if not). With several processes, every one
        takes the chief's answer (`distribute.chief_values`), unless
        `agree` is False: work that the chief does alone (a sample grid)
        is decided there, with no collective."""
        if self.max_share is None or self._cost is None:
            return True
        since = seconds - self._scored_at
        allowed = since * self.max_share >= self._cost * (1 - self.max_share)
        if agree:
            chief = distribute.chief_values({"allowed": allowed}, strategy)
            allowed = bool(chief["allowed"])
        self.skipped += not allowed
        return allowed

    @property
    def knows_cost(self):
        """Whether a score's cost (or a bound on it, `expected`) is known."""
        return self._cost is not None

    def expected(self, cost):
        """Records a lower bound on a score's cost before any score ran:
        the first scheduled score is then allowed only after
        `(1 - max_share) / max_share` times `cost` seconds of training."""
        self._cost, self._scored_at = cost, 0.0

    def timed(self, work, clock):
        """Runs `work()` with `clock` (a `TrainingClock`) paused, and records
        its cost as a score's (`scored`).

        Returns:
            What `work` returns.
        """
        clock.pause()
        started = time.perf_counter()
        result = work()
        cost = time.perf_counter() - started
        clock.resume()
        self.scored(cost, clock.seconds())
        return result

    def scored(self, cost, seconds):
        """Records a score that took `cost` seconds, ending `seconds` of
        training in."""
        self._cost, self._scored_at = cost, seconds
