"""Large-batch helpers: learning-rate scaling and optimizer construction."""

import math

import keras

from keras_tpugan.lars import LARS
from keras_tpugan.warmup import LinearWarmup

LR_SCALINGS = ("none", "linear", "sqrt")
OPTIMIZERS = ("adam", "lars", "lamb")


def scaled_learning_rate(base_lr, batch_size, base_batch_size, rule):
    """Scales a learning rate with the batch size.

    Args:
        base_lr: The learning rate at `base_batch_size`.
        batch_size: The batch size to scale to.
        base_batch_size: The batch size `base_lr` was tuned for.
        rule: `"none"`, `"linear"` (Goyal et al., 2017) or `"sqrt"`
            (Krizhevsky, 2014; Hoffer et al., 2017).

    Returns:
        The scaled learning rate.

    Example:

    >>> scaled_learning_rate(2e-4, 256, 64, "linear")
    0.0008
    """
    if rule not in LR_SCALINGS:
        raise ValueError(
            f"Expected lr_scaling in {LR_SCALINGS}. Received: lr_scaling={rule!r}."
        )
    if batch_size < 1 or base_batch_size < 1:
        raise ValueError(
            "Expected positive batch sizes. Received: "
            f"batch_size={batch_size}, base_batch_size={base_batch_size}."
        )
    ratio = batch_size / base_batch_size
    return base_lr * {"none": 1.0, "linear": ratio, "sqrt": math.sqrt(ratio)}[rule]


def make_optimizer(name, learning_rate, beta_1=0.5, warmup_steps=0, beta_2=0.999):
    """Builds one GAN optimizer by name, with an optional linear warm-up.

    Args:
        name: `"adam"` (Adam with `beta_1`), `"lars"` (`keras_tpugan.LARS`,
            momentum 0.9, trust coefficient 0.001) or `"lamb"`
            (`keras.optimizers.Lamb` with `beta_1`).
        learning_rate: The (already scaled) learning rate.
        beta_1: First-moment decay of Adam and LAMB.
        warmup_steps: Steps of linear warm-up (0: none).
        beta_2: Second-moment decay of Adam and LAMB.

    Returns:
        A `keras.optimizers.Optimizer`.

    Example:

    >>> make_optimizer("lamb", 1e-3, warmup_steps=100).__class__.__name__
    'Lamb'
    """
    if name not in OPTIMIZERS:
        raise ValueError(
            f"Expected optimizer in {OPTIMIZERS}. Received: optimizer={name!r}."
        )
    rate = LinearWarmup(learning_rate, warmup_steps) if warmup_steps else learning_rate
    if name == "adam":
        return keras.optimizers.Adam(rate, beta_1=beta_1, beta_2=beta_2)
    if name == "lamb":
        return keras.optimizers.Lamb(rate, beta_1=beta_1, beta_2=beta_2)
    return LARS(rate)
