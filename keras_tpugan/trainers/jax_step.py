"""`JAXGANStep`: the GAN's training step on the JAX backend."""

import jax
import keras
from keras import ops

from keras_tpugan import keyed_dropout
from keras_tpugan.augment import NOISE_SIZE
from keras_tpugan.trainers.base import (
    GANStep,
    NetworkValues,
)
from keras_tpugan.trainers.generator_calls import kept_call
from keras_tpugan.trainers.jax_devices import flat_all_reduce_pays, summed_over_devices
from keras_tpugan.trainers.jax_state import (
    StepState,
    commit_to_device,
    positions,
    state_slots,
)


class JAXGANStep(GANStep):
    """The GAN's training step on the JAX backend: `train_step(state, data)`.

    Keras's JAX trainer compiles `train_step` with `jax.jit` and threads the
    model's state through it: `(trainable, non_trainable, optimizer,
    metrics)` variable values. Under a `keras.distribution.DataParallel`
    scope the step sees the GLOBAL batch, sharded over the devices, and XLA
    (GSPMD) inserts the cross-device sums, so:

    - the latents are drawn for the whole global batch from `(seed, step,
      stream)` with `jax.random` (whose values do not depend on the
      sharding), the same for 1 or 1,000 devices;
    - the per-example losses are summed and divided by the global batch, as
      on TensorFlow; no replica context, no all-reduce by hand.

    Both optimizers' states travel in the state's optimizer slot: Keras
    threads `self.optimizer.variables` only, and `self.optimizer` is the
    GAN's `GANOptimizer` (a `keras.optimizers.MultiOptimizer` holding the
    generator's and the discriminator's optimizers); each of them is applied
    on its own (`stateless_apply`) at its point of the step.

    The objectives are `GANStep`'s, shared with the TensorFlow step.
    """

    @property
    def strategy(self):
        """The `keras.distribution.Distribution` the GAN was built under."""
        return self._distribution

    def train_step(self, state, data):
        # 1. Unpack the global batch (sharded over the devices).
        state = StepState(self._slots, state)
        images, labels = self.unpack_batch(data)
        global_batch = images.shape[0]
        divisor = float(global_batch)
        step = state.get("step")[0]
        p = state.get("augment_p")[0] if self.augment is not None else None
        if self.update == "simultaneous":
            # 2.+3. Train both networks from one generator forward.
            noise = self._draw_noise(step, 0, global_batch)
            inputs = self.training_inputs(noise, images, labels, divisor, p)
            d_stat, g_loss = self._train_both(state, inputs)
            d_stats = [d_stat]
        else:
            # 2. Train the discriminator, fresh latents for each of its steps.
            d_stats = []
            for k in range(self.discriminator_steps):
                noise = self._draw_noise(step, k, global_batch)
                inputs = self.training_inputs(noise, images, labels, divisor, p)
                d_stats.append(self._train_discriminator(state, inputs))
            # 3. Train the generator once.
            noise = self._draw_noise(step, self.discriminator_steps, global_batch)
            inputs = self.training_inputs(noise, None, labels, divisor, p)
            g_loss = self._train_generator(state, inputs)
        # 4. Update the EMA, the step counter, the augmentation and metrics.
        self._update_ema(state, step, divisor)
        state.set("step", [step + 1])
        logged = self._logged(sum(d_stats) / len(d_stats), g_loss)
        logs = self._update_metrics(state, logged, global_batch)
        self._adapt_augmentation(state, logs, p, logged, divisor)
        return logs, state.values()

    def test_step(self, state, data):
        # 1. Unpack the held-out global batch (sharded over the devices).
        state = StepState(self._test_slots, state)
        images, labels = self.unpack_batch(data)
        global_batch = images.shape[0]
        divisor = float(global_batch)
        noise = self._validation_noise(state, global_batch)
        inputs = self.held_out_inputs(images, labels, noise, divisor)
        # 2. Both objectives, the networks in inference mode; nothing trains.
        d_stats, g_loss = self.held_out_stats(self._network_values(state), inputs)
        # 3. Update the metrics.
        logs = self._update_metrics(state, self._logged(d_stats, g_loss), global_batch)
        return logs, state.values()

    def _train_discriminator(self, state, inputs):
        grad_fn = jax.grad(self.discriminator_objective, has_aux=True)

        def local(d_vars, values, inputs):
            grads, (d_state, g_state, stats) = grad_fn(d_vars, values, inputs)
            return (grads, stats), (d_state, g_state)

        (grads, stats), (d_state, g_state) = summed_over_devices(
            self, local, (state.get("d_vars"), self._network_values(state)), inputs
        )
        state.set("d_state", d_state)
        state.set("g_state", g_state)
        self._apply(state, "d", grads)
        return stats

    def _train_generator(self, state, inputs):
        grad_fn = jax.grad(self.generator_objective, has_aux=True)

        def local(g_vars, values, inputs):
            grads, (g_state, g_loss) = grad_fn(g_vars, values, inputs)
            return (grads, g_loss), g_state

        (grads, g_loss), g_state = summed_over_devices(
            self, local, (state.get("g_vars"), self._network_values(state)), inputs
        )
        state.set("g_state", g_state)
        self._apply(state, "g", grads)
        return g_loss

    def _train_both(self, state, inputs):
        def local(g_vars, d_vars, values, inputs):
            def losses(g_vars, d_vars):
                return self.joint_objective(g_vars, d_vars, values, inputs)

            (d_loss, g_loss), backward, (d_state, g_state, stats) = jax.vjp(
                losses, g_vars, d_vars, has_aux=True
            )
            # One forward, two backward passes: each loss by its network only
            # (XLA drops the other halves, which nothing uses).
            _, d_grads = backward((ops.ones_like(d_loss), ops.zeros_like(g_loss)))
            g_grads, _ = backward((ops.zeros_like(d_loss), ops.ones_like(g_loss)))
            return ((d_grads, g_grads), (stats, g_loss)), (d_state, g_state)

        replicated = (
            state.get("g_vars"),
            state.get("d_vars"),
            self._network_values(state),
        )
        ((d_grads, g_grads), (stats, g_loss)), (d_state, g_state) = summed_over_devices(
            self, local, replicated, inputs
        )
        state.set("d_state", d_state)
        state.set("g_state", g_state)
        self._apply(state, "d", d_grads)
        self._apply(state, "g", g_grads)
        return stats, g_loss

    def _apply(self, state, network, grads):
        """One network's optimizer update (`network`: "g" or "d") in `state`."""
        optimizer = (
            self.generator_optimizer if network == "g" else self.discriminator_optimizer
        )
        variables, optimizer_state = optimizer.stateless_apply(
            state.get(f"{network}_opt"), grads, state.get(f"{network}_vars")
        )
        state.set(f"{network}_vars", variables)
        state.set(f"{network}_opt", optimizer_state)

    def _network_values(self, state):
        return NetworkValues(
            g_vars=state.get("g_vars"),
            g_state=state.get("g_state"),
            d_vars=state.get("d_vars"),
            d_state=state.get("d_state"),
        )

    def _update_ema(self, state, step, global_batch):
        if self.ema_generator is None:
            return
        decay = self.ema_rate(ops.cast(step, "float32"), global_batch)
        values = {"g_vars": state.get("g_vars"), "g_state": state.get("g_state")}
        averages = []
        for average, (group, i) in zip(
            state.get("ema"), self._slots["ema_sources"], strict=True
        ):
            variable = values[group][i]
            if group == "g_vars":
                averages.append(decay * average + (1.0 - decay) * variable)
            else:  # normalization statistics: copied
                averages.append(variable)
        state.set("ema", averages)

    def _logged(self, d_stats, g_loss):
        return ops.concatenate([d_stats, ops.reshape(g_loss, (1,))], axis=0)

    def _adapt_augmentation(self, state, logs, probability, logged, global_batch):
        """ADA: moves the augmentation probability; logs it as `augment_p`."""
        if self.augment is None:
            return
        new = self.next_augment_probability(probability, logged, global_batch)
        if new is not None:
            state.set("augment_p", [new])
            probability = new
        logs["augment_p"] = probability

    def _update_metrics(self, state, stats, global_batch):
        weight = float(global_batch)
        values, logs, start = [], {}, 0
        metric_vars = state.get("metrics")
        for i, tracker in enumerate(self.trackers):
            count = len(tracker.variables)
            own = metric_vars[start : start + count]
            own = tracker.stateless_update_state(own, stats[i], sample_weight=weight)
            logs[tracker.name] = tracker.stateless_result(own)
            values.extend(own)
            start += count
        state.set("metrics", values)
        return self.with_total_loss(logs)

    def _draw_noise(self, step, stream, global_batch):
        """Latents, WGAN-GP weights, augmentation and dropout numbers.

        Keyed by `(seed, step, stream)`: reproducible, and the same whatever
        the number of devices the batch is sharded over. The dropout key is
        the TensorFlow step's (a hash), and the step sees the global batch
        from its first example.
        """
        counter = ops.cast(step, "uint32") * (self.discriminator_steps + 1) + stream
        key = jax.random.fold_in(jax.random.key(self.seed), counter)
        noise = self._noise(key, global_batch, augment=True)
        if not self._dropout_slots:
            return (*noise, None)
        return (*noise, (keyed_dropout.key_of(self.seed, counter), 0))

    def _validation_noise(self, state, global_batch):
        """Latents (and WGAN-GP weights) for a held-out global batch.

        Keyed by the position of the batch in the evaluation: the first
        tracker, which Keras resets before every evaluation, counts the
        examples evaluated so far. So every evaluation of the same data sees
        the same latents, and none of training's (a key of their own).
        """
        offset = ops.cast(state.get("validated")[0], "uint32")
        validation = jax.random.fold_in(jax.random.key(self.seed), 2**32 - 1)
        return self._noise(jax.random.fold_in(validation, offset), global_batch)

    def _noise(self, key, global_batch, augment=False):
        key_z, key_alpha = jax.random.split(key)
        z = jax.random.normal(key_z, (global_batch, self.latent_dim), "float32")
        alpha = jax.random.uniform(key_alpha, (global_batch,), "float32")
        if not augment or self.augment is None:
            return self._sharded_like_data(z), self._sharded_like_data(alpha), None
        # The augmentation's numbers: for real (0) and generated (1) images.
        shape = (global_batch, 2, NOISE_SIZE)
        aug = jax.random.uniform(jax.random.fold_in(key, 1), shape)
        return tuple(self._sharded_like_data(x) for x in (z, alpha, aug))

    def _sharded_like_data(self, value):
        """`value`, split over the devices along its batch axis as the data is.

        Drawn inside the step, the numbers are otherwise left to XLA's
        sharding propagation, which kept the generator's whole global batch
        on every process (docs/design/notes.md). The values do not change
        (JAX's random bits do not depend on the sharding).
        """
        if self.strategy is None:
            return value
        layout = self.strategy.get_data_layout(value.shape)
        return keras.distribution.distribute_tensor(value, layout)

    def generated_images(self, generator, inputs):
        """`generator`'s images for one batch of `GAN.generate`, through one
        compiled call per generator and batch shape.

        Called eagerly, JAX compiles and runs each of the generator's
        operations on its own. In one process; with several, and with
        `jit_compile=False`, the generator is called eagerly.
        """
        if jax.process_count() > 1 or getattr(self, "xla", True) is False:
            return generator(inputs, training=False)

        def call(trainable, non_trainable, inputs):
            return generator.stateless_call(
                trainable, non_trainable, inputs, training=False
            )[0]

        compiled = kept_call(self, generator, lambda: jax.jit(call))
        return compiled(
            [v.value for v in generator.trainable_variables],
            [v.value for v in generator.non_trainable_variables],
            inputs,
        )

    # ---------------------------------------------------------- compile

    def compile_step(self, optimizer, jit_compile, steps_per_execution, **kwargs):
        """Compiles Keras's (jitted) step with the GAN's `GANOptimizer`."""
        for name, opt in (
            ("generator_optimizer", self.generator_optimizer),
            ("discriminator_optimizer", self.discriminator_optimizer),
        ):
            if isinstance(opt, keras.optimizers.LossScaleOptimizer):
                raise ValueError(
                    "Expected a mixed_bfloat16 or float32 policy on the JAX "
                    "backend. Received: a float16 policy, whose loss scaling "
                    f"({name} is a LossScaleOptimizer) keras_tpugan supports "
                    "on TensorFlow only. Use precision.configure("
                    "'mixed_bfloat16'), the native type of TPUs."
                )
        self.xla = jit_compile is not False
        # jax.jit compiles the whole step, draw included.
        self.xla_whole_step = self.xla
        self.flat_all_reduce = flat_all_reduce_pays(self)
        keras.Model.compile(
            self,
            optimizer=optimizer,
            jit_compile=self.xla,
            steps_per_execution=steps_per_execution,
            **kwargs,
        )
        self._slots = state_slots(self)
        # Keras's test step threads (trainable, non_trainable, metrics).
        self._test_slots = {
            **self._slots,
            "metrics": (2, self._slots["metrics"][1]),
            "validated": (
                2,
                positions([self.trackers[0].count], self.metrics_variables),
            ),
        }

    def reset_metrics(self):
        """Resets the metrics; see `keras.Model.reset_metrics`.

        Keras resets them before every epoch and evaluation. On one device,
        the values it resets to (and a new GAN's variables) are not
        committed to it, while the step's outputs are, and
        `jax.jit` compiles a program for each mix: the step was compiled
        three times in a two-epoch fit, and the validation step twice.
        Here every variable the step reads is committed to the device it
        is on, so one program serves the whole run.
        """
        super().reset_metrics()
        commit_to_device(
            self.trainable_variables
            + self.non_trainable_variables
            + (self.optimizer.variables if self.optimizer is not None else [])
            + self.metrics_variables
        )
