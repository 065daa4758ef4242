# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#   kernelspec:
#     display_name: Python 3
#     name: python3
# ---

# %% [markdown]
# # Which batch size trains best? A keras-tuner search
#
# `keras_tpugan.tuning.GANHyperModel` is a keras-tuner `HyperModel` over the global batch
# size and the learning rate. Every trial trains for the same number of IMAGES SEEN, so
# small and large batches compete fairly, and is scored by the Frechet classifier distance
# (FCD), the time to reach a target FCD, or the throughput.

# %% [markdown]
# ## Parameters

# %% tags=["parameters"]
BATCH_SIZES = [64, 128, 256, 512]  # @param {type:"raw"}
LEARNING_RATES = [1e-4, 2e-4]  # @param {type:"raw"}
LR_SCALING = "linear"  # @param ["none", "linear", "sqrt"]
TUNER = "grid"  # @param ["grid", "random", "bayesian", "hyperband"]
OBJECTIVE = "fcd"  # @param ["fcd", "time_to_fcd", "images_per_sec"]
IMAGE_BUDGET = 120000  # @param {type:"integer"}
PRESET = "mnist-tpu"  # @param ["mnist-tpu", "demo", "smoke"]
OUT = "runs/tune"  # @param {type:"string"}
PACKAGE = ""  # @param {type:"string"}

# %% [markdown]
# ## Install (Colab only)

# %%
import subprocess
import sys

if "google.colab" in sys.modules and PACKAGE:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", PACKAGE], check=True)

# %% [markdown]
# ## Search
# `search_batch_size` builds the keras-tuner tuner (the GAN is compiled by the hypermodel,
# inside the strategy's scope), runs every trial and writes the results table. Failed trials
# (out of memory, divergence) are recorded and the search goes on.

# %%
from keras_tpugan.config import TrainConfig
from keras_tpugan.tuning import search_batch_size

config = TrainConfig.preset(PRESET)
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
