# ---
# jupyter:
#   accelerator: GPU
#   colab:
#     gpuType: T4
#     provenance: []
#   jupytext:
#     formats: ipynb,py:percent
#     notebook_metadata_filter: accelerator,colab
#   kernelspec:
#     display_name: Python 3
#     name: python3
# ---

# %% [markdown]
# # Your own images: a folder, Drive, CIFAR-10 or CelebA
#
# This notebook trains a GAN on your images with `keras_tpugan`'s `train`, the function
# behind `keras-tpugan train`: a folder of photos (flat or one subfolder per class,
# uploaded as a zip or on Google Drive) or a TFDS dataset (`cifar10`, `celeb_a`, ...),
# brought to `IMAGE_SIZE` squares (centre crop, then resize). Everything lands in `OUT`:
# sample grids per epoch, learning curves, snapshots of the whole GAN and a backup every
# 5 minutes of training (at an epoch's end). In Colab `OUT` is on Drive by default, so a session that ends can be
# continued: run the notebook again and it resumes from the last completed epoch, with the
# weights an uninterrupted run would have. Raising `EPOCHS` trains a finished run on; a
# finished run is never overwritten.

# %% [markdown]
# ## Parameters
# `DATA`: a TFDS name, or a folder (with `MOUNT_DRIVE`, a path under
# `/content/drive/MyDrive/`). `UPLOAD_ZIP` asks for a zip of images and trains on it.
# `IMAGE_SIZE`: CIFAR-10 is 32x32 (larger only upsamples it); photos train well at 64.
# `TIME_BUDGET_MINUTES` stops at the end of the epoch in which that much training time has
# passed (0: no budget), before Colab ends the session.

# %% tags=["parameters"]
DATA = "cifar10"  # @param {type:"string"}
IMAGE_SIZE = 32  # @param {type:"integer"}
CHANNELS = 3  # @param {type:"integer"}
EPOCHS = 30  # @param {type:"integer"}
BATCH_SIZE = 128  # @param {type:"integer"}
# Filters of the widest layer (0: sized for IMAGE_SIZE, the reference DCGAN's plan).
WIDTH = 0  # @param {type:"integer"}
# "auto": mixed_bfloat16 where the hardware computes in bfloat16 (TPUs, recent GPUs),
# else float32.
PRECISION = "auto"  # @param ["auto", "mixed_bfloat16", "mixed_float16", "float32"]
# Score FCD, the classifier score, precision and recall every N epochs, for labelled
# data (0: off).
QUALITY_EVERY = 5  # @param {type:"integer"}
TIME_BUDGET_MINUTES = 0  # @param {type:"number"}
# Read the images batch by batch from their files instead of holding them in memory, for
# data larger than the runtime's RAM (a folder; a TFDS dataset on TensorFlow).
STREAM = False  # @param {type:"boolean"}
# In Colab, mount Google Drive (the run folder goes there by default).
MOUNT_DRIVE = True  # @param {type:"boolean"}
UPLOAD_ZIP = False  # @param {type:"boolean"}
# The run folder; "" : on Drive when it is mounted
# (/content/drive/MyDrive/keras-tpugan/own_images), else runs/own_images.
OUT = ""  # @param {type:"string"}
# "auto": JAX when a TPU is attached and TensorFlow has no TPU support (today's Colab TPU
# runtimes), else TensorFlow; or name one.
BACKEND = "auto"  # @param ["auto", "tensorflow", "jax"]
# In Colab: what pip installs keras-tpugan from (a wheel, a git URL with an extra such as
# [cpu,jax-tpu], [tpu], [gpu] or [cpu], or an index name).
PACKAGE = ""  # @param {type:"string"}

# %% [markdown]
# ## Install and backend
# In Colab, `PACKAGE` is installed with pip: a wheel (`python -m build` in the repository
# writes one to `dist/`; upload it or put it on Drive), a git URL
# (`git+https://...` with an extra such as `[cpu,jax-tpu]`) or an index name. Elsewhere the
# notebook uses the environment it runs in. Keras reads its backend once, when it is first
# imported, so the backend is set here: `"auto"` takes JAX when a TPU is attached and
# TensorFlow has no TPU support (today's Colab TPU runtimes), else TensorFlow.

# %% tags=["setup"]
import glob
import importlib.metadata
import importlib.util
import os
import subprocess
import sys

if "google.colab" in sys.modules and PACKAGE:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", PACKAGE], check=True)
elif importlib.util.find_spec("keras_tpugan") is None:
    raise SystemExit(
        "keras_tpugan is not installed: set PACKAGE (a wheel path, a git URL or an "
        "index name) in the parameters cell and run again."
    )


