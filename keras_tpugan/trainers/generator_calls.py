"""`kept_call`: `GAN.generate`'s compiled generator call, one per generator.

Each backend's `generated_images` builds its own compiled call of a
generator (a `jax.jit` program, a traced `tf.function`); `kept_call` builds
it on the generator's first use and keeps it on the GAN, outside Keras's
attribute tracking (it is neither a layer nor saved), keyed by the generator
itself: the generator and its EMA copy each have theirs.
"""


def kept_call(owner, generator, build):
    """The compiled call of `generator` kept on `owner`, built on first use.

    Args:
        owner: The GAN (its backend step) that keeps the calls.
        generator: The generator model the call runs.
        build: A function of no arguments that returns the call.

    Returns:
        The call `build` returned for `generator`, the first time or kept.

    Example:

    >>> class Owner: pass
    >>> owner, generator = Owner(), object()
    >>> kept_call(owner, generator, lambda: "call") is kept_call(
    ...     owner, generator, lambda: "another"
    ... )
    True
    """
    calls = owner.__dict__.setdefault("_generator_calls", {})
    if generator not in calls:
        calls[generator] = build()
    return calls[generator]
