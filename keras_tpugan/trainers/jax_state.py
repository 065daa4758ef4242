"""The JAX step's state: where each part of the GAN sits in the state
tuple Keras threads through its jitted step, and named views into it."""

import jax


def state_slots(gan):
    """Where each part of the GAN sits in the state lists of Keras."""
    trainable = gan.trainable_variables
    non_trainable = gan.non_trainable_variables
    optimizer = gan.optimizer.variables
    slots = {
        "g_vars": (0, positions(gan.generator.trainable_variables, trainable)),
        "d_vars": (
            0,
            positions(gan.discriminator.trainable_variables, trainable),
        ),
        "g_state": (
            1,
            positions(gan.generator.non_trainable_variables, non_trainable),
        ),
        "d_state": (
            1,
            positions(gan.discriminator.non_trainable_variables, non_trainable),
        ),
        "step": (1, positions([gan.step_counter], non_trainable)),
        "g_opt": (2, positions(gan.generator_optimizer.variables, optimizer)),
        "d_opt": (
            2,
            positions(gan.discriminator_optimizer.variables, optimizer),
        ),
        "metrics": (3, list(range(len(gan.metrics_variables)))),
    }
    if gan.augment is not None:
        slots["augment_p"] = (
            1,
            positions([gan.augment_probability], non_trainable),
        )
    if gan.ema_generator is not None:
        slots["ema"] = (1, positions(gan.ema_generator.weights, non_trainable))
        groups = {
            "g_vars": gan.generator.trainable_variables,
            "g_state": gan.generator.non_trainable_variables,
        }
        sources = {
            id(v): (group, i)
            for group, variables in groups.items()
            for i, v in enumerate(variables)
        }
        slots["ema_sources"] = [sources[id(v)] for v in gan.generator.weights]
    return slots


def positions(variables, within):
    """The index of each of `variables` in the list `within`."""
    index = {id(v): i for i, v in enumerate(within)}
    return [index[id(v)] for v in variables]


class StepState:
    """Named views into Keras's JAX state tuple; `set` builds new lists.

    Args:
        slots: Where each part sits (`state_slots`).
        state: The state tuple Keras passes to the step.
    """

    def __init__(self, slots, state):
        self._slots = slots
        self._lists = [list(part) for part in state]

    def get(self, name):
        part, indices = self._slots[name]
        return [self._lists[part][i] for i in indices]

    def set(self, name, values):
        part, indices = self._slots[name]
        for i, value in zip(indices, values, strict=True):
            self._lists[part][i] = value

    def values(self):
        return tuple(self._lists)


def commit_to_device(variables):
    """Commits each variable's value to the one device it is on (see
    `JAXGANStep.reset_metrics`); committed values are left as they are."""
    for variable in variables:
        value = variable.value
        if isinstance(value, jax.Array) and not value.committed:
            (device,) = value.devices()
            variable.assign(jax.device_put(value, device))
