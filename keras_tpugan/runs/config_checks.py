"""`TrainConfig`'s checks: the types of its fields, the values each allows,
and the owners' own checks (the GAN's, the dropout's, the augmentation's)
called with their messages."""

import dataclasses

from keras_tpugan import (
    distribute,
    gan_checks,
    large_batch,
    losses,
    models,
    penalties,
    precision,
)
from keras_tpugan.keyed_dropout import check_rate
from keras_tpugan.runs.config_types import is_type, type_name

# What the quality figures are computed on: "auto" (MNIST's shipped
# classifier, a classifier of labelled data's classes, the standard FID
# network for data without labels) or "inception" (the FID network always).
QUALITY_FEATURES = ("auto", "inception")


def check_config(config):
    """Raises a `ValueError` naming the first field of `config` that is wrong."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if not is_type(value, field.type):
            raise ValueError(
                f"Expected {field.name} to be {type_name(field.type)}. "
                f"Received: {field.name}={value!r}."
            )
    checks = {
        "architecture": models.ARCHITECTURES,
        "norm": models.NORMS,
        "d_norm": models.D_NORMS,
        "loss": tuple(losses.LOSSES),
        "precision": precision.POLICIES,
        "strategy": distribute.KINDS,
        "collective": distribute.COLLECTIVES,
        "optimizer": large_batch.OPTIMIZERS,
        "lr_scaling": large_batch.LR_SCALINGS,
        "gradient_penalty": (None, *penalties.PENALTIES),
        "all_reduce_dtype": precision.ALL_REDUCE_DTYPES,
        "quality_features": QUALITY_FEATURES,
    }
    for name, allowed in checks.items():
        if getattr(config, name) not in allowed:
            raise ValueError(
                f"Expected {name} in {allowed}. Received: "
                f"{name}={getattr(config, name)!r}."
            )
    if config.architecture == "resnet" and (
        config.d_norm != "spectral" or config.d_dropout
    ):
        raise ValueError(
            "Expected d_norm='spectral' and d_dropout=0 with "
            "architecture='resnet' (its discriminator is spectrally "
            f"normalized, without dropout). Received: d_norm={config.d_norm!r}, "
            f"d_dropout={config.d_dropout}. Set d_norm=spectral."
        )
    if config.width is not None and config.width < 1:
        raise ValueError(
            f"Expected width >= 1, or None (sized for the resolution). "
            f"Received: width={config.width}."
        )
    for name in (
        "latent_dim",
        "batch_size",
        "epochs",
        "num_samples",
        "sample_every",
        "quality_images",
        "base_batch_size",
        "steps_per_execution",
    ):
        if getattr(config, name) < 1:
            raise ValueError(
                f"Expected {name} >= 1. Received: {name}={getattr(config, name)}."
            )
    check_fid_images(config.fid_images)
    for name in ("backup_minutes", "curves_every_seconds"):
        if getattr(config, name) < 0:
            raise ValueError(
                f"Expected {name} >= 0 (0: every epoch). Received: "
                f"{name}={getattr(config, name)}."
            )
    for name in ("validation_every_images", "sample_every_images"):
        every = getattr(config, name)
        if every is not None and every < 1:
            raise ValueError(
                f"Expected {name} >= 1, or None (by epochs). Received: {every}."
            )
    for name in ("start_timeout_seconds", "heartbeat_timeout_seconds"):
        if getattr(config, name) <= 0:
            raise ValueError(
                f"Expected {name} > 0. Received: {name}={getattr(config, name)}."
            )
    if config.collective_bytes_per_pack < 0:
        raise ValueError(
            "Expected collective_bytes_per_pack >= 0 (0: TensorFlow decides). "
            f"Received: {config.collective_bytes_per_pack}."
        )
    if (
        config.collective_timeout_seconds is not None
        and config.collective_timeout_seconds <= 0
    ):
        raise ValueError(
            "Expected collective_timeout_seconds > 0 or None. Received: "
            f"{config.collective_timeout_seconds}."
        )
    if config.num_replicas is not None and config.num_replicas < 1:
        raise ValueError(
            "Expected num_replicas >= 1, or None (every device). "
            f"Received: num_replicas={config.num_replicas}."
        )
    if config.warmup_epochs < 0:
        raise ValueError(
            f"Expected warmup_epochs >= 0. Received: {config.warmup_epochs}."
        )
    if config.quality_every_images is not None and config.quality_every_images < 1:
        raise ValueError(
            "Expected quality_every_images >= 1 or None. Received: "
            f"{config.quality_every_images}."
        )
    for name, what in (
        ("quality_max_share", "score"),
        ("sample_max_share", "sample grid"),
    ):
        share = getattr(config, name)
        if share is not None and (isinstance(share, bool) or not 0 < share < 1):
            raise ValueError(
                f"Expected {name} in (0, 1), or None (every scheduled {what}). "
                f"Received: {name}={share!r}."
            )
    if config.target_fcd is not None and config.target_fcd <= 0:
        raise ValueError(
            f"Expected target_fcd > 0 or None. Received: {config.target_fcd}."
        )
    if config.snapshot_every < 0:
        raise ValueError(
            "Expected snapshot_every >= 0 (0: a snapshot at the end only). "
            f"Received: snapshot_every={config.snapshot_every}."
        )
    if config.quality_every < 0:
        raise ValueError(
            f"Expected quality_every >= 0. Received: {config.quality_every}."
        )
    if config.learning_rate <= 0:
        raise ValueError(
            f"Expected learning_rate > 0. Received: {config.learning_rate}."
        )
    for name in ("beta_1", "beta_2", "d_beta_1", "d_beta_2"):
        value = getattr(config, name)
        if value is not None and not 0.0 <= value < 1.0:
            raise ValueError(f"Expected {name} in [0, 1). Received: {value}.")
    if config.d_learning_rate is not None and config.d_learning_rate <= 0:
        raise ValueError(
            "Expected d_learning_rate > 0 or None (the generator's). "
            f"Received: {config.d_learning_rate}."
        )
    # The owners' own checks, with their messages.
    config.image_source()
    gan_checks.check_update(config.update, config.discriminator_steps)
    gan_checks.check_jit_compile(config.jit_compile)
    gan_checks.check_ema(
        config.ema_decay, config.ema_halflife_images, config.ema_rampup
    )
    check_rate(config.d_dropout, name="d_dropout")
    if config.augment != "none":
        config.augmentation()  # its own checks: policy, probabilities
    config.scaled_adam_moments("g")  # beta_2 must stay in [0, 1) scaled
    config.scaled_adam_moments("d")
    if config.penalty_weight is not None:
        if config.gradient_penalty is None:
            raise ValueError(
                "Expected penalty_weight only with a gradient_penalty. "
                f"Received: penalty_weight={config.penalty_weight} with "
                "gradient_penalty=None. Set gradient_penalty=wgan-gp or r1, "
                "or drop penalty_weight."
            )
        if config.penalty_weight <= 0:
            raise ValueError(
                "Expected penalty_weight > 0 (10 is usual). Received: "
                f"penalty_weight={config.penalty_weight}."
            )


def check_fid_images(fid_images):
    """Raises a `ValueError` unless `fid_images` is None, 0 or at least 2."""
    if fid_images is not None and (
        isinstance(fid_images, bool)
        or not isinstance(fid_images, int)
        or fid_images == 1
        or fid_images < 0
    ):
        raise ValueError(
            "Expected fid_images >= 2 (a covariance needs 2 images), 0 (off) "
            "or None (10,000 when they cost at most quality_max_share of the "
            f"training time). Received: fid_images={fid_images!r}."
        )
