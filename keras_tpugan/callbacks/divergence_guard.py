"""`DivergenceGuard`: stops a diverging GAN and keeps its last good weights."""

import logging
import math

from keras_tpugan.callbacks.gan_callback import GANCallback

logger = logging.getLogger("keras_tpugan")


class DivergenceGuard(GANCallback):
    """Stops training on non-finite losses or a collapsed discriminator.

    - A NaN or Inf in any logged value stops training at once.
    - A discriminator loss outside `d_loss_band` for `patience` epochs in a
      row stops training too: near 0 the discriminator wins outright and the
      generator gets no signal; far above the band it has collapsed.

    In both cases the GAN gets back the weights it had at the end of the last
    good epoch (or at the start), and `stopped_reason` says why it stopped
    (also logged as a warning). Optimizer states are not rolled back.

    Args:
        d_loss_band: `(low, high)` bounds of the epoch's mean `d_loss`, or
            None to check only for non-finite values. The default suits the
            non-saturating loss (log(4) = 1.39 at equilibrium); set your own
            for the Wasserstein loss, whose values are unbounded.
        patience: Consecutive epochs outside the band before stopping.

    Example:

    ```python
    guard = ktg.callbacks.DivergenceGuard(d_loss_band=(0.05, 5.0))
    gan.fit(ds, epochs=30, callbacks=[guard])
    print(guard.stopped_reason)
    ```
    """

    def __init__(self, d_loss_band=(0.01, 10.0), patience=3):
        super().__init__(None)
        if d_loss_band is not None and not d_loss_band[0] < d_loss_band[1]:
            raise ValueError(
                f"Expected d_loss_band (low, high) with low < high. Received: "
                f"d_loss_band={d_loss_band}."
            )
        if patience < 1:
            raise ValueError(f"Expected patience >= 1. Received: patience={patience}.")
        self.d_loss_band = d_loss_band
        self.patience = patience

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self.good_weights = self.model.get_weights()
        self.good_epoch = None
        self.stopped_reason = None
        self.outside = 0
        self._epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        for name, value in (logs or {}).items():
            if not math.isfinite(float(value)):
                self._stop(
                    f"{name} became {float(value)} at epoch {self._epoch + 1}, "
                    f"step {batch + 1}"
                )
                return

    def on_epoch_end(self, epoch, logs=None):
        if self.stopped_reason is not None:
            return
        d_loss = float((logs or {}).get("d_loss", float("nan")))
        if self.d_loss_band is not None:
            low, high = self.d_loss_band
            if not low <= d_loss <= high:
                self.outside += 1
                if self.outside >= self.patience:
                    self._stop(
                        f"d_loss {d_loss:.4g} stayed outside [{low}, {high}] for "
                        f"{self.outside} epoch(s), up to epoch {epoch + 1}: the "
                        "discriminator collapsed"
                    )
                return
        self.outside = 0
        self.good_weights = self.model.get_weights()
        self.good_epoch = epoch + 1

    def _stop(self, what):
        back_to = (
            f"the end of epoch {self.good_epoch}"
            if self.good_epoch
            else "the start of training"
        )
        self.stopped_reason = f"{what}; weights restored to {back_to}."
        self.model.set_weights(self.good_weights)
        self.model.stop_training = True
        logger.warning("DivergenceGuard stopped training: %s", self.stopped_reason)
