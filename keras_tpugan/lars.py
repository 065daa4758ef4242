"""`LARS`: layer-wise adaptive rate scaling, as a Keras 3 optimizer."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_tpugan")
class LARS(keras.optimizers.Optimizer):
    """Layer-wise Adaptive Rate Scaling (You, Gitman & Ginsburg, 2017).

    SGD with momentum whose step for each weight tensor `w` is scaled by a
    trust ratio, so that large batches (and large learning rates) do not
    blow up layers whose gradients are large relative to their weights:

    ```
    ratio = trust_coefficient * ||w|| / (||g|| + weight_decay * ||w|| + epsilon)
    v = momentum * v + learning_rate * ratio * (g + weight_decay * w)
    w = w - v
    ```

    The ratio is 1 when `||w||` or `||g||` is 0. Biases and normalization
    weights (tensors of rank 0 or 1, and names listed in
    `exclude_from_layer_adaptation`) get neither the ratio nor weight decay,
    as in the ImageNet-in-minutes papers.

    Args:
        learning_rate: A float or a `keras.optimizers.schedules` schedule.
        momentum: Momentum of the velocity.
        trust_coefficient: Trust coefficient eta (0.001 to 0.01 in the
            papers).
        epsilon: Added to the ratio's denominator (1e-6 to 1e-9).
        weight_decay: L2 weight decay folded into the gradient (coupled, as
            in the paper; Keras's decoupled `weight_decay` is not used).
        exclude_from_layer_adaptation: Name substrings of variables that get
            plain momentum SGD.
        name: Optimizer name.
        **kwargs: Other `keras.optimizers.Optimizer` arguments (clipnorm,
            use_ema, ...).

    Example:

    >>> opt = LARS(learning_rate=1.0, trust_coefficient=0.001)
    >>> opt.get_config()["trust_coefficient"]
    0.001
    """

    def __init__(
        self,
        learning_rate=1.0,
        momentum=0.9,
        trust_coefficient=0.001,
        epsilon=1e-9,
        weight_decay=0.0,
        exclude_from_layer_adaptation=None,
        name="lars",
        **kwargs,
    ):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"Expected momentum in [0, 1). Received: {momentum}.")
        if trust_coefficient <= 0 or epsilon < 0 or weight_decay < 0:
            raise ValueError(
                "Expected trust_coefficient > 0, epsilon >= 0 and weight_decay >= 0. "
                f"Received: trust_coefficient={trust_coefficient}, "
                f"epsilon={epsilon}, weight_decay={weight_decay}."
            )
        self.momentum = momentum
        self.trust_coefficient = trust_coefficient
        self.epsilon = epsilon
        self.lars_weight_decay = weight_decay
        self.exclude_from_layer_adaptation = list(exclude_from_layer_adaptation or [])

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self.velocities = self.add_optimizer_variables(var_list, "velocity")
        # Decided here, on the Keras variables: `update_step` may be given
        # the backend's own variable (TensorFlow's), which has no path.
        self._adapt = [self._adapted(v) for v in var_list]

    def _adapted(self, variable):
        if len(variable.shape) <= 1:
            return False
        return not any(
            name in variable.path for name in self.exclude_from_layer_adaptation
        )

    def update_step(self, gradient, variable, learning_rate):
        lr = ops.cast(learning_rate, variable.dtype)
        gradient = ops.cast(gradient, variable.dtype)
        # The slot lookup `keras.Optimizer`'s documentation gives subclasses
        # (it also maps the backend variable TensorFlow's distributed update
        # passes, which has no path, to its Keras variable).
        index = self._get_variable_index(variable)
        velocity = self.velocities[index]
        if self._adapt[index]:
            w_norm = ops.sqrt(ops.sum(ops.square(variable)))
            g_norm = ops.sqrt(ops.sum(ops.square(gradient)))
            ratio = ops.where(
                ops.logical_and(w_norm > 0, g_norm > 0),
                self.trust_coefficient
                * w_norm
                / (g_norm + self.lars_weight_decay * w_norm + self.epsilon),
                1.0,
            )
            gradient = gradient + self.lars_weight_decay * variable
            step = lr * ratio * gradient
        else:
            step = lr * gradient
        self.assign(velocity, self.momentum * velocity + step)
        self.assign_sub(variable, velocity)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "momentum": self.momentum,
                "trust_coefficient": self.trust_coefficient,
                "epsilon": self.epsilon,
                "weight_decay": self.lars_weight_decay,
                "exclude_from_layer_adaptation": self.exclude_from_layer_adaptation,
            }
        )
        return config
