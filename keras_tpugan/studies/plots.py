"""The studies' plots: quality over time or images, learning curves, epoch
times per batch size (matplotlib figures saved as PNG)."""

import numpy as np


def save_quality_plot(
    curves, path, title="Quality vs wall time", xlabel="training seconds", target=None
):
    """Plots FCD against training seconds (or images), one line per run.

    Args:
        curves: A dict from label to `(x, fcd)` sequences.
        path: Output PNG path.
        title: Plot title.
        xlabel: What the x values are.
        target: A target FCD, drawn as a dashed line (None: none).

    Returns:
        The path.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.subplots()
    for label, (seconds, fcd) in curves.items():
        ax.plot(seconds, fcd, marker="o", label=label)
    if target is not None:
        ax.axhline(target, color="gray", linestyle="--", label=f"target {target:g}")
    ax.set(
        xlabel=xlabel,
        ylabel="FCD (lower is better)",
        title=title,
        yscale="log",
    )
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend()
    fig.savefig(path, dpi=90)
    return path


def save_learning_curves(histories, path):
    """Plots G and D losses per epoch and per image seen, one line per run.

    Args:
        histories: A dict from label to `(history, images_per_epoch)`, the
            history as `read_history` returns it.
        path: Output PNG path.

    Returns:
        The path.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 8), layout="constrained")
    axes = fig.subplots(2, 2)
    for label, (h, images_per_epoch) in histories.items():
        epochs = h["epoch"]
        for col, key in enumerate(("g_loss", "d_loss")):
            axes[0, col].plot(epochs, h[key], marker="o", markersize=3, label=label)
            axes[1, col].plot(epochs * images_per_epoch, h[key], label=label)
    for col, key in enumerate(("generator loss", "discriminator loss")):
        axes[0, col].set(title=f"{key} per epoch", xlabel="epoch")
        axes[1, col].set(title=f"{key} per image seen", xlabel="images seen")
    for ax in axes.flat:
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend()
    fig.savefig(path, dpi=90)
    return path


def save_epoch_time_plot(batch_sizes, epoch_seconds, path):
    """Plots seconds per epoch against the global batch size.

    Args:
        batch_sizes: Global batch sizes.
        epoch_seconds: Mean epoch seconds (compile excluded), one per batch.
        path: Output PNG path.

    Returns:
        The path.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.subplots()
    seconds = [np.nan if s is None else s for s in epoch_seconds]
    ax.plot(batch_sizes, seconds, marker="o")
    ax.set(
        xscale="log",
        xlabel="global batch size",
        ylabel="seconds per epoch",
        title="Time per epoch (compile excluded)",
    )
    ax.set_xticks(list(batch_sizes), [str(b) for b in batch_sizes])
    ax.grid(alpha=0.3)
    fig.savefig(path, dpi=90)
    return path
