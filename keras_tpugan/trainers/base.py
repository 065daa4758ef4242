"""`GANStep`: the contract of the GAN's training step, and its shared maths.

Where to read the step: `keras_tpugan.GAN` inherits `GANStep` through one
backend subclass, picked when Keras picks its backend: `TensorFlowGANStep`
(`trainers/tf_step.py`: `train_step(data)`, run once per replica by
`tf.distribute`) or `JAXGANStep` (`trainers/jax_step.py`: `train_step(state,
data)`, compiled by `jax.jit` over a `keras.distribution` mesh).

Both read as the same four labelled phases: (1) unpack the batch and draw
the numbers, (2) train the discriminator `discriminator_steps` times, each
with fresh latents, (3) train the generator once, (4) update the EMA, the
step counter and the metrics. With `update="simultaneous"` phases 2 and 3 are
one: both networks' gradients from one generator forward
(`joint_objective`), both applied.

The contract between the GAN and its step:

- The GAN (`gan.py`) owns the public API and the attributes the step reads:
  `generator`, `discriminator`, `latent_dim`, `num_classes`,
  `discriminator_steps`, `update`, `gradient_penalty`, `penalty_weight`, `seed`,
  `ema_decay`, `ema_halflife_images`, `ema_rampup`, `ema_generator`,
  `augment` (a `DiffAugment` or None) and `augment_probability`,
  `step_counter`, `trackers` (one `Mean` per logged value: `D_LOGGED`,
  `d_real_sign` with an adaptive augmentation, then `G_LOGGED`), and after
  `compile` `adversarial_loss`, `generator_optimizer` and
  `discriminator_optimizer`.
- The step draws every random number outside the objectives from `(seed,
  step, stream)` for the GLOBAL batch (latents, WGAN-GP weights, the
  augmentation's numbers, the key of `KeyedDropout` masks) and passes them
  in `StepInputs`, so the maths is deterministic and the same on any number
  of replicas. The GAN's `_dropout_slots` lists where the discriminator's
  `KeyedDropout` keys sit in its non-trainable variables.
- `GANStep` (this file) owns the maths both backends share, written with
  `keras.ops` and `stateless_call` on variable VALUES so that each backend
  differentiates it with its own autodiff: `discriminator_objective`,
  `generator_objective`, the critic, the penalty and the EMA rate.
- The step logs the trackers' values and `loss = d_loss + g_loss`
  (`with_total_loss`), the key Keras's own callbacks look for.
- A backend step implements `train_step`, `test_step` (both objectives on
  held-out images with `StepInputs.training=False` and validation latents,
  nothing updated but the metrics), the `strategy` property, `generated_images`
  (a batch of `GAN.generate`) and `compile_step(optimizer, jit_compile,
  steps_per_execution, **kwargs)`, which `GAN.compile` calls once the optimizers
  are built and which must call `keras.Model.compile` with `optimizer`, the GAN's
  `GANOptimizer` (so `gan.optimizer` is what Keras's callbacks drive).

Replica correctness is kept by one convention: every loss is summed per
example and divided by the GLOBAL batch (`StepInputs.global_batch`), so the
gradients summed over replicas are those of the true mean, and the logged
values are all-reduced.
"""

from typing import Any, NamedTuple

import keras
from keras import ops

from keras_tpugan import keyed_dropout, penalties
from keras_tpugan.losses import flat_logits

# The values the step logs, in `GAN.trackers`' order (`penalty`: with one).
D_LOGGED = ("d_loss", "d_real", "d_fake", "penalty")
# How the networks step: D then G, or both from one generator forward.
UPDATES = ("alternating", "simultaneous")
# The discriminator's calls in a step, keying their dropout masks apart.
REAL, FAKE, INTERPOLATED = 0, 1, 2
G_LOGGED = ("g_loss",)


class NetworkValues(NamedTuple):
    """The variable values of both networks at one point of the step."""

    g_vars: Any  # the generator's trainable variable values
    g_state: Any  # its non-trainable ones (normalization statistics)
    d_vars: Any
    d_state: Any


