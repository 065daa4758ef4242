"""`LossCurves`: the history as CSV and the learning curves as a PNG."""

import csv
import os
import time
import uuid

import numpy as np

from keras_tpugan import directions
from keras_tpugan.callbacks.gan_callback import FAST_PNG, GANCallback, show_inline
from keras_tpugan.whole_files import replaced_whole

# Points per curve in `loss_curves.png`: longer per-step curves are drawn as
# a band (each run of steps' minimum and maximum) with the average at its
# points. Drawing every step of a long run took most of a second a redraw,
# and a panel 450 pixels wide shows no more.
MAX_POINTS = 1000
# The quality scores `quality.png` plots, each on its own panel.
QUALITY_PANELS = (
    (
        "Frechet distance (lower is better)",
        ("fcd", "fid", "fcd_real_floor", "fid_real_floor"),
    ),
    ("Kernel distance (lower is better)", ("kid",)),
    ("Precision and recall (higher is better)", ("precision", "recall")),
)


class LossCurves(GANCallback):
    """Writes `history.csv` every epoch and a `loss_curves.png` kept fresh.

    `history.csv` holds every logged value per epoch, one row per epoch,
    appended to across resumed runs (a fit that starts past epoch 0, as a
    resumed one does, first drops the rows of the epochs it trains again,
    left by a run killed after its backup); the scores of an epoch `QualityMetrics`
    did not score are blank. The figure plots the discriminator and
    generator losses per step (faint), smoothed (exponential moving
    average, bold) and per epoch (dots), and the mean discriminator outputs
    on real and generated images. With `validation_data` it adds the
    held-out `val_d_loss` and `val_d_real` per epoch (gray squares): real
    logits that rise on the training images but not on held-out ones show
    the discriminator memorizing the training set. In a notebook it is
    shown inline. Once the logs carry quality scores (`QualityMetrics`), it
    also writes `quality.png`: the scored epochs' FCD (or FID, with the
    real-data floor), KID, precision and recall; unscored epochs (logged as
    the worst value, `inf`) are left out.

    Args:
        directory: Output directory.
        smoothing: Weight of the moving average of the per-step curves
            (0 plots them raw; 0.9 smooths strongly).
        show: Show the figure inline in notebooks.
        every_seconds: Redraw `loss_curves.png` (and `quality.png`, when a
            score came since) at the end of an epoch only when this many
            seconds have passed since they were last drawn (they are drawn
            after the first epoch and at the end of training), so that
            drawing takes a small share of a run whose epochs are short;
            0: every epoch.

    Example:

    ```python
    gan.fit(ds, epochs=5, callbacks=[ktg.callbacks.LossCurves("runs/x")])
    ```
    """

    def __init__(self, directory, smoothing=0.9, show=True, every_seconds=10.0):
        super().__init__(directory)
        if not 0.0 <= smoothing < 1.0:
            raise ValueError(
                f"Expected `smoothing` in [0, 1). Received: smoothing={smoothing}."
            )
        if every_seconds < 0:
            raise ValueError(
                "Expected `every_seconds` >= 0 (0: every epoch). Received: "
                f"every_seconds={every_seconds}."
            )
        self.smoothing = smoothing
        self.show = show
        self.every_seconds = every_seconds
        self._display_id = f"loss-curves-{uuid.uuid4().hex}"

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self.steps = {}  # name -> per-step values
        self.epochs = {}  # name -> per-epoch values
        # name -> the epochs (1-based) of those values: a resumed fit starts
        # past epoch 1, and validation may run every few epochs only.
        self.epoch_numbers = {}
        self._first_epoch = None  # of this fit, 0-based
        self._running = {}
        self._drawn_at = None  # `time.monotonic()` of the last drawing
        self._kept = {}  # name -> (figure, axes), redrawn in place
        # Whether the logs have changed since then, and scores with them.
        self._undrawn = self._scores_undrawn = False

    def on_epoch_begin(self, epoch, logs=None):
        if self._first_epoch is None:
            self._first_epoch = epoch
            if epoch > 0 and self.chief:
                self._drop_rows_from(epoch + 1)
        self._running = {}
        self._seen = 0

    def on_train_batch_end(self, batch, logs=None):
        # Keras logs running epoch means; recover each step's own value
        # (steps of one epoch have the same global batch).
        self._seen += 1
        k = self._seen
        for name, value in (logs or {}).items():
            value = float(value)
            previous = self._running.get(name, 0.0)
            self.steps.setdefault(name, []).append(k * value - (k - 1) * previous)
            self._running[name] = value

    def on_epoch_end(self, epoch, logs=None):
        for name, value in (logs or {}).items():
            self.epochs.setdefault(name, []).append(float(value))
            self.epoch_numbers.setdefault(name, []).append(epoch + 1)
        if not self.chief:
            return
        self._write_csv(epoch, logs or {})
        now = time.monotonic()
        # quality.png is redrawn only when a new score came, on the same clock.
        self._scores_undrawn |= _scored(logs or {})
        if self._drawn_at is None or now - self._drawn_at >= self.every_seconds:
            self._draw()
        else:
            self._undrawn = True

    def on_train_end(self, logs=None):
        if self.chief and (self._undrawn or self._scores_undrawn):
            self._draw()

    def _draw(self):
        path = self.path("loss_curves.png")
        self._redrawn("curves", self._curves_axes, self._plot_curves).savefig(
            path, dpi=100, pil_kwargs=FAST_PNG
        )
        if self.show:
            show_inline(path, self._display_id)
        if self._scores_undrawn:  # (set only when a finite score came)
            self._redrawn("quality", self._quality_axes, self._plot_quality).savefig(
                self.path("quality.png"), dpi=100, pil_kwargs=FAST_PNG
            )
        self._drawn_at = time.monotonic()
        self._undrawn = self._scores_undrawn = False

    def _redrawn(self, name, new_axes, plot):
        """The kept figure `name` (made by `new_axes` on first use) with its
        data drawn anew by `plot`. Its axes, titles and ticks are built once
        (why: docs/design/notes.md, "Side work on the clock")."""
        if name not in self._kept:
            self._kept[name] = new_axes()
        fig, axes = self._kept[name]
        for ax in axes:
            for artist in [*ax.lines, *ax.collections]:
                artist.remove()
            if ax.get_legend() is not None:
                ax.get_legend().remove()
            ax.set_prop_cycle(None)  # the same colours as a new figure's
        plot(axes)
        for ax in axes:
            if ax.has_data():
                ax.relim()
                ax.autoscale_view()
            else:  # as a new figure's empty panel
                ax.set_xlim(0, 1, auto=True)
                ax.set_ylim(0, 1, auto=True)
        return fig

    def _write_csv(self, epoch, logs):
        # keras.callbacks.CSVLogger fixes its columns at the first epoch,
        # before a metric scored every few epochs (or the validation losses
        # of `validation_freq` > 1) first appears: write the rows here,
        # adding columns as keys appear.
        path = self.path("history.csv")
        header, rows = None, []
        if os.path.exists(path) and os.path.getsize(path) > 0:
            with open(path, newline="") as f:
                header = next(csv.reader(f))
        # An unscored epoch's scores (the worst value, `inf`) are blank.
        row = {k: "" if directions.unscored(v) else v for k, v in logs.items()}
        row["epoch"] = epoch + 1
        new = sorted(k for k in row if k not in (header or ["epoch"]))
        if header and not new:  # the usual epoch: one line appended
            with open(path, "a", newline="") as f:
                csv.writer(f).writerow([row.get(k, "") for k in header])
            return
        if header:  # a key appeared: the rows so far get the new columns
            with open(path, newline="") as f:
                rows = list(csv.DictReader(f))
        _rewrite_csv(path, (header or ["epoch"]) + new, [*rows, row])

    def _drop_rows_from(self, epoch):
        """Drops `history.csv`'s rows of `epoch` (1-based) and later."""
        path = self.path("history.csv")
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            return
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames
            rows = list(reader)
        kept = [r for r in rows if r.get("epoch") and int(r["epoch"]) < epoch]
        if len(kept) < len(rows):
            _rewrite_csv(path, header, kept)

    def figure(self):
        """Returns the learning-curve figure (a matplotlib `Figure`)."""
        fig, axes = self._curves_axes()
        self._plot_curves(axes)
        return fig

    def quality_figure(self):
        """The scores over the epochs (a matplotlib `Figure`), or None before
        the first scored epoch."""
        if not any(self._scored_values().values()):
            return None
        fig, axes = self._quality_axes()
        self._plot_quality(axes)
        return fig

    @staticmethod
    def _curves_axes():
        from matplotlib.figure import Figure

        fig = Figure(figsize=(10, 4))
        # Fixed margins: a layout engine ("constrained", "tight") would
        # double the time of every redraw.
        fig.subplots_adjust(left=0.07, right=0.98, bottom=0.12, top=0.91, wspace=0.22)
        losses, outputs = fig.subplots(1, 2)
        losses.set_title("Learning curves (loss per step, epoch means as dots)")
        outputs.set_title("Mean discriminator output (logit)")
        for ax in (losses, outputs):
            ax.set_xlabel("epoch")
            ax.grid(alpha=0.3)
        return fig, (losses, outputs)

    def _plot_curves(self, axes):
        steps_per_epoch = max(
            1,
            len(self.steps.get("g_loss", []))
            // max(1, len(self.epochs.get("g_loss", []))),
        )
        first = self._first_epoch or 0  # a resumed fit's steps start past 0
        for ax, names, held_out in zip(
            axes,
            (("d_loss", "g_loss"), ("d_real", "d_fake")),
            ("val_d_loss", "val_d_real"),
            strict=True,
        ):
            _plot_held_out(
                ax,
                self.epoch_numbers.get(held_out),
                self.epochs.get(held_out),
                held_out,
            )
            for name in names:
                if name not in self.steps:
                    continue
                raw = np.asarray(self.steps[name])
                x = first + np.arange(1, len(raw) + 1) / steps_per_epoch
                smooth = _ema(raw, self.smoothing)
                if len(raw) <= MAX_POINTS:
                    (line,) = ax.plot(x, smooth, label=name)
                    ax.plot(x, raw, color=line.get_color(), alpha=0.25, linewidth=0.8)
                else:  # the raw steps as a band, the average at its points
                    at, low, high = _envelope(raw, MAX_POINTS)
                    (line,) = ax.plot(x[at], smooth[at], label=name)
                    ax.fill_between(
                        x[at], low, high, color=line.get_color(), alpha=0.25, lw=0
                    )
                ax.plot(
                    self.epoch_numbers.get(name, []),
                    self.epochs.get(name, []),
                    "o",
                    color=line.get_color(),
                    markersize=5,
                    markeredgecolor="black",
                )
            ax.legend()

    def _scored_values(self):
        """name -> the scored `(epoch, value)` pairs (none when unscored)."""
        return {
            name: [
                (epoch, value)
                for epoch, value in zip(
                    self.epoch_numbers.get(name, []),
                    self.epochs.get(name, []),
                    strict=True,
                )
                if np.isfinite(value)
            ]
            for _, names in QUALITY_PANELS
            for name in names
            if name in self.epochs
        }

    @staticmethod
    def _quality_axes():
        from matplotlib.figure import Figure

        fig = Figure(figsize=(12, 3.6))
        fig.subplots_adjust(left=0.06, right=0.98, bottom=0.14, top=0.9, wspace=0.22)
        axes = fig.subplots(1, len(QUALITY_PANELS))
        for ax, (title, _) in zip(axes, QUALITY_PANELS, strict=True):
            ax.set_title(title, fontsize=10)
            ax.set_xlabel("epoch")
            ax.grid(alpha=0.3)
        return fig, axes

    def _plot_quality(self, axes):
        scored = self._scored_values()
        for ax, (_, names) in zip(axes, QUALITY_PANELS, strict=True):
            for name in names:
                if scored.get(name):
                    epochs, values = zip(*scored[name], strict=True)
                    style = "--" if name.endswith("_floor") else "o-"
                    ax.plot(epochs, values, style, markersize=4, label=name)
            if ax.get_legend_handles_labels()[0]:
                ax.legend()