def tensorflow_has_tpu_support():
    """True when TensorFlow's TPU build (the tensorflow-tpu distribution) is installed."""
    try:
        importlib.metadata.version("tensorflow-tpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


# The TPU's device files (up to v4, from v5) and the variables TPU images set.
tpu_attached = bool(
    glob.glob("/dev/accel[0-9]*")
    or glob.glob("/dev/vfio/[0-9]*")
    or os.environ.get("TPU_ACCELERATOR_TYPE")
    or os.environ.get("COLAB_TPU_ADDR")
)
if BACKEND == "auto":
    BACKEND = (
        "jax" if tpu_attached and not tensorflow_has_tpu_support() else "tensorflow"
    )
os.environ["KERAS_BACKEND"] = BACKEND
print(f"backend: {BACKEND} (TPU attached: {tpu_attached})")

# %% [markdown]
# ## Your images
# With `MOUNT_DRIVE`, Google Drive appears under `/content/drive`, and an empty `OUT`
# puts the run there, where it outlives the session; with `UPLOAD_ZIP`, the zip you pick
# is unpacked into `uploaded/` and used as `DATA`. Outside Colab both are skipped.

# %% tags=["colab-data"]
import shutil

DRIVE = "/content/drive"
if MOUNT_DRIVE and "google.colab" in sys.modules:
    from google.colab import drive

    drive.mount(DRIVE)
if not OUT:
    drive_mounted = os.path.isdir(os.path.join(DRIVE, "MyDrive"))
    OUT = (
        os.path.join(DRIVE, "MyDrive", "keras-tpugan", "own_images")
        if drive_mounted
        else "runs/own_images"
    )
if UPLOAD_ZIP and "google.colab" in sys.modules:
    from google.colab import files

    for name in files.upload():
        shutil.unpack_archive(name, "uploaded")
    DATA = "uploaded"
print(f"data: {DATA}; run folder: {OUT}")

# %% [markdown]
# ## A look at the data
# `load_images` reads the images once and keeps them as uint8 in memory (`memory_bytes`;
# with `STREAM`, 0: each batch's files are read as it is); each batch is scaled to
# [-1, 1] as it is read. These are the real images the GAN learns from.

# %%
import keras

import keras_tpugan as ktg

ds, info = ktg.data.load_images(
    DATA,
    image_size=IMAGE_SIZE,
    channels=CHANNELS,
    batch_size=BATCH_SIZE,
    stream=STREAM,
    return_info=True,
)
print({k: v for k, v in info.items() if k != "class_names"})
os.makedirs(OUT, exist_ok=True)
real = ds[0] if keras.backend.backend() == "jax" else next(iter(ds))
real = real[0] if isinstance(real, tuple) else real
ktg.images.save_grid(keras.ops.convert_to_numpy(real)[:64], f"{OUT}/real_images.png")

from IPython.display import Image, display  # noqa: E402

display(Image(filename=f"{OUT}/real_images.png"))

# %% [markdown]
# ## Train, or continue
# The `images` preset: the demo's recipe (batch-normalized generator, spectrally normalized
# discriminator, Adam with beta_1 = 0, EMA of the generator) at the learning rate chosen on
# RGB digits (1e-3), with the networks sized for `IMAGE_SIZE`, your data and sizes.
# `architecture="resnet"` in the `replace` below trains the ResNet networks instead. When
# `OUT` holds an unfinished run (its `backup/`), training continues from its last completed
# epoch; a finished run with fewer epochs than `EPOCHS` trains on from its last snapshot;
# one that has them all is left as it is (set another `OUT` for a new run).

# %%
import dataclasses  # noqa: E402

from keras_tpugan.runs.config import TrainConfig  # noqa: E402
from keras_tpugan.runs.run_folder import epochs_finished  # noqa: E402
from keras_tpugan.runs.train import train  # noqa: E402

config = dataclasses.replace(
    TrainConfig.preset("images"),
    dataset=DATA,
    source="auto",
    image_size=IMAGE_SIZE,
    channels=CHANNELS,
    epochs=EPOCHS,
    batch_size=BATCH_SIZE,
    width=WIDTH or None,
    precision=PRECISION,
    quality_every=QUALITY_EVERY,
    stream=STREAM,
)
finished = epochs_finished(OUT)
unfinished = os.path.isdir(os.path.join(OUT, "backup"))
if finished is not None and not unfinished and finished >= EPOCHS:
    print(
        f"the run in {OUT} has finished its {finished} epochs: raise EPOCHS to "
        "train it on, or set another OUT for a new run"
    )
else:
    resume = unfinished or finished is not None
    if unfinished:
        print("continuing the run in", OUT)
    elif resume:
        print(f"training the finished run in {OUT} on, to {EPOCHS} epochs")
    else:
        print("a new run in", OUT)
    summary = train(
        config,
        OUT,
        verbose=2,
        resume=resume,
        time_budget_seconds=TIME_BUDGET_MINUTES * 60 or None,
    )
    keys = ("image_shape", "precision", "images_per_sec", "resumed_at_epoch")
    print({k: summary[k] for k in keys})
    print("final:", summary["final"])
    if summary["quality_unavailable"]:  # no labels, and no FID weights found
        print("no quality figures:", summary["quality_unavailable"])

# %% [markdown]
# ## Samples and curves
# The last epoch's grid (the same latents every epoch) and the learning curves. The whole
# GAN is in `OUT/snapshots/`; `keras-tpugan sample --model OUT` draws from the latest.

# %%
grids = sorted(glob.glob(f"{OUT}/samples/epoch_*.png"))
display(Image(filename=grids[-1]))
display(Image(filename=f"{OUT}/loss_curves.png"))
