"""The TPU projection of a search: steps to the target times a step time that
grows with the batch as the reference study measured on a TPU v3-8."""

from keras_tpugan.runs import results

# The reference study's step-time model of a TPU v3-8: a step at 8x the
# batch (512 vs 64) took 1.68x as long, since small per-core batches are
# bound by per-step overhead. Used to project steps to target into time
# where no accelerator was measured.
TPU_STEP_TIME_RATIO = 1.68
TPU_BATCH_FACTOR = 8


def projected_step_time(batch, base_batch):
    """Step time at `batch` relative to `base_batch` on the TPU model.

    Linear in the batch through the reference study's measurement (8x the
    batch: 1.68x the step time): 1.0 at `base_batch`, about 1.10 at twice
    it, 1.29 at four times, 1.68 at eight times. A model for projecting,
    not a measurement: replace it with measured step times where an
    accelerator is at hand.

    Args:
        batch: Global batch size.
        base_batch: The batch size whose step time is 1.

    Returns:
        The relative step time (a float).

    Example:

    >>> round(projected_step_time(512, 64), 2)
    1.68
    """
    growth = (TPU_STEP_TIME_RATIO - 1) / (TPU_BATCH_FACTOR - 1)
    return 1.0 + growth * (batch / base_batch - 1)


def projection(best):
    """Time to target per batch size, measured here and projected to a TPU.

    Args:
        best: `best_per_batch_size`'s dict (rows with `steps_to_target`).

    Returns:
        One dict per batch size that reached the target: `batch_size`,
        `steps_to_target`, `images_to_target`, `seconds_to_target` (as
        measured), `steps_ratio` (its steps over the smallest batch's),
        `step_time_model` (`projected_step_time` from the smallest batch)
        and `projected_time_ratio` (steps x step time, over the smallest
        batch's: below 1 means the larger batch reaches the target sooner).
    """
    reached = {b: r for b, r in best.items() if r.get("steps_to_target")}
    if not reached:
        return []
    base = min(reached)
    base_steps = reached[base]["steps_to_target"]
    rows = []
    for batch, row in reached.items():
        model = projected_step_time(batch, base)
        ratio = row["steps_to_target"] / base_steps
        rows.append(
            {
                "batch_size": batch,
                "steps_to_target": row["steps_to_target"],
                "images_to_target": row["images_to_target"],
                "seconds_to_target": row["seconds_to_target"],
                "steps_ratio": ratio,
                "step_time_model": model,
                "projected_time_ratio": ratio * model,
            }
        )
    return rows


def projection_lines(best):
    rows = projection(best)
    if len(rows) < 2:
        return []
    columns = [
        ("batch_size", "batch", "d"),
        ("steps_to_target", "steps to target", "d"),
        ("images_to_target", "images to target", "d"),
        ("seconds_to_target", "s to target (here)", ".1f"),
        ("steps_ratio", "steps vs smallest", ".2f"),
        ("step_time_model", "TPU step time model", ".2f"),
        ("projected_time_ratio", "projected TPU time vs smallest", ".2f"),
    ]
    return [
        "",
        "Best trial per batch size, projected to a TPU v3-8 (step time at 8x the "
        "batch = 1.68x, the reference study's measurement, linear in between):",
        "",
        *results.markdown_table(rows, columns),
    ]