class StepInputs(NamedTuple):
    """What one objective evaluation sees, on this replica."""

    images: Any  # real images (None for the generator's objective)
    labels: Any  # int32 class labels, or None for an unconditional GAN
    latents: Any  # this replica's latents
    alpha: Any  # WGAN-GP interpolation weights (None for the generator's)
    global_batch: Any  # examples over all replicas: the loss divisor
    loss_scale: Any  # loss-scale factor (1.0 unless mixed_float16)
    training: bool = True  # False in `test_step`: inference-mode networks
    augment_noise: Any = None  # (batch, 2, NOISE_SIZE): real, generated; or None
    augment_p: Any = None  # the augmentation probability now
    # For `KeyedDropout` layers in the discriminator: (the step's key, this
    # replica's first example in the global batch), or None.
    dropout: Any = None


class GANStep:
    """The shared half of `keras_tpugan.GAN`'s training step (see module doc).

    Not used on its own: `GAN` inherits it through `TensorFlowGANStep` or
    `JAXGANStep`.
    """

    # --------------------------------------------------------- objectives

    def discriminator_objective(self, d_vars, values, inputs):
        """The discriminator's (scaled) loss on this replica's examples.

        Args:
            d_vars: The discriminator's trainable values (differentiated).
            values: A `NetworkValues` for the rest (its `d_vars` unused).
            inputs: A `StepInputs`.

        Returns:
            `(scaled_loss, (d_state, g_state, stats))`: `stats` holds this
            replica's share of the global means of `D_LOGGED` (the penalty
            only when there is one).
        """
        fake, g_state = self._generated(values.g_vars, values.g_state, inputs)
        fake = self._augmented(ops.stop_gradient(fake), inputs, 1)
        real = self._augmented(inputs.images, inputs, 0)
        d_state = values.d_state
        real_logits, d_state = self._critic(d_vars, d_state, real, inputs, REAL)
        fake_logits, d_state = self._critic(d_vars, d_state, fake, inputs, FAKE)
        loss, stats = self._discriminator_loss(
            d_vars, d_state, real, fake, real_logits, fake_logits, inputs
        )
        return loss * inputs.loss_scale, (d_state, g_state, stats)

    def generator_objective(self, g_vars, values, inputs):
        """The generator's (scaled) loss on this replica's examples.

        Args:
            g_vars: The generator's trainable values (differentiated).
            values: A `NetworkValues` for the rest (its `g_vars` unused).
            inputs: A `StepInputs` (`images` and `alpha` unused).

        Returns:
            `(scaled_loss, (g_state, loss))`.
        """
        fake, g_state = self._generated(g_vars, values.g_state, inputs)
        fake = self._augmented(fake, inputs, 1)
        fake_logits, _ = self._critic(values.d_vars, values.d_state, fake, inputs, FAKE)
        per_example = self.adversarial_loss.generator_loss(fake_logits)
        loss = ops.sum(per_example) / inputs.global_batch
        return loss * inputs.loss_scale, (g_state, loss)

    def joint_objective(self, g_vars, d_vars, values, inputs):
        """Both networks' losses from one generator forward (`"simultaneous"`).

        Args:
            g_vars: The generator's trainable values.
            d_vars: The discriminator's trainable values.
            values: A `NetworkValues` for the rest (its `*_vars` unused).
            inputs: A `StepInputs` (`loss_scale` unused: each backend
                scales each loss with its own optimizer's factor).

        Returns:
            `((d_loss, g_loss), (d_state, g_state, stats))`: this replica's
            shares of the global means; `stats` as in
            `discriminator_objective`. Differentiate `d_loss` by `d_vars`
            only and `g_loss` by `g_vars` only.
        """
        fake, g_state = self._generated(g_vars, values.g_state, inputs)
        fake = self._augmented(fake, inputs, 1)
        real = self._augmented(inputs.images, inputs, 0)
        real_logits, d_state = self._critic(d_vars, values.d_state, real, inputs, REAL)
        fake_logits, d_state = self._critic(d_vars, d_state, fake, inputs, FAKE)
        d_loss, stats = self._discriminator_loss(
            d_vars, d_state, real, fake, real_logits, fake_logits, inputs
        )
        g_per_example = self.adversarial_loss.generator_loss(fake_logits)
        g_loss = ops.sum(g_per_example) / inputs.global_batch
        return (d_loss, g_loss), (d_state, g_state, stats)

    def held_out_stats(self, values, inputs):
        """Both objectives' logged values, nothing updated (`test_step`).

        Args:
            values: A `NetworkValues`.
            inputs: A `StepInputs` with `training=False`.

        Returns:
            `(d_stats, g_loss)`, this replica's shares of the global means.
        """
        # One generator forward and one critic call per image set: in
        # inference nothing changes between the two objectives' calls.
        (_, g_loss), (_, _, d_stats) = self.joint_objective(
            values.g_vars, values.d_vars, values, inputs
        )
        return d_stats, g_loss

    # ------------------------------------------------------------ helpers

    def held_out_inputs(self, images, labels, noise, global_batch):
        """The `StepInputs` of `test_step`: networks in inference mode.

        Args:
            images, labels: The held-out batch (labels None, unconditional).
            noise: `(latents, alpha, ...)` from the validation draw.
            global_batch: Examples over all replicas (the loss divisor).
        """
        return StepInputs(
            images=images,
            labels=labels,
            latents=noise[0],
            alpha=noise[1],
            global_batch=global_batch,
            loss_scale=1.0,
            training=False,
        )

    def training_inputs(self, noise, images, labels, global_batch, augment_p):
        """The `StepInputs` of one training phase, by keyword.

        Args:
            noise: The phase's numbers, `(latents, alpha, augment_noise,
                dropout)`, from the backend's draw.
            images: This replica's real images, or None for the generator's
                phase (which uses no interpolation weights either).
            labels: Their labels, or None.
            global_batch: Examples over all replicas (the loss divisor).
            augment_p: The augmentation probability now, or None.

        Returns:
            A `StepInputs`, `loss_scale=1.0` and `training=True`.
        """
        latents, alpha, augment_noise, dropout = noise
        return StepInputs(
            images=images,
            labels=labels,
            latents=latents,
            alpha=None if images is None else alpha,
            global_batch=global_batch,
            loss_scale=1.0,
            training=True,
            augment_noise=augment_noise,
            augment_p=augment_p,
            dropout=dropout,
        )

    def ema_rate(self, step, global_batch):
        """The EMA decay of step `step` (0-based), whose batch is `global_batch`.

        With `ema_decay`: `min(ema_decay, (1 + step) / (10 + step))`, a
        warm-up as in `tf.train.ExponentialMovingAverage`'s `num_updates`.
        With `ema_halflife_images`: `0.5 ** (global_batch / half_life)`, the
        half-life at most `ema_rampup` times the images seen (StyleGAN2-ADA's
        ramp-up). Either way early averages forget the random initial
        weights.
        """
        if self.ema_halflife_images is None:
            return ops.minimum(self.ema_decay, (1.0 + step) / (10.0 + step))
        half_life = self.ema_halflife_images
        if self.ema_rampup is not None:
            seen = (step + 1.0) * global_batch
            half_life = ops.minimum(half_life, seen * self.ema_rampup)
        return ops.power(0.5, global_batch / ops.maximum(half_life, 1e-8))

    def next_augment_probability(self, probability, logged, global_batch):
        """The augmentation probability after this step (ADA), or None.

        Args:
            probability: The probability the step used.
            logged: The step's all-reduced values, in `trackers` order.
            global_batch: Images in the step.
        """
        if self.augment is None or not self.augment.adaptive:
            return None
        names = [t.name for t in self.trackers]
        real_sign = logged[names.index("d_real_sign")]
        return self.augment.next_probability(probability, real_sign, global_batch)

    def with_total_loss(self, logs):
        """`logs` with `loss = d_loss + g_loss` added.

        Keras's own callbacks (`TerminateOnNaN`, the progress bar, `monitor`
        defaults) look for a `loss`; it is the epoch mean of the two
        networks' losses summed, NaN as soon as either is.
        """
        logs["loss"] = logs["d_loss"] + logs["g_loss"]
        return logs

    def unpack_batch(self, data):
        """`(images, labels)` of a batch, checked, as float32 and int32."""
        images, labels, _ = keras.utils.unpack_x_y_sample_weight(data)
        _check_batch(images, labels, self.generator.output_shape, self.num_classes)
        if labels is not None:
            labels = ops.reshape(ops.cast(labels, "int32"), (-1,))
        return ops.cast(images, "float32"), labels

    def _discriminator_loss(
        self, d_vars, d_state, real, fake, real_logits, fake_logits, inputs
    ):
        """D's loss (penalty included) and its logged sums, per global batch."""
        per_example = self.adversarial_loss.discriminator_loss(real_logits, fake_logits)
        sums = [per_example, flat_logits(real_logits), flat_logits(fake_logits)]
        total = per_example
        if self.gradient_penalty:
            # On the generated images as they are: no gradient to G.
            fake = ops.stop_gradient(fake)
            penalty = self._penalty(d_vars, d_state, real, fake, inputs)
            total = total + self.penalty_weight * penalty
            sums.append(penalty)
        if self.augment is not None and self.augment.adaptive:
            # ADA's overfitting heuristic: E[sign(D(real))].
            sums.append(ops.sign(flat_logits(real_logits)))
        loss = ops.sum(total) / inputs.global_batch
        stats = ops.stack([ops.sum(s) for s in sums]) / inputs.global_batch
        return loss, stats

    def _augmented(self, images, inputs, which):
        """`images` through the GAN's augmentation (`which`: 0 real, 1 fake)."""
        if inputs.augment_noise is None:
            return images
        return self.augment(images, inputs.augment_noise[:, which], inputs.augment_p)

    def _critic(self, d_vars, d_state, images, inputs, call):
        """The discriminator's float32 logits and its new state.

        `call` (`REAL`, `FAKE`, `INTERPOLATED`) keys its dropout masks apart.
        """
        net_inputs = images if inputs.labels is None else [images, inputs.labels]
        keyed = self._with_dropout_keys(d_state, inputs, call)
        logits, new_state = self.discriminator.stateless_call(
            d_vars, keyed, net_inputs, training=inputs.training
        )
        if keyed is not d_state:  # the stored keys stay as they were
            new_state = list(new_state)
            for slot in self._dropout_slots:
                new_state[slot] = d_state[slot]
        return ops.cast(logits, "float32"), new_state

    def _with_dropout_keys(self, d_state, inputs, call):
        """`d_state` with each `KeyedDropout` key set for this call.

        The key hashes (the step's key, the call, the layer), and the
        layer's masks hash (key, global example, feature): a counter-based
        draw, the same on any replica count, backend, with or without XLA.
        """
        if not self._dropout_slots or inputs.dropout is None or not inputs.training:
            return d_state
        step_key, first_example = inputs.dropout
        keyed = list(d_state)
        for layer, slot in enumerate(self._dropout_slots):
            key = keyed_dropout.key_of(step_key, call, layer)
            keyed[slot] = ops.stack([key, ops.cast(first_example, "int32")])
        return keyed

    def _penalty(self, d_vars, d_state, real, fake, inputs):
        # R1 regularizes D on the real images (the real call's masks);
        # WGAN-GP on interpolates, masked apart.
        call = REAL if self.gradient_penalty == "r1" else INTERPOLATED

        def critic(images):
            return self._critic(d_vars, d_state, images, inputs, call)[0]

        if self.gradient_penalty == "wgan-gp":
            return penalties.wgan_gp(critic, real, fake, inputs.alpha)
        return penalties.r1(critic, real)

    def _generated(self, g_vars, g_state, inputs):
        """The generator's images for `inputs`' latents, and its new state."""
        return self.generator.stateless_call(
            g_vars,
            g_state,
            self._generator_inputs(inputs.latents, inputs.labels),
            training=inputs.training,
        )

    def _generator_inputs(self, latents, labels):
        return latents if labels is None else [latents, labels]


def _check_batch(images, labels, image_shape, num_classes):
    if "int" in keras.backend.standardize_dtype(images.dtype):
        raise ValueError(
            "Expected float images in [-1, 1]. Received: images of dtype "
            f"{images.dtype.name} (0-255 pixels?). Use "
            "`keras_tpugan.data.load_images`, which scales them, or map "
            "`images / 127.5 - 1` yourself."
        )
    if tuple(images.shape[1:]) != tuple(image_shape[1:]):
        raise ValueError(
            f"Expected images of shape {tuple(image_shape[1:])} (the "
            "generator's output). Received: images of shape "
            f"{tuple(images.shape[1:])}. Resize the data or build the models "
            "for this image shape."
        )
    if labels is not None and num_classes is None:
        raise ValueError(
            "Received (images, labels) batches but the GAN has "
            "num_classes=None. Set num_classes for a conditional GAN, or "
            "drop the labels from the dataset."
        )
    if labels is None and num_classes is not None:
        raise ValueError(
            f"Expected (images, labels) batches for num_classes={num_classes}. "
            "Received: images only. Load the data with labels "
            "(load_images(..., labels=True))."
        )
