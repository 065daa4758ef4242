"""The run's quality figures: which ones `train` scores (or why none), the
time to a target, and the final FID after the last epoch."""

import logging
import os

from keras_tpugan import callbacks, metrics
from keras_tpugan.runs.final_fid import final_fid

logger = logging.getLogger("keras_tpugan")


def quality_scoring(config, info):
    """The run's `QualityMetrics`, logged, or why it gets none.

    Args:
        config: The run's `TrainConfig`.
        info: The prepared run's data info (`num_classes`, `num_examples`,
            `image_shape`, `name`).

    Returns:
        `(scoring, unavailable)`: a list holding the callback (empty when
        none) and the reason there is none (None when there is one).
    """
    unavailable = _quality_unavailable(config, info)
    if unavailable and config.quality_every:
        logger.warning("quality figures: %s.", unavailable)
    if unavailable or not config.quality_every:
        return [], unavailable
    quality = callbacks.QualityMetrics.for_data(
        config.image_source(),
        every_n_epochs=config.quality_every,
        num_images=config.quality_images,
        seed=config.seed,
        every_n_images=_quality_every_images(config, info),
        global_batch_size=config.batch_size,
        max_share=quality_max_share(config),
        on_unlabelled="fid",
        **({"features": "inception"} if _scores_fid(config) else {}),
    )
    record = quality.classifier_record
    if quality.features == "inception":
        logger.warning(
            "quality figures: FID, KID, precision and recall on the "
            "standard FID network (%s), against %d of the run's images "
            "(floor: %d held-out ones).",
            "quality_features=inception"
            if _scores_fid(config)
            else "no labels: no classifier",
            len(quality.real_images),
            len(quality.held_out_images),
        )
    elif record is not None:
        logger.warning(
            "quality figures: FCD, classifier score, KID, precision and "
            "recall on a classifier of the run's %d classes (test "
            "accuracy %.3f), against %d of its images (floor: %d held-out "
            "ones).",
            record["num_classes"],
            record["test_accuracy"],
            record["real_images"],
            record["held_out_images"],
        )
    return [quality], None


def run_final_fid(config, workdir, train_seconds, processes, unfinished, scoring):
    """The final FID of the run's generator (`runs/final_fid.py`), logged.

    Args:
        config: The run's `TrainConfig`.
        workdir: The run folder (its `generator.keras` is scored).
        train_seconds: The run's training time.
        processes: The run's processes (more than one: not scored).
        unfinished: Whether the run stopped before its last epoch (not
            scored).
        scoring: `quality_scoring`'s list: the FID network it scored with,
            if it did, is used again rather than built twice.

    Returns:
        `final_fid`'s dict.
    """
    skipped = None
    if processes > 1:
        skipped = "one process only: run keras-tpugan fid on the run folder after"
    elif unfinished:
        skipped = "the run is not finished (scored at its last epoch)"
    network = next(
        (q.fid_network() for q in scoring if q.features == "inception"), None
    )
    fid = final_fid(
        os.path.join(workdir, "generator.keras"),
        config.image_source(),
        num=config.fid_images,
        seed=config.seed,
        train_seconds=train_seconds,
        max_share=config.quality_max_share,
        network=network,
        skipped=skipped,
    )
    if fid["final_fid"] is not None:
        logger.warning(
            "final FID %.2f: %d generated against %d real images (%.0f s).",
            fid["final_fid"],
            fid["fid_images"],
            fid["final_fid_real_images"],
            fid["final_fid_seconds"],
        )
    elif config.fid_images != 0:
        logger.warning("final FID: skipped: %s.", fid["final_fid_skipped"])
    return fid


def _quality_unavailable(config, info):
    """Why the run gets no quality figures, or None when it gets them."""
    if not config.quality_every:
        return "off (quality_every=0)"
    shipped = callbacks.QualityMetrics.uses_mnist_classifier(config.image_source())
    labelled = shipped or (info["num_classes"] or 0) >= 2
    if labelled and not _scores_fid(config):
        return None
    # No labels: FID, on the standard network, when its weights are found.
    try:
        metrics.fid_weights_path()
    except ValueError as e:
        if labelled:
            return f"unavailable: FID needs the standard network's weights: {e}"
        shape = "x".join(map(str, info["image_shape"]))
        return (
            f"unavailable for {info['name']!r} ({shape} images, no labels): "
            "FCD and the classifier score need a classifier of the data's "
            f"classes, and FID the standard network's weights: {e}"
        )
    return None


def _scores_fid(config):
    return config.quality_features == "inception"


def quality_max_share(config):
    """No share limit with a target: the points scored (and so the time to
    target) must not depend on the machine's speed."""
    return None if config.target_fcd is not None else config.quality_max_share


def _quality_every_images(config, info):
    if config.quality_every_images or config.target_fcd is None:
        return config.quality_every_images
    # A schedule in images that is the same for every batch size.
    return config.quality_every * info["num_examples"] if info["num_examples"] else None


def time_to_target(config, scoring):
    """The quality schedule and the first score at or below the target."""
    if not scoring:
        return {}
    quality = scoring[0]
    name = "fid" if quality.features == "inception" else "fcd"
    distances = [r[name] for r in quality.records]
    out = {
        "quality_schedule": quality.records,
        # Scheduled scores skipped to keep within quality_max_share.
        "quality_skipped": quality.skipped,
        # With the FID network: the bound on a score's seconds that judged
        # the first scheduled score (None: not judged).
        "quality_first_score_bound": quality.first_score_bound,
        f"best_{name}": min(distances) if distances else None,
        "target_fcd": config.target_fcd,
        "steps_to_target": None,
        "images_to_target": None,
        "seconds_to_target": None,
    }
    reached = (
        None if config.target_fcd is None else quality.first_reaching(config.target_fcd)
    )
    if reached is not None:
        out["steps_to_target"] = reached["step"]
        out["images_to_target"] = reached["images"]
        out["seconds_to_target"] = reached["seconds"]
    return out
