"""The presets of `TrainConfig` (`TrainConfig.preset(name)`, `--preset` at the
command line): each a dict of the settings it changes from the defaults.

"demo" and "images" hold the library's recipes of the same names
(`models.RECIPES`, what `GAN.from_preset` builds) and add the data and the
schedule.
"""

from keras_tpugan.models.recipes import RECIPES

PRESETS = {
    # The offline MNIST subset (4,000 digits), about 7 to 10 minutes on a
    # 2-core CPU, with the library's "demo" recipe (`GAN.from_preset`):
    # batch-normalized generator, spectrally normalized discriminator,
    # Adam at 4e-3 with beta_1 = 0, a generator average whose half-life
    # spans the same images at any batch size. Each won its ablation (the
    # measurements: docs/design/notes.md).
    "demo": dict(
        **RECIPES["demo"],
        source="offline",
        batch_size=64,
        epochs=250,
        # mixed_bfloat16 where it is native (TPUs, recent GPUs), float32 on
        # CPUs without AMX, where emulated bfloat16 is the slower.
        precision="auto",
        # XLA on GPUs and TPUs, off on CPUs (where this DCGAN is as fast
        # without it) and where synchronized batch norm cannot run in it (a
        # multi-GPU MirroredStrategy).
        jit_compile="auto",
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
        # Every epoch scored: the preset checks that everything runs.
        quality_max_share=None,
        fid_images=0,
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
# `--preset`): the library's "images" recipe (the demo's, with the DCGAN
# sized for the resolution by `models.default_width`, 128 latents and Adam
# at 1e-3). Set epochs for the data's size, or a time budget.
PRESETS["images"] = {
    **PRESETS["demo"],
    **RECIPES["images"],
    "source": "auto",
    "epochs": 30,
}
# The demo, class-conditional: one row per class in the grids. 120 epochs:
# its classifier score passes 9 within 5 (docs/results/demo.md).
PRESETS["demo-conditional"] = {**PRESETS["demo"], "conditional": True, "epochs": 120}
