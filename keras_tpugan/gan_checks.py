"""Checks of a user's networks that `GAN(...)` runs once, before any step.

The final activation of a network is found through nested `Sequential`
and functional models and activation layers (`final_activation`): the
discriminator must output logits, and the generator must be able to reach
the whole [-1, 1] range of the real images.
"""

import warnings

import keras
import numpy as np

# Activations whose outputs cannot cover [-1, 1]: [0, 1] or [0, inf).
_ONE_SIDED = ("sigmoid", "hard_sigmoid", "softmax", "relu", "relu6", "softplus", "elu")
# Layers that move values without changing them.
_PASS_THROUGH = (
    keras.layers.Reshape,
    keras.layers.Flatten,
    keras.layers.Permute,
    keras.layers.Cropping2D,
    keras.layers.Dropout,
    keras.layers.Identity,
    keras.layers.InputLayer,
)
_LAYER_ACTIVATIONS = {
    keras.layers.ReLU: "relu",
    keras.layers.Softmax: "softmax",
}


def final_activation(model):
    """The activation a model applies last, found through nested models.

    Layers that only move values (`Reshape`, `Flatten`, `Permute`, cropping,
    `Dropout`, ...) are looked through.

    Args:
        model: A Keras model or layer.

    Returns:
        `(name, layer)`: the activation's name (`"sigmoid"`, `"tanh"`,
        `"linear"`, ...) and the layer that applies it; `(None, None)` when
        no layer applies one.
    """
    if isinstance(getattr(model, "layers", None), list):
        for layer in reversed(model.layers):
            name, found = final_activation(layer)
            if found is not None:
                return name, found
            if not isinstance(layer, _PASS_THROUGH):
                return None, None
        return None, None
    for kind, name in _LAYER_ACTIVATIONS.items():
        if isinstance(model, kind):
            return name, model
    if isinstance(model, _PASS_THROUGH):
        return None, None
    activation = getattr(model, "activation", None)
    name = getattr(activation, "__name__", None)
    return (name, model) if name is not None else (None, None)


def check_logits(discriminator):
    """Refuses a discriminator whose final activation is a sigmoid or softmax.

    Args:
        discriminator: The discriminator model.
    """
    activation, layer = final_activation(discriminator)
    if activation in ("sigmoid", "softmax", "hard_sigmoid"):
        raise ValueError(
            "Expected a discriminator that outputs logits (no final "
            f"activation). Received: its last layer {layer.name!r} applies "
            f"{activation}. Remove that activation: the losses apply the "
            "sigmoid themselves, in float32."
        )


# Why a generator that cannot reach -1 fails, and the fix: both warnings end so.
_ONE_SIDED_FIX = (
    "trains on real images in [-1, 1] (`load_images` scales them so): the "
    "discriminator would tell every generated image by its range. End the "
    "generator in tanh (`activation='tanh'`), as "
    "`keras_tpugan.models.dcgan_generator` does."
)


def warn_one_sided_output(generator, stacklevel=3):
    """Warns once when the generator's final activation cannot cover [-1, 1].

    Args:
        generator: The generator model.
        stacklevel: Passed to `warnings.warn` (the user's `GAN(...)` line).

    Returns:
        True when it warned.
    """
    activation, layer = final_activation(generator)
    if activation not in _ONE_SIDED:
        return False
    warnings.warn(
        f"The generator {generator.name!r} ends in {activation} (layer "
        f"{layer.name!r}), whose outputs cannot be negative, but the GAN "
        + _ONE_SIDED_FIX,
        stacklevel=stacklevel,
    )
    return True


def warn_one_sided_samples(generator, images, stacklevel):
    """Warns when a batch the generator made has no negative pixel.

    The check after `warn_one_sided_output`: it sees what no layer name
    shows (a custom layer, `ops.sigmoid` in a `call`, a final `Rescaling`).

    Args:
        generator: The generator model (named in the message).
        images: A batch it generated, as a numpy array.
        stacklevel: Passed to `warnings.warn` (the user's `fit(...)` line).

    Returns:
        True when it warned.
    """
    low, high = float(np.min(images)), float(np.max(images))
    if low < 0.0:
        return False
    warnings.warn(
        f"The generator {generator.name!r} made a first batch in "
        f"[{low:.4g}, {high:.4g}], without one negative pixel, but the GAN "
        + _ONE_SIDED_FIX,
        stacklevel=stacklevel,
    )
    return True


def check_metrics(gan, own):
    """Refuses a subclass whose `metrics` are not the GAN's own.

    Keras resets the metrics `metrics` lists before every epoch (and, on
    JAX, threads only their variables through the step): trackers left out
    would log running means since the start of training, and a metric
    added there is never updated by the GAN's step.

    Args:
        gan: A `keras_tpugan.GAN` (or a subclass).
        own: The metrics `GAN.metrics` returns.
    """
    listed = list(gan.metrics)
    if [id(m) for m in listed] == [id(m) for m in own]:
        return
    missing = [t.name for t in gan.trackers if id(t) not in {id(m) for m in listed}]
    extra = [m.name for m in listed if id(m) not in {id(o) for o in own}]
    raise ValueError(
        f"Expected `{type(gan).__name__}.metrics` to be the GAN's own (its "
        "loss trackers, which its step updates and Keras resets every "
        f"epoch). Received: a `metrics` that leaves out {missing} and adds "
        f"{extra}. Do not override `metrics` (no `d_loss_tracker` is "
        "needed: the GAN logs d_loss, g_loss, d_real, d_fake itself); log "
        "other values from a callback, into `logs`, as QualityMetrics does."
    )


# The methods Keras calls for each batch: the GAN's own, for every replica
# count (latents per global example, losses over the global batch).
_STEP_METHODS = ("train_step", "test_step")


def check_step(gan, step_class):
    """Refuses a subclass that overrides the GAN's `train_step` or `test_step`.

    A hand-written step (keras-io's pattern: draw latents, two tapes, apply
    the optimizers) would run in place of the GAN's, which keeps the same
    results on any number of replicas and logs their true means.

    Args:
        gan: A `keras_tpugan.GAN` (or a subclass).
        step_class: The backend's step class the GAN inherits its step from.
    """
    for name in _STEP_METHODS:
        method = getattr(type(gan), name)
        if method is getattr(step_class, name):
            continue
        owner = next(c for c in type(gan).__mro__ if name in vars(c))
        raise ValueError(
            f"Expected `{type(gan).__name__}` to keep the GAN's own `{name}` "
            "(the same results on 1 or many replicas, true means logged). "
            f"Received: `{owner.__qualname__}.{name}`, which overrides it. "
            "Change the objective with `compile(loss=...)`: a loss name or "
            "your subclass of `keras_tpugan.losses.AdversarialLoss` "
            "(`discriminator_loss` and `generator_loss` on logits); add a "
            "gradient penalty with `GAN(gradient_penalty=...)`; log other "
            "values from a callback."
        )