def _scored(logs):
    """Whether `logs` carry a score of this epoch (the floors come every
    epoch, unscored epochs log `inf` or `-inf`)."""
    return any(
        name in logs and np.isfinite(logs[name])
        for _, names in QUALITY_PANELS
        for name in names
        if not name.endswith("_floor")
    )


def _plot_held_out(ax, epochs, values, name):
    # Validation values exist per epoch only (with `validation_data`): the
    # gap between `d_real` and `val_d_real` is the discriminator
    # over-fitting the training images.
    if not values:
        return
    ax.plot(
        epochs,
        values,
        "s--",
        color="gray",
        markersize=4,
        label=f"{name} (held out)",
    )


def _envelope(values, buckets):
    """`values` in `buckets` runs: each run's middle index, minimum, maximum."""
    edges = np.linspace(0, len(values), buckets + 1).astype(int)
    starts = edges[:-1]
    middle = (starts + edges[1:] - 1) // 2
    return (
        middle,
        np.minimum.reduceat(values, starts),
        np.maximum.reduceat(values, starts),
    )


def _ema(values, weight):
    out, last = np.empty_like(values), values[0] if len(values) else 0.0
    for i, v in enumerate(values):
        last = weight * last + (1.0 - weight) * v
        out[i] = last
    return out


def _rewrite_csv(path, header, rows):
    """Writes `history.csv` anew, whole or not at all."""
    with replaced_whole(path) as partial, open(partial, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header, restval="")
        writer.writeheader()
        writer.writerows(rows)
