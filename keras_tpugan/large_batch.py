"""Large-batch helpers: learning-rate scaling and optimizer construction."""

import math

import keras

from keras_tpugan.lars import LARS
from keras_tpugan.warmup import LinearWarmup

LR_SCALINGS = ("none", "linear", "sqrt", "sqrt-adam")
OPTIMIZERS = ("adam", "lars", "lamb")


def scaled_learning_rate(base_lr, batch_size, base_batch_size, rule):
    """Scales a learning rate with the batch size.

    Args:
        base_lr: The learning rate at `base_batch_size`.
        batch_size: The batch size to scale to.
        base_batch_size: The batch size `base_lr` was tuned for.
        rule: `"none"`, `"linear"` (Goyal et al., 2017), `"sqrt"`
            (Krizhevsky, 2014; Hoffer et al., 2017) or `"sqrt-adam"` (the
            square-root rule for Adam of Malladi et al., 2022: the rate as
            `"sqrt"`, and `scaled_adam_moments` for beta_2 and epsilon).

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
    factor = {"none": 1.0, "linear": ratio, "sqrt": math.sqrt(ratio)}
    factor["sqrt-adam"] = factor["sqrt"]
    return base_lr * factor[rule]


def scaled_adam_moments(beta_2, epsilon, batch_size, base_batch_size, rule):
    """Adam's `beta_2` and `epsilon` for a batch `k` times the base one.

    Under `"sqrt-adam"` (Malladi et al., 2022, the SDE scaling rule for
    Adam) the second-moment average keeps its span in images,
    `1 - beta_2` becomes `k (1 - beta_2)`, and `epsilon` becomes
    `epsilon / sqrt(k)`; under the other rules both are unchanged.
    `beta_1` is left alone (the GAN's usual 0.5 would leave [0, 1)).

    Args:
        beta_2: Adam's `beta_2` at `base_batch_size`.
        epsilon: Adam's `epsilon` at `base_batch_size`.
        batch_size: The batch size to scale to.
        base_batch_size: The batch size they were tuned for.
        rule: One of `LR_SCALINGS`.

    Returns:
        `(beta_2, epsilon)`.

    Example:

    >>> scaled_adam_moments(0.999, 1e-7, 256, 64, "sqrt-adam")
    (0.996, 5e-08)
    """
    scaled_learning_rate(1.0, batch_size, base_batch_size, rule)  # checks
    if rule != "sqrt-adam":
        return beta_2, epsilon
    ratio = batch_size / base_batch_size
    new_beta_2 = 1.0 - ratio * (1.0 - beta_2)
    if not 0.0 <= new_beta_2 < 1.0:
        raise ValueError(
            f"Expected beta_2 to stay in [0, 1) when scaled to batch {batch_size} "
            f"(1 - k (1 - beta_2), k = {ratio:g}). Received: beta_2={beta_2}. "
            "Use a larger beta_2 (0.999) or another lr_scaling."
        )
    return round(new_beta_2, 12), epsilon / math.sqrt(ratio)


def make_optimizer(
    name, learning_rate, beta_1=0.5, warmup_steps=0, beta_2=0.999, epsilon=1e-7
):
    """Builds one GAN optimizer by name, with an optional linear warm-up.

    Args:
        name: `"adam"` (Adam with `beta_1`), `"lars"` (`keras_tpugan.LARS`,
            momentum 0.9, trust coefficient 0.001) or `"lamb"`
            (`keras.optimizers.Lamb` with `beta_1`).
        learning_rate: The (already scaled) learning rate.
        beta_1: First-moment decay of Adam and LAMB.
        warmup_steps: Steps of linear warm-up (0: none).
        beta_2: Second-moment decay of Adam and LAMB.
        epsilon: Adam's and LAMB's epsilon.

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
        return keras.optimizers.Adam(
            rate, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon
        )
    if name == "lamb":
        return keras.optimizers.Lamb(
            rate, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon
        )
    return LARS(rate)
