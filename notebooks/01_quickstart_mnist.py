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
# # keras-tpugan quickstart: an MNIST GAN in bfloat16 with XLA
#
# This notebook trains a DCGAN on MNIST with `keras_tpugan.GAN`, a `keras.Model` whose
# `train_step` makes the adversarial updates, so training is a plain `gan.fit(...)`.
# It runs on a Colab TPU, a GPU or a CPU: the same code, the same results per global batch.
# You will see sample grids and learning curves update while it learns, quality scores
# (FCD, classifier score, precision and recall) and the training speed.
#
# Other data works the same way: `DATASET = "cifar10"` with `IMAGE_SIZE = 32`,
# `DATASET = "celeb_a"` with `IMAGE_SIZE = 64` (centre-cropped to square), or the path of a
# folder of images (one subfolder per class for the quality scores) with the size you want.
# Other data gets the `"images"` recipe, whose networks are sized for the resolution (the
# reference DCGAN's plan: 256 filters at 32x32, 512 at 64x64). Notebook 04 is the longer
# walk through your own images.

# %% [markdown]
# ## Parameters
# The defaults are worth a run on a Colab TPU (about a minute per epoch on a CPU runtime).

# %% tags=["parameters"]
EPOCHS = 15  # @param {type:"integer"}
# The recipe's batch (its learning rate was chosen at 64).
BATCH_SIZE = 64  # @param {type:"integer"}
# Filters of the widest layer (0: the recipe's).
WIDTH = 0  # @param {type:"integer"}
# A TFDS name ("mnist", "cifar10", "celeb_a", ...) or a folder of images.
DATASET = "mnist"  # @param {type:"string"}
# Bring every image to IMAGE_SIZE x IMAGE_SIZE (0: the data's own size).
IMAGE_SIZE = 0  # @param {type:"integer"}
# "auto": mixed_bfloat16 where the hardware computes in bfloat16 (TPUs, recent GPUs),
# else float32.
PRECISION = "auto"  # @param ["auto", "mixed_bfloat16", "mixed_float16", "float32"]
# Score FCD, the classifier score, precision and recall every N epochs (0: off).
QUALITY_EVERY = 5  # @param {type:"integer"}
OUT = "runs/quickstart"  # @param {type:"string"}
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
# ## Runtime and precision
# On TensorFlow,
# `get_strategy("auto")` finds a TPU (TPUStrategy), else every GPU (MirroredStrategy), else
# the CPU; on JAX it returns a `keras.distribution.DataParallel` over every TPU core, GPU or
# CPU. Both are used as `with strategy.scope():`. The dtype policy must be set before the
# models are built.

# %%
import keras

import keras_tpugan as ktg

strategy = ktg.distribute.get_strategy("auto")
ktg.precision.configure(PRECISION, strategy)
print(
    f"{keras.backend.backend()}: {ktg.distribute.strategy_name(strategy)} with "
    f"{ktg.distribute.num_replicas(strategy)} replica(s), "
    f"policy {keras.mixed_precision.global_policy().name}"
)

# %% [markdown]
# ## Data
# MNIST from TFDS when it can be downloaded; otherwise the offline subset of 4,000 real
# digits, and `info["source"]` says which. Images come in [-1, 1], batched by the GLOBAL
# batch size with `drop_remainder=True`.

# %%
ds, info = ktg.data.load_images(
    DATASET, batch_size=BATCH_SIZE, image_size=IMAGE_SIZE or None, return_info=True
)
print(info)

# %% [markdown]
# ## The GAN
# Build and compile inside the strategy's scope. `GAN.from_preset` gives the recommended
# recipe, the one the command line's presets train: a batch-normalized generator, a
# spectrally normalized discriminator, Adam with `beta_1=0` (4e-3 for MNIST's `"demo"`,
# 1e-3 for other `"images"`) and a moving average of the generator, which the samples and
# scores use. XLA is on where there is a GPU or TPU.

# %%
with strategy.scope():
    gan = ktg.GAN.from_preset(
        "demo" if DATASET == "mnist" and not IMAGE_SIZE else "images",
        image_shape=info["image_shape"],
        width=WIDTH or None,
    )

# %% [markdown]
# ## Train and watch
# The grid (same latents every epoch) and the learning curves refresh in place below;
# the quality scores and images/s join the epoch logs.

# %%
speed = ktg.callbacks.Throughput(global_batch_size=BATCH_SIZE)
callbacks = [
    speed,
    ktg.callbacks.DivergenceGuard(),
    ktg.callbacks.SampleGrid(f"{OUT}/samples"),
    ktg.callbacks.LossCurves(OUT),
]
if QUALITY_EVERY > 0:
    # MNIST: the shipped digit classifier. Other labelled data (CIFAR-10, a
    # folder with a subfolder per class): a classifier of its classes, trained
    # once and cached.
    callbacks.append(
        ktg.callbacks.QualityMetrics.for_data(
            DATASET,
            image_size=IMAGE_SIZE or None,
            every_n_epochs=QUALITY_EVERY,
            num_images=500,
        )
    )
history = gan.fit(ds, epochs=EPOCHS, verbose=2, callbacks=callbacks)
print(f"{speed.mean_images_per_sec} images/s after the compiling epoch")

# %% [markdown]
# ## How good is it?
# FCD (lower is better) and classifier score (at most the number of classes: 10 for MNIST)
# of the generated images, next to the same scores for held-out real images: the floor a
# generator can reach. Precision is the share of generated images that fall among real
# ones, recall the share of real images the generated ones cover: a generator that
# collapses onto a few good images keeps its precision and loses its recall.

# %%
last = {k: v[-1] for k, v in history.history.items()}
if "fcd" in last:
    print(
        f"FCD {last['fcd']:.1f} (real floor {last['fcd_real_floor']:.1f}); "
        f"classifier score {last['classifier_score']:.2f} "
        f"(real {last['classifier_score_real']:.2f}); "
        f"precision {last['precision']:.2f}, recall {last['recall']:.2f}"
    )
else:
    print("quality scoring is off (QUALITY_EVERY = 0)")

# %% [markdown]
# ## Save and sample
# The GAN saves as one `.keras` file and loads with `safe_mode=True`; the same seed gives
# the same images.

# %%
gan.save(f"{OUT}/gan.keras")
loaded = keras.saving.load_model(f"{OUT}/gan.keras", safe_mode=True)
ktg.images.save_grid(loaded.generate(64, seed=1), f"{OUT}/final_grid.png", scale=2)

from IPython.display import Image, display  # noqa: E402

display(Image(filename=f"{OUT}/final_grid.png"))
