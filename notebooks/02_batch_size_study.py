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
# # The batch-size study: 64 to 512
#
# The reference study trained an MNIST GAN on a TPU v3-8 in bfloat16 with XLA at global
# batch sizes 64, 128, 256 and 512 for 30 epochs, and cut the training time by 79% from
# 64 to 512. This notebook reruns it with `keras_tpugan.studies.sweep.run_sweep`: one training run
# per batch size, same seed and data, then the table and the plots.

# %% [markdown]
# ## Parameters
# The defaults reproduce the study on a Colab TPU (`mnist-tpu`: full MNIST, width 128).
# `LR_SCALING` scales the learning rate with the batch size ("linear" or "sqrt").

# %% tags=["parameters"]
BATCH_SIZES = [64, 128, 256, 512]  # @param {type:"raw"}
EPOCHS = 30  # @param {type:"integer"}
PRESET = "mnist-tpu"  # @param ["mnist-tpu", "demo", "smoke"]
LR_SCALING = "none"  # @param ["none", "linear", "sqrt", "sqrt-adam"]
OPTIMIZER = "adam"  # @param ["adam", "lars", "lamb"]
OUT = "runs/batch_size_study"  # @param {type:"string"}
OVERRIDES = []  # @param {type:"raw"}
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
# ## Run the sweep
# Each run writes its own directory (`batch_0064/`, ...) with grids, curves and the
# generator; a progress bar follows the whole sweep. A batch size that fails (out of
# memory, for instance) is recorded and the others still run.

# %%
import dataclasses

from keras_tpugan.runs.config import TrainConfig
from keras_tpugan.studies.sweep import run_sweep

config = TrainConfig.preset(PRESET).override(OVERRIDES)
config = dataclasses.replace(
    config, epochs=EPOCHS, lr_scaling=LR_SCALING, optimizer=OPTIMIZER
)
rows = run_sweep(config, BATCH_SIZES, OUT)

# %% [markdown]
# ## The table
# Mean epoch time excludes the first (compiling) epoch; "time vs smallest" compares the
# total training time with the smallest batch size's.

# %%
from IPython.display import Image, Markdown, display

display(Markdown(open(f"{OUT}/results.md").read()))

# %% [markdown]
# ## The plots
# Learning curves per epoch and per image seen, time per epoch against the batch size, and
# quality (FCD) against wall time.

# %%
for name in ("learning_curves", "epoch_time", "quality_vs_time"):
    display(Image(filename=f"{OUT}/{name}.png"))

# %% [markdown]
# ## Reading it
# Larger batches take fewer, larger steps: the time per epoch falls as long as the device
# has parallel work left, which is what the study's 79% came from on a TPU. Per image seen,
# the curves show whether a larger batch learns as much from the same data: without
# learning-rate scaling it usually learns less per epoch, which is what `LR_SCALING`,
# warm-up and LARS/LAMB are for. Compare the FCD at the end, not only the time.

# %%
ok = [r for r in rows if r["status"] == "ok"]
fastest = min(ok, key=lambda r: r["total_seconds"])
best = min(ok, key=lambda r: r["fcd"])
print(
    f"fastest: batch {fastest['batch_size']} ({fastest['total_seconds']:.0f} s); "
    f"best FCD: batch {best['batch_size']} ({best['fcd']:.1f})"
)
