"""The presets of `TrainConfig` (`TrainConfig.preset(name)`, `--preset` at the
command line): each a dict of the settings it changes from the defaults."""

PRESETS = {
    # The offline MNIST subset (4,000 digits), about 11 to 16 minutes on a
    # 2-core CPU. Batch-normalized generator, spectrally normalized
    # discriminator, Adam at 4e-3 with beta_1 = 0: each won its ablation
    # (the measurements: docs/design_notes.md).
    "demo": dict(
        source="offline",
        latent_dim=64,
        width=64,
        norm="batch",
        d_norm="spectral",
        batch_size=64,
        epochs=250,
        learning_rate=4e-3,
        beta_1=0.0,
        # mixed_bfloat16 where it is native (TPUs, recent GPUs), float32 on
        # CPUs without AMX, where emulated bfloat16 is the slower.
        precision="auto",
        # XLA on GPUs and TPUs, off on CPUs (where this DCGAN is as fast
        # without it) and where synchronized batch norm cannot run in it (a
        # multi-GPU MirroredStrategy).
        jit_compile="auto",
        # The average spans the same images at any batch size.
        ema_halflife_images=20_000,
        quality_every=5,
    ),
    # Seconds: checks that everything runs.
    "smoke": dict(
        source="offline",
        latent_dim=16,
        width=16,
        batch_size=64,
        epochs=1,
        precision="float32",
        num_samples=16,
        quality_every=1,
        quality_images=200,
    ),
    # The reference study's setting on a TPU v3-8: full MNIST from TFDS,
    # bfloat16 + XLA, batch 512, 30 epochs.
    "mnist-tpu": dict(
        source="tfds",
        latent_dim=128,
        width=128,
        batch_size=512,
        epochs=30,
        precision="mixed_bfloat16",
        jit_compile=True,
        strategy="auto",
    ),
}


# Your own images (a folder, CIFAR-10, CelebA, ...; `--data` without
# `--preset`): the demo's recipe, each part chosen by its ablation on
# MNIST (README, "Ablations"), with the DCGAN sized for the resolution
# (`models.default_width`: the reference DCGAN's 512..64 filters at
# 64x64) and 128 latents. Its learning rate is the one of three (2e-4
# with beta_1 0.5, 1e-3, 4e-3) that did best on both seeds of the RGB
# benchmark at 32x32 (README, "An RGB benchmark offline"). Set epochs
# for the data's size, or a time budget.
PRESETS["images"] = {
    **PRESETS["demo"],
    "source": "auto",
    "latent_dim": 128,
    "width": None,
    "learning_rate": 1e-3,
    "epochs": 30,
}
# The demo, class-conditional: one row per class in the grids. 120 epochs:
# its classifier score passes 9 within 5 (README).
PRESETS["demo-conditional"] = {**PRESETS["demo"], "conditional": True, "epochs": 120}
