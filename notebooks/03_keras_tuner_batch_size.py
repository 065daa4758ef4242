# ---
# jupyter:
#   accelerator: TPU
#   colab:
#     provenance: []
#   jupytext:
#     formats: ipynb,py:percent
#     notebook_metadata_filter: accelerator,colab
#   kernelspec:
#     display_name: Python 3
#     name: python3
# ---

# %% [markdown]
# # Which batch size trains best? A keras-tuner search
#
# `keras_tpugan.studies.tuning.GANHyperModel` is a keras-tuner `HyperModel` over the global batch
# size and the learning rate. Every trial trains for the same number of IMAGES SEEN, so
# small and large batches compete fairly, and is scored by the Frechet classifier distance
# (FCD), the time to reach a target FCD, or the throughput.

# %% [markdown]
# ## Parameters

# %% tags=["parameters"]
BATCH_SIZES = [64, 128, 256, 512]  # @param {type:"raw"}
# Around the recipe's Adam rate (1e-3 at batch 64), scaled by LR_SCALING from there.
LEARNING_RATES = [5e-4, 1e-3]  # @param {type:"raw"}
LR_SCALING = "linear"  # @param ["none", "linear", "sqrt", "sqrt-adam"]
TUNER = "grid"  # @param ["grid", "random", "bayesian", "hyperband"]
OBJECTIVE = "fcd"  # @param ["fcd","fid","time_to_fcd","steps_to_fcd","images_per_sec"]
IMAGE_BUDGET = 120000  # @param {type:"integer"}
# "images": the recommended recipe (`GAN.from_preset`), on MNIST from TFDS (else the
# offline subset); "mnist-tpu": the reference study's DCGAN and Adam(2e-4, beta_1=0.5).
PRESET = "images"  # @param ["images", "demo", "mnist-tpu", "smoke"]
# Your own images in place of the preset's MNIST: a folder (one subfolder per class, for
# the FCD) or a TFDS name such as "cifar10", brought to IMAGE_SIZE x IMAGE_SIZE; "" keeps
# the preset's data. With DATA, PRESET "images" sizes the model for IMAGE_SIZE.
DATA = ""  # @param {type:"string"}
IMAGE_SIZE = 32  # @param {type:"integer"}
OUT = "runs/tune"  # @param {type:"string"}
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
# ## Search
# `search_batch_size` builds the keras-tuner tuner (the GAN is compiled by the hypermodel,
# inside the strategy's scope), runs every trial and writes the results table. Failed trials
# (out of memory, divergence) are recorded and the search goes on. On your own labelled
# images every trial is scored against a classifier of their classes, trained once before
# the first trial; without labels, `OBJECTIVE = "fid"` (the standard FID) or
# `"images_per_sec"`.

# %%
import dataclasses

from keras_tpugan.runs.config import TrainConfig
from keras_tpugan.studies.search import search_batch_size

config = TrainConfig.preset(PRESET)
if DATA:
    config = dataclasses.replace(
        config, dataset=DATA, source="auto", image_size=IMAGE_SIZE
    )
# The batch sizes and rates are searched; the rest is the preset's (the recipe's).
best, rows = search_batch_size(
    config,
    batch_sizes=BATCH_SIZES,
    learning_rates=LEARNING_RATES,
    tuner=TUNER,
    objective=OBJECTIVE,
    image_budget=IMAGE_BUDGET,
    lr_scaling=LR_SCALING,
    directory=OUT,
)

# %% [markdown]
# ## Results
# One row per trial, with the precision and seed it ran in; the learning rate shown is
# the scaled one the trial used.

# %%
from IPython.display import Image, Markdown, display

display(Markdown(open(f"{OUT}/results.md").read()))
display(Image(filename=f"{OUT}/quality_vs_time.png"))

# %% [markdown]
# ## The chosen setting
# The best trial by the objective; train with it for longer with
# `keras-tpugan train --set batch_size=... --set learning_rate=...`.

# %%
print(f"best by {OBJECTIVE}: {best}")
