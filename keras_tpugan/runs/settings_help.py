"""One line of help for every `TrainConfig` setting.

What `keras-tpugan settings` lists, and the help of the everyday flags
(`--batch-size`, `--epochs`, ...). Kept apart from `config.py` so that the
command line reads it without importing Keras; a test checks that every
setting has its line.
"""

SETTINGS_HELP = {
    # Data.
    "dataset": "a TFDS name (mnist, cifar10, celeb_a, ...) or a folder of images",
    "source": "where a dataset name is read from: auto, tfds or offline (MNIST)",
    "image_size": "bring every image to NxN (none: the data's own; a folder needs it)",
    "channels": "1 (grey) or 3 (RGB); none: as the data",
    "resize": "how another aspect ratio is fitted: crop, pad or squash",
    "xflip": "mirror each image left-right at random, as StyleGAN's mirror option",
    "stream": "read the data batch by batch instead of holding it in memory",
    "conditional": "train a class-conditional GAN on (images, labels)",
    "split": "the split trained on, or a slice of one (train[:10%])",
    "validation_split": "the held-out split scored every epoch (none: no validation)",
    # Models.
    "architecture": "dcgan or resnet",
    "latent_dim": "size of the generator's latent vector",
    "width": "filters of the widest layer (none: sized for the resolution)",
    "norm": "the generator's normalization: layer, batch or none",
    "d_norm": "the discriminator's normalization: none, layer, batch or spectral",
    "d_dropout": "dropout rate after each discriminator activation (0: none)",
    # Optimisation.
    "batch_size": "the GLOBAL batch size, over all replicas",
    "epochs": "passes over the training data",
    "learning_rate": "the generator's learning rate (and the discriminator's)",
    "beta_1": "Adam's beta_1",
    "beta_2": "Adam's beta_2",
    "d_learning_rate": "the discriminator's own rate (none: learning_rate)",
    "d_beta_1": "the discriminator's own beta_1 (none: beta_1)",
    "d_beta_2": "the discriminator's own beta_2 (none: beta_2)",
    "optimizer": "adam, lars or lamb",
    "warmup_epochs": "epochs of linear learning-rate warm-up",
    "lr_scaling": "scale the rate with the batch: none, linear, sqrt or sqrt-adam",
    "base_batch_size": "the batch size learning_rate is meant for (lr_scaling)",
    "loss": "non_saturating, hinge, wasserstein or least_squares",
    "gradient_penalty": "none, wgan-gp or r1",
    "penalty_weight": "the penalty's weight (none: the penalty's usual one)",
    "discriminator_steps": "discriminator updates per generator update",
    "update": "alternating (D, then G) or simultaneous (both from one forward)",
    "ema_decay": "decay per step of the generator's moving average (none: off)",
    "ema_halflife_images": "the average's half-life in images seen (none: off)",
    "ema_rampup": "shorten the half-life to this fraction of the images seen early",
    "augment": "DiffAugment: none, or translation, cutout, color joined by commas",
    "augment_probability": "probability of each augmentation",
    "augment_adaptive": "adapt the probability as ADA does",
    "augment_target": "ADA's target for the mean sign of the real logits",
    "augment_background": "the value of pixels an augmentation empties",
    # Speed and distribution.
    "precision": "auto, mixed_bfloat16, mixed_float16 or float32",
    "jit_compile": "XLA: true, false or auto (on with a GPU or TPU)",
    "strategy": "auto, tpu, gpu or cpu",
    "num_replicas": "how many of this machine's devices to train on (none: all)",
    "steps_per_execution": "training steps per compiled call",
    "all_reduce_dtype": "the type gradients cross the replicas in: float32 or bfloat16",
    "collective": "the all-reduce across processes on TensorFlow: auto, ring, nccl",
    "collective_bytes_per_pack": "the all-reduce's packing in bytes (0: TF decides)",
    "collective_timeout_seconds": "the all-reduce's time-out (none: none)",
    "start_timeout_seconds": "how long a process waits at start for the others",
    "heartbeat_timeout_seconds": "seconds a process may be silent before others stop",
    # Reproducibility and outputs.
    "seed": "seeds the weights, the latents and the shuffling",
    "num_samples": "images per sample grid",
    "sample_every": "a sample grid every N epochs",
    "sample_every_images": "or a grid every N images seen (none: by epochs)",
    "snapshot_every": "save the whole GAN every N epochs and at the end (0: end only)",
    "sample_max_share": "skip a grid that would spend over this share of the time",
    "backup_minutes": "back up every N minutes, mid-epoch too (0: each epoch end)",
    "validation_every_images": "validate at epoch 1, each N images (none: every epoch)",
    "curves_every_seconds": "redraw the curves at most every N seconds (0: each epoch)",
    "quality_every": "quality figures (FCD, KID, ...) every N epochs (0: off)",
    "quality_images": "generated images each quality figure is computed on",
    "quality_features": "auto (a classifier where labels, else FID) or inception (FID)",
    "quality_every_images": "or score every N images seen (none: by epochs)",
    "quality_max_share": "skip a score that would spend over this share of the time",
    "target_fcd": "the FCD whose first reaching is timed (steps, images, seconds)",
    "fid_images": "final FID on N images a side (0: off; none: 10,000 if cheap)",
}

# The settings with a flag of their own: `(flag, setting, type)`. Train
# has them all; a study has those that are not what it varies.
EVERYDAY_FLAGS = (
    ("--batch-size", "batch_size", int),
    ("--epochs", "epochs", int),
    ("--learning-rate", "learning_rate", float),
    ("--seed", "seed", int),
    ("--precision", "precision", str),
    ("--fid-images", "fid_images", int),
)
