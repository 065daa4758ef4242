"""`fit_in_parts`: one training session over several `fit` calls."""

import keras

# Hooks that belong to a whole session, not to one `fit` call.
_SESSION_HOOKS = ("on_train_begin", "on_train_end", "set_params")
# Keras's own per-call callbacks, passed as they are.
_PER_CALL = (keras.callbacks.History, keras.callbacks.ProgbarLogger)


class _Session(keras.callbacks.Callback):
    """`callback` as one session's: begun in the first part, ended in the last.

    Every other hook is `callback`'s own bound method (so Keras sees which
    batch hooks it has, and keeps dispatching steps ahead of their logs
    where none has one); `params["epochs"]` is the session's last epoch.
    """

    def __init__(self, callback, epochs):
        super().__init__()
        self.callback = callback
        self.epochs = epochs
        # Where `GAN.fit` runs it among the callbacks (`GANCallback.log_order`).
        self.log_order = getattr(callback, "log_order", None)
        self.first = self.last = False
        for hook in dir(keras.callbacks.Callback):
            if hook.startswith("on_") and hook not in _SESSION_HOOKS:
                setattr(self, hook, getattr(callback, hook))

    def set_model(self, model):
        super().set_model(model)
        self.callback.set_model(model)

    def set_params(self, params):
        super().set_params(params)
        self.callback.set_params({**params, "epochs": self.epochs})

    def on_train_begin(self, logs=None):
        if self.first:
            self.callback.on_train_begin(logs)

    def on_train_end(self, logs=None):
        if self.last:
            self.callback.on_train_end(logs)


def fit_in_parts(model, parts, initial_epoch, callbacks, **fit_kwargs):
    """Fits `parts` in turn, as one training session for `callbacks`.

    A run resumed in the middle of an epoch trains that epoch's remaining
    batches in one `fit` call, then the other epochs in another. For the
    callbacks that is one session: `on_train_begin` runs in the first call
    and `on_train_end` after the last, and `params["epochs"]` is the
    session's last epoch in both, so a callback that acts at the end of
    training (a final snapshot, a score of the last epoch, a GIF of every
    grid) acts once, at the end. Keras's `History` and progress bar are per
    call. A part that stops the training (`model.stop_training`) ends the
    session there.

    Args:
        model: The model to fit.
        parts: `(dataset, epochs)` pairs: each part trains until epoch
            `epochs`, on from where the one before ended.
        initial_epoch: The epoch the first part starts at.
        callbacks: The session's callbacks.
        **fit_kwargs: More arguments of `model.fit`, the same for every
            part (`verbose`, `validation_data`, ...).

    Returns:
        The `keras.callbacks.History` of each part that ran, in order.

    Example:

    ```python
    histories = fit_in_parts(gan, [(dataset.skip(5), 3), (dataset, 10)], 2, [grid])
    ```
    """
    if not parts:
        raise ValueError(
            "Expected at least one (dataset, epochs) part. Received: parts=[]. "
            "Pass [(dataset, epochs)] for a single fit."
        )
    sessions = [
        c if isinstance(c, _PER_CALL) else _Session(c, parts[-1][1]) for c in callbacks
    ]
    histories = []
    for i, (dataset, epochs) in enumerate(parts):
        if histories and model.stop_training:  # stopped in the part before
            for session in sessions:
                if isinstance(session, _Session):
                    session.callback.on_train_end()
            break
        for session in sessions:
            if isinstance(session, _Session):
                session.first, session.last = i == 0, i == len(parts) - 1
        histories.append(
            model.fit(
                dataset,
                epochs=epochs,
                initial_epoch=initial_epoch,
                callbacks=sessions,
                **fit_kwargs,
            )
        )
        initial_epoch = epochs
    return histories
