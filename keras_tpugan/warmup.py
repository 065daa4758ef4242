"""`LinearWarmup`: a learning-rate schedule that ramps up, then hands over."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_tpugan")
class LinearWarmup(keras.optimizers.schedules.LearningRateSchedule):
    """Linear learning-rate warm-up (Goyal et al., 2017), then a schedule.

    For `step < warmup_steps` the rate is
    `learning_rate * (step + 1) / warmup_steps`; afterwards it is
    `learning_rate`, or `after(step - warmup_steps)` when a schedule is
    given. Large batches with a scaled learning rate need the warm-up to
    avoid diverging in the first steps.

    Args:
        learning_rate: The rate reached at the end of the warm-up.
        warmup_steps: Number of warm-up steps (0: no warm-up).
        after: Optional `LearningRateSchedule` for the steps after.
        name: Schedule name.

    Example:

    >>> schedule = LinearWarmup(1e-3, warmup_steps=10)
    >>> float(schedule(0)), float(schedule(9)), float(schedule(50))
    (0.0001, 0.001, 0.001)
    """

    def __init__(self, learning_rate, warmup_steps, after=None, name="linear_warmup"):
        if learning_rate <= 0 or warmup_steps < 0:
            raise ValueError(
                "Expected learning_rate > 0 and warmup_steps >= 0. Received: "
                f"learning_rate={learning_rate}, warmup_steps={warmup_steps}."
            )
        self.learning_rate = float(learning_rate)
        self.warmup_steps = int(warmup_steps)
        self.after = after
        self.name = name

    def __call__(self, step):
        step = ops.cast(step, "float32")
        ramp = self.learning_rate * (step + 1.0) / max(1, self.warmup_steps)
        if self.after is None:
            later = ops.convert_to_tensor(self.learning_rate, "float32")
        else:
            later = ops.cast(self.after(step - self.warmup_steps), "float32")
        return ops.where(step < self.warmup_steps, ramp, later)

    def get_config(self):
        return {
            "learning_rate": self.learning_rate,
            "warmup_steps": self.warmup_steps,
            "after": None
            if self.after is None
            else keras.saving.serialize_keras_object(self.after),
            "name": self.name,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if config.get("after") is not None:
            config["after"] = keras.saving.deserialize_keras_object(config["after"])
        return cls(**config)
