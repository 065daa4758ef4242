"""The GAN's checks of what a user gives it: networks and settings.

`GAN(...)` checks the networks once, before any step (`check_networks`:
their inputs, logits from the discriminator), and its settings (the EMA,
the update scheme, `jit_compile`); `TrainConfig` calls the same checkers.
`compile` and `fit` check a subclass (its `metrics`, step, optimizers).
What `fit` and `generate` check of the data is in `fit_input`.

The final activation of a network is found through nested `Sequential`
and functional models and activation layers (`final_activation`): the
discriminator must output logits, and the generator must be able to reach
the whole [-1, 1] range of the real images.
"""

import re
import warnings

import keras
import numpy as np

from keras_tpugan.keyed_dropout import is_key
from keras_tpugan.models.walk import all_layers
from keras_tpugan.trainers.base import UPDATES

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
    try:
        listed = list(gan.metrics)
    except AttributeError as e:
        # keras-io's pattern: `compile` sets the trackers `metrics` lists
        # after `super().compile()`, which reads them.
        raise ValueError(
            f"Expected `{type(gan).__name__}.metrics` to be the GAN's own. "
            f"Received: a `metrics` that fails before its trackers exist ({e}), "
            "as keras-io's `compile(d_optimizer, g_optimizer, loss_fn)` sets "
            "them after `super().compile()`. Delete the `metrics` property and "
            "the trackers (the GAN logs d_loss, g_loss, d_real, d_fake itself), "
            "and hand your optimizers on: `super().compile(generator_optimizer="
            "g_optimizer, discriminator_optimizer=d_optimizer)`. The migration "
            "guide (docs/guides/migrating.md, the keras-io DCGAN) shows the port."
        ) from None
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


def check_ema(ema_decay, halflife, rampup):
    """Checks the generator average's settings (`GAN`'s `ema_*` arguments).

    Returns:
        `(ema_decay, ema_halflife_images, ema_rampup)` as floats (or None);
        the ramp-up is None without a half-life.
    """
    if ema_decay is not None and (
        isinstance(ema_decay, bool) or not 0.0 < float(ema_decay) < 1.0
    ):
        raise ValueError(
            "Expected `ema_decay` in (0, 1) (0.999 is usual) or None (no "
            f"average). Received: ema_decay={ema_decay!r}."
        )
    decay = None if ema_decay is None else float(ema_decay)
    if halflife is None:
        return decay, None, None if rampup is None else float(rampup)
    if ema_decay is not None:
        raise ValueError(
            "Expected one of `ema_decay` (per step) and `ema_halflife_images` "
            f"(in images). Received: ema_decay={ema_decay} and "
            f"ema_halflife_images={halflife}. Drop one."
        )
    if isinstance(halflife, bool) or not float(halflife) > 0:
        raise ValueError(
            "Expected `ema_halflife_images` > 0 (10000 is usual for MNIST). "
            f"Received: ema_halflife_images={halflife!r}."
        )
    if rampup is not None and not float(rampup) > 0:
        raise ValueError(
            "Expected `ema_rampup` > 0 (0.05 is usual) or None (no ramp-up). "
            f"Received: ema_rampup={rampup!r}."
        )
    return decay, float(halflife), None if rampup is None else float(rampup)


def check_jit_compile(jit_compile):
    """Checks `compile`'s `jit_compile`: True, False or "auto"."""
    if not (isinstance(jit_compile, bool) or jit_compile == "auto"):
        raise ValueError(
            "Expected `jit_compile` to be True, False or 'auto'. "
            f"Received: jit_compile={jit_compile!r}."
        )
    return jit_compile


def has_default_name(optimizer):
    """Whether `optimizer` was left unnamed.

    Its name is then the one Keras gives a new optimizer of its class, but
    for the counter Keras appends ("adam", "adam_3"), which Keras is asked
    for (the class made again from its config, without the name).
    """
    config = dict(optimizer.get_config())
    config.pop("name", None)
    try:
        fresh = type(optimizer).from_config(config)
    except (TypeError, ValueError, NotImplementedError):
        return False  # an optimizer that cannot be made so: keep its name
    base = re.sub(r"_\d+$", "", fresh.name)
    return re.fullmatch(rf"{re.escape(base)}(_\d+)?", optimizer.name) is not None


