"""Which way the GAN's logged scores improve, where Keras's callbacks read it.

`EarlyStopping`, `ModelCheckpoint` and `ReduceLROnPlateau` with `mode="auto"`
(their default) decide between "min" and "max" from a metric's `_direction`,
and only look for it on the metrics of `model.metrics` that are Keras's
compiled-metrics lists. A GAN has no compiled metrics (its scores come from
`QualityMetrics`, a callback), so it lists one such list of placeholder
metrics, without state, that only carry the name and the direction. No
public Keras API declares a direction; without this the user must pass
`mode` for every score.
"""

import functools

import keras
import numpy as np

from keras_tpugan.internals import MetricsList

# Whether each score of `QualityMetrics` improves upward, for Keras's
# `mode="auto"`.
DIRECTIONS = {
    "fcd": "down",
    "fid": "down",
    "kid": "down",
    "classifier_score": "up",
    "precision": "up",
    "recall": "up",
}


class _Direction(keras.metrics.Metric):
    """A metric without state that only declares a name and a direction."""

    def __init__(self, name, direction):
        super().__init__(name=name)
        self._direction = direction

    def update_state(self, *args, **kwargs):
        pass

    def reset_state(self):
        pass

    def result(self):
        return 0.0


if MetricsList is not None:

    class _Declarations(MetricsList):
        """The declarations, adding nothing to the logs."""

        def result(self):
            return {}


@functools.cache
def declarations(directions):
    """A Keras metrics list declaring `directions` (`((name, "up"|"down"),)`).

    Returns:
        A list with one `MetricsList`, or an empty list when this Keras has
        no such type.
    """
    if MetricsList is None:
        return []
    return [
        _Declarations(
            [_Direction(name, way) for name, way in directions],
            name="score_directions",
        )
    ]


def scored_logs(logs):
    """`logs` without an unscored epoch's scores.

    `QualityMetrics` logs the worst value each score can take (`inf`,
    `-inf`) on the epochs it does not score, so that Keras's "best" logic
    never picks them; what shows the logs to a person (the progress bar,
    TensorBoard) leaves them out.

    Args:
        logs: An epoch's logs.

    Returns:
        A new dict.
    """
    return {name: value for name, value in (logs or {}).items() if not unscored(value)}


def unscored(value):
    """Whether a logged value is an unscored epoch's score (`inf`, `-inf`).

    Args:
        value: A logged value.

    Returns:
        A bool.
    """
    return np.ndim(value) == 0 and bool(np.isinf(value))
