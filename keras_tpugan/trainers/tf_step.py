"""`TensorFlowGANStep`: the GAN's training step on the TensorFlow backend."""

import keras
import tensorflow as tf

from keras_tpugan.internals import TensorFlowTrainerHooks
from keras_tpugan.trainers.base import (
    GANStep,
    NetworkValues,
)
from keras_tpugan.trainers.generator_calls import kept_call
from keras_tpugan.trainers.tf_generate import traced_generator
from keras_tpugan.trainers.tf_noise import draw_noise, validation_noise
from keras_tpugan.trainers.tf_xla import (
    check_steps_per_execution,
    resolve_jit_compile,
    whole_step_in_xla,
)


class TensorFlowGANStep(TensorFlowTrainerHooks, GANStep):
    """The GAN's training step on the TensorFlow backend: `train_step(data)`.

    Keras's TensorFlow trainer runs `train_step` once per replica inside
    `strategy.run`. Here:

    - the latents are drawn outside XLA for the whole GLOBAL batch from
      `(seed, step, stream)`, and each replica takes its own rows;
    - with XLA on one device, the rest of the step (`_update`: gradients
      from `stateless_call`, optimizer updates, EMA, step counter,
      metrics) is one `tf.function(jit_compile=True)`; under a
      multi-replica strategy only each replica's gradients are, while the
      optimizer updates and the cross-replica sums stay outside it: XLA
      over them fails under `MirroredStrategy`;
    - the logged values are all-reduced, so every strategy reports the
      mean over the global batch.

    The objectives are `GANStep`'s, shared with the JAX step.
    """

    @property
    def strategy(self):
        """The `tf.distribute.Strategy` the GAN was built under."""
        return self.distribute_strategy

    @property
    def process_count(self):
        """How many processes the strategy spans (`GAN.placement`)."""
        return self.placement.processes

    def train_step(self, data):
        # 1. This replica's share of the global batch, and the step's random
        #    numbers for the whole global batch, drawn outside XLA (stateless
        #    RNG draws other numbers inside it).
        images, labels = self.unpack_batch(data)
        local_batch, global_batch = self._batch_sizes(images)
        divisor = tf.cast(global_batch, "float32")
        streams = 1 if self.update == "simultaneous" else self.discriminator_steps + 1
        noise = [
            self._draw_noise(stream, local_batch, global_batch)
            for stream in range(streams)
        ]
        # The XLA boundary. On one device steps 2-4 (`_update`, next) are one
        # XLA program. Under several replicas only each network's gradients
        # are (`_gradients`): XLA cannot hold the optimizer updates' sums
        # across replicas.
        update = self._xla(self._update) if self.xla_whole_step else self._update
        return update(images, labels, noise, divisor)

    def _update(self, images, labels, noise, divisor):
        """Steps 2-4 of `train_step`: both networks, then the rest."""
        p = self._augment_probability()
        if self.update == "simultaneous":
            # 2.+3. Train both networks from one generator forward.
            inputs = self.training_inputs(noise[0], images, labels, divisor, p)
            d_stat, g_loss = self._train_both(inputs)
            d_stats = [d_stat]
        else:
            # 2. Train the discriminator, fresh latents for each of its steps.
            d_stats = []
            for k in range(self.discriminator_steps):
                inputs = self.training_inputs(noise[k], images, labels, divisor, p)
                d_stats.append(self._train_discriminator(inputs))
            # 3. Train the generator once.
            inputs = self.training_inputs(
                noise[self.discriminator_steps], None, labels, divisor, p
            )
            g_loss = self._train_generator(inputs)
        # 4. Update the EMA, the step counter, the augmentation and metrics.
        self._update_ema(divisor)
        self.step_counter.assign_add(1)
        logged = self._all_reduced(tf.add_n(d_stats) / len(d_stats), g_loss)
        logs = self._update_metrics(logged, divisor)
        return self._adapt_augmentation(logs, p, logged, divisor)

    def _train_discriminator(self, inputs):
        opt = self.discriminator_optimizer
        inputs = inputs._replace(loss_scale=opt.scale_loss(tf.constant(1.0)))
        grads, (d_state, g_state, stats) = self._gradients(
            self._discriminator_gradients
        )(
            _values(self.discriminator.trainable_variables),
            self._network_values(),
            inputs,
        )
        _assign(self.discriminator.non_trainable_variables, d_state)
        _assign(self.generator.non_trainable_variables, g_state)
        opt.apply(self._for_all_reduce(grads), self.discriminator.trainable_variables)
        return stats

    def _train_generator(self, inputs):
        opt = self.generator_optimizer
        inputs = inputs._replace(loss_scale=opt.scale_loss(tf.constant(1.0)))
        grads, (g_state, g_loss) = self._gradients(self._generator_gradients)(
            _values(self.generator.trainable_variables),
            self._network_values(),
            inputs,
        )
        _assign(self.generator.non_trainable_variables, g_state)
        opt.apply(self._for_all_reduce(grads), self.generator.trainable_variables)
        return g_loss

    def _train_both(self, inputs):
        d_opt, g_opt = self.discriminator_optimizer, self.generator_optimizer
        grads, (d_state, g_state, stats, g_loss) = self._gradients(
            self._joint_gradients
        )(
            _values(self.discriminator.trainable_variables),
            _values(self.generator.trainable_variables),
            self._network_values(),
            inputs,
        )
        d_grads, g_grads = grads
        _assign(self.discriminator.non_trainable_variables, d_state)
        _assign(self.generator.non_trainable_variables, g_state)
        d_opt.apply(
            self._for_all_reduce(d_grads), self.discriminator.trainable_variables
        )
        g_opt.apply(self._for_all_reduce(g_grads), self.generator.trainable_variables)
        return stats, g_loss

    def _draw_noise(self, stream, local_batch, global_batch):
        """This replica's numbers of one stream of the step (`tf_noise`)."""
        return draw_noise(self, stream, local_batch, global_batch)

    def _gradients(self, gradients):
        """`gradients`, as its own XLA program where the step is not one.

        With XLA on under several replicas, each network's gradients are
        compiled apart (the optimizer updates stay outside XLA); on one
        device they are part of the step's program; without XLA, as is.
        """
        if self.xla and not self.xla_whole_step:
            return self._xla(gradients)
        return gradients

    def _xla(self, fn):
        """`fn` as a `tf.function(jit_compile=True)`, traced once per compile.

        The step branches and loops on Python values only (its settings), so
        it is traced as written, without AutoGraph's rewrite of every
        function it calls (docs/design/notes.md).
        """
        functions = self._xla_functions
        if fn.__name__ not in functions:
            functions[fn.__name__] = tf.function(fn, jit_compile=True, autograph=False)
        return functions[fn.__name__]

    def get_metrics_result(self):
        """The metrics' values as a dict; see `keras.Model.get_metrics_result`.

        Keras reads every metric at the end of each epoch and evaluation.
        Read outside a step, a metric variable is summed over the replicas:
        across processes that is one eager all-reduce per variable, slow at
        every epoch end (docs/design/notes.md). The
        trackers are fed all-reduced values, so every replica's hold the
        run's numbers: across processes they are read in a replica context,
        where each reads its own, and the first local replica's are returned.
        """
        if self.process_count == 1:
            return super().get_metrics_result()
        results = self._on_each_replica("_read_metrics", super().get_metrics_result)
        return tf.nest.map_structure(self.first_local_part, results)

    def reset_metrics(self):
        """Resets the metrics; see `keras.Model.reset_metrics`.

        Keras resets them before every epoch and evaluation. Assigned outside
        a step, a metric variable is first read, so across processes each
        reset was an eager all-reduce per variable (as in
        `get_metrics_result`); there each replica resets its own, in a
        replica context.
        """
        if self.process_count == 1:
            return super().reset_metrics()
        self._on_each_replica("_reset_metrics", super().reset_metrics)

    def _on_each_replica(self, name, fn):
        """Runs `fn` on every replica, in a replica context (a `tf.function`
        kept in `self._replica_functions[name]`, traced once per compile)."""
        functions = self._replica_functions
        if name not in functions:
            strategy = self.distribute_strategy
            functions[name] = tf.function(lambda: strategy.run(fn), autograph=False)
        return functions[name]()

    def generated_images(self, generator, inputs):
        """`generator`'s images for one batch of `GAN.generate`, in inference
        mode, through one `tf.function` per generator, traced once for any
        batch size (`tf_generate.traced_generator`; docs/design/notes.md:
        the time saved against an eager call). With several processes or a
        `TPUStrategy` the generator is called eagerly.
        """
        if self.process_count > 1 or isinstance(
            self.distribute_strategy, tf.distribute.TPUStrategy
        ):
            return generator(inputs, training=False)
        call = kept_call(self, generator, lambda: traced_generator(generator, inputs))
        return call(inputs)

    def first_local_part(self, value):
        """`value`'s first local replica's part, or `value` when not distributed."""
        if isinstance(value, tf.distribute.DistributedValues):
            return self.strategy.experimental_local_results(value)[0]
        return value

    def test_step(self, data):
        # 1. Unpack this replica's share of the held-out batch.
        images, labels = self.unpack_batch(data)
        local_batch, global_batch = self._batch_sizes(images)
        divisor = tf.cast(global_batch, "float32")
        noise = validation_noise(self, local_batch, global_batch)
        inputs = self.held_out_inputs(images, labels, noise, divisor)
        # 2. Both objectives, the networks in inference mode; nothing trains.
        d_stats, g_loss = self.held_out_stats(self._network_values(), inputs)
        # 3. Update the metrics.
        return self._update_metrics(self._all_reduced(d_stats, g_loss), divisor)

    def _for_all_reduce(self, grads):
        """This replica's gradients, in the type they cross the replicas in.

        Keras's optimizers sum them over the replicas in `apply` (TensorFlow
        packs them into buffers), then cast each to its variable's float32:
        with `all_reduce_dtype="bfloat16"` the sum moves half the bytes.
        """
        if (
            self.all_reduce_dtype == "float32"
            or self.distribute_strategy.num_replicas_in_sync == 1
        ):
            return grads
        return [tf.cast(g, self.all_reduce_dtype) for g in grads]

    def _network_values(self):
        return NetworkValues(
            g_vars=_values(self.generator.trainable_variables),
            g_state=_values(self.generator.non_trainable_variables),
            d_vars=_values(self.discriminator.trainable_variables),
            d_state=_values(self.discriminator.non_trainable_variables),
        )

    def _update_ema(self, global_batch):
        if self.ema_generator is None:
            return
        step = tf.cast(self.step_counter.value, "float32")
        decay = self.ema_rate(step, global_batch)
        for average, variable in zip(
            self.ema_generator.weights, self.generator.weights, strict=True
        ):
            if variable.trainable:
                average.assign(decay * average + (1.0 - decay) * variable)
            else:  # normalization statistics: copied
                average.assign(variable)

    def _augment_probability(self):
        if self.augment is None:
            return None
        return self.augment_probability.value

    def _adapt_augmentation(self, logs, probability, logged, global_batch):
        """ADA: moves the augmentation probability; logs it as `augment_p`."""
        if self.augment is None:
            return logs
        new = self.next_augment_probability(probability, logged, global_batch)
        if new is not None:
            self.augment_probability.assign(new)
            probability = new
        logs["augment_p"] = probability
        return logs

    def _all_reduced(self, d_stats, g_loss):
        # Each replica holds its share of the global mean: sum them once.
        stats = tf.concat([d_stats, [g_loss]], axis=0)
        return tf.distribute.get_replica_context().all_reduce("sum", stats)

    def _update_metrics(self, stats, global_batch):
        for tracker, value in zip(self.trackers, tf.unstack(stats), strict=True):
            tracker.update_state(value, sample_weight=global_batch)
        return self.with_total_loss({t.name: t.result() for t in self.trackers})

    # ------------------------------------------- per-replica gradients

    def _discriminator_gradients(self, d_vars, values, inputs):
        with tf.GradientTape() as tape:
            tape.watch(d_vars)
            loss, aux = self.discriminator_objective(d_vars, values, inputs)
        return _dense(tape.gradient(loss, d_vars)), aux

    def _generator_gradients(self, g_vars, values, inputs):
        with tf.GradientTape() as tape:
            tape.watch(g_vars)
            loss, aux = self.generator_objective(g_vars, values, inputs)
        return _dense(tape.gradient(loss, g_vars)), aux

    def _joint_gradients(self, d_vars, g_vars, values, inputs):
        d_scale = self.discriminator_optimizer.scale_loss(tf.constant(1.0))
        g_scale = self.generator_optimizer.scale_loss(tf.constant(1.0))
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(d_vars)
            tape.watch(g_vars)
            (d_loss, g_loss), (d_state, g_state, stats) = self.joint_objective(
                g_vars, d_vars, values, inputs
            )
            d_scaled, g_scaled = d_loss * d_scale, g_loss * g_scale
        d_grads = _dense(tape.gradient(d_scaled, d_vars))
        g_grads = _dense(tape.gradient(g_scaled, g_vars))
        del tape
        return (d_grads, g_grads), (d_state, g_state, stats, g_loss)

    # ---------------------------------------------------------- helpers

    def _batch_sizes(self, images):
        replicas = self.distribute_strategy.num_replicas_in_sync
        local = images.shape[0]
        if local is not None:
            return local, local * replicas
        local = tf.shape(images)[0]
        return local, tf.distribute.get_replica_context().all_reduce("sum", local)

    # ---------------------------------------------------------- compile

    def compile_step(self, optimizer, jit_compile, steps_per_execution, **kwargs):
        """Compiles the step's XLA part, and Keras's step around it.

        On one device (not a TPU, where Keras compiles everything) the whole
        update after the draw is one XLA program: gradients, optimizer
        updates, EMA, step counter and metrics. Under a multi-replica
        strategy only the per-replica gradients are: XLA over the optimizer
        updates fails there (their cross-replica sums).
        """
        strategy = self.distribute_strategy
        self.xla = resolve_jit_compile(
            jit_compile, strategy, self.generator, self.discriminator
        )
        # The strategy's collectives pack the gradients themselves
        # (`bytes_per_pack`); JAX's step has its own switch.
        self.flat_all_reduce = False
        self._replica_functions = {}  # traced again for the new metrics
        check_steps_per_execution(steps_per_execution, strategy)
        self.xla_whole_step = whole_step_in_xla(self.xla, strategy)
        self._xla_functions = {}  # traced again for the new settings
        # Keras's own step stays un-jitted: the draw above stays outside XLA.
        keras.Model.compile(
            self,
            optimizer=optimizer,
            # The GAN scales each network's loss with its own wrapper.
            auto_scale_loss=False,
            jit_compile=False,
            steps_per_execution=steps_per_execution,
            **kwargs,
        )


def _dense(grads):
    # Label embeddings get `tf.IndexedSlices` gradients with one row per
    # example, so a class's row repeats. Keras 3's Adam on TensorFlow mis-
    # applies repeated rows (checked: 3 steps moved a row by 0.52 at lr 0.1,
    # the dense gradient by 0.30, the most Adam can). Dense rows are exact,
    # and cheap for `num_classes` rows.
    return [
        tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads
    ]


def _values(variables):
    return [v.value for v in variables]


def _assign(variables, values):
    for variable, value in zip(variables, values, strict=True):
        variable.assign(value)