def check_update(update, discriminator_steps):
    """Checks how the networks step: `update` and `discriminator_steps`."""
    if isinstance(discriminator_steps, bool) or int(discriminator_steps) < 1:
        raise ValueError(
            "Expected `discriminator_steps` >= 1. Received: "
            f"discriminator_steps={discriminator_steps}."
        )
    if update not in UPDATES:
        raise ValueError(
            f"Expected `update` in {UPDATES}. Received: update={update!r}."
        )
    if update == "simultaneous" and int(discriminator_steps) != 1:
        raise ValueError(
            "Expected discriminator_steps=1 with update='simultaneous' (both "
            "networks step once, on one generator forward). Received: "
            f"discriminator_steps={discriminator_steps}. Use "
            "update='alternating' for several discriminator steps."
        )
    return update


def keyed_dropout_slots(discriminator):
    """Where the `KeyedDropout` keys sit in the discriminator's state."""
    if any(type(layer) is keras.layers.Dropout for layer in all_layers(discriminator)):
        warnings.warn(
            "The discriminator has a keras.layers.Dropout: its masks are drawn "
            "per replica from the layer's own seed, so training will differ "
            "with the replica count and with XLA. Use keras_tpugan.KeyedDropout "
            "(the same rate argument), whose masks the GAN keys by (seed, step, "
            "example).",
            stacklevel=3,
        )
    return tuple(
        i
        for i, variable in enumerate(discriminator.non_trainable_variables)
        if is_key(variable)
    )


def check_networks(generator, discriminator, latent_dim, num_classes):
    """Refuses networks the GAN cannot train; True when it warned about the
    generator's output range."""
    g_inputs = _defined_inputs("generator", generator, f"keras.Input(({latent_dim},))")
    d_inputs = _defined_inputs(
        "discriminator", discriminator, "keras.Input(image_shape)"
    )
    check_logits(discriminator)
    warned = warn_one_sided_output(generator, stacklevel=4)
    expected = 1 if num_classes is None else 2
    for name, inputs, what in (
        ("generator", g_inputs, "[latents, labels]"),
        ("discriminator", d_inputs, "[images, labels]"),
    ):
        if inputs is not None and len(inputs) != expected:
            raise ValueError(
                f"Expected a {name} with {expected} input(s) "
                f"({what if expected == 2 else 'no labels'}) for "
                f"num_classes={num_classes}. Received: a {name} with "
                f"{len(inputs)} inputs. "
                + (
                    "Set num_classes for a conditional model."
                    if expected == 1
                    else "A conditional network takes the labels, int class ids "
                    "of shape (batch,), as its second input: build it with "
                    "num_classes (models.dcgan_*), or wrap a network that "
                    "takes one-hot labels in its input as docs/guides/migrating.md "
                    "shows."
                )
            )
    if g_inputs is not None and g_inputs[0].shape[-1] != latent_dim:
        raise ValueError(
            f"Expected latent_dim to match the generator's input size "
            f"{g_inputs[0].shape[-1]}. Received: latent_dim={latent_dim}."
        )
    return warned


def _defined_inputs(name, model, first_layer):
    try:
        return model.inputs
    except AttributeError as e:
        raise ValueError(
            f"Expected a {name} with defined inputs. Received: "
            f"{type(model).__name__} {model.name!r}, which has none yet ({e}). "
            f"Start it with `{first_layer}` (for a Sequential model), or build "
            "it as a functional model."
        ) from e


def check_unused_optimizers(gan):
    """Refuses optimizers set on the GAN that its step never applies (as
    keras-io's `compile(d_optimizer, g_optimizer, loss_fn)` sets them).

    Args:
        gan: A compiled `keras_tpugan.GAN` (or a subclass).
    """
    given = (gan.optimizer, gan.generator_optimizer, gan.discriminator_optimizer)
    # (With the inner optimizers of `LossScaleOptimizer`s, as given.)
    used = {id(o) for g in given for o in (g, getattr(g, "inner_optimizer", g))}
    unused = sorted(
        name
        for name, value in vars(gan).items()
        if isinstance(value, keras.optimizers.Optimizer)
        and id(value) not in used
        and not name.startswith("_")
    )
    if unused:
        raise ValueError(
            "Expected the GAN's optimizers to be passed to `GAN.compile("
            "generator_optimizer=..., discriminator_optimizer=...)`. Received: "
            f"{', '.join(f'`{n}`' for n in unused)}, set on the "
            f"`{type(gan).__name__}` but never applied by its step (which "
            "would train with compile's default optimizers). Hand them on: "
            "`super().compile(generator_optimizer=g_optimizer, "
            "discriminator_optimizer=d_optimizer)`; see docs/guides/migrating.md."
        )
