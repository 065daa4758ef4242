"""`TrainConfig`: every setting of a training run, validated, with presets."""

import dataclasses
import functools

from keras_tpugan import (
    large_batch,
)
from keras_tpugan.augment import DiffAugment
from keras_tpugan.data.image_source import ImageSource
from keras_tpugan.runs.config_checks import check_config
from keras_tpugan.runs.config_types import parse_value
from keras_tpugan.runs.presets import PRESETS


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """The settings of one training run (see `keras_tpugan.runs.train.train`).

    Frozen: derive variants with `dataclasses.replace` or `override`.
    Every setting is checked here, once, against the allowed values of the
    module that uses it (`data.SOURCES`, `models.NORMS`, `losses.LOSSES`,
    ...), so the code downstream trusts it.

    Example:

    >>> cfg = TrainConfig.preset("smoke").override(["epochs=2"])
    >>> cfg.epochs
    2
    """

    # Data: a TFDS name or a folder of images, with `source` "auto" |
    # "tfds" | "offline" (for names); the size to bring every image to (an
    # int: square; None: the data's own, required for folders), the
    # channels (1, 3; None: the data's), how another aspect ratio is
    # fitted ("crop", "pad", "squash") and a random left-right mirror;
    # `stream`: read a folder's files, or a TFDS split's, batch by batch
    # instead of holding the images in memory (for data larger than memory).
    dataset: str = "mnist"
    source: str = "auto"
    image_size: int | None = None
    channels: int | None = None
    resize: str = "crop"
    xflip: bool = False
    stream: bool = False
    # Train a class-conditional GAN on (images, labels).
    conditional: bool = False
    # The split trained on, or a slice of one as TFDS writes it
    # ("train[:10%]", "train[:1024]"; the offline subset takes them too).
    # Folders have no splits: "train" only.
    split: str = "train"
    # The dataset's held-out split, evaluated after every epoch (`val_*`
    # logs; None: no validation), a slice of one too. For the offline MNIST
    # subset "test" is its 1,000 held-out digits. Folders have no splits:
    # not validated.
    validation_split: str | None = "test"
    # Models: "dcgan" (`models.dcgan_*`) or "resnet" (`models.resnet_*`,
    # its discriminator always spectrally normalized: d_norm="spectral"),
    # latent size, filters of the widest layer (None: sized for the
    # resolution, `models.default_width`: 128 at 28x28, 256 at 32x32, 512
    # at 64x64), generator norm, discriminator norm ("none", "layer",
    # "batch", "spectral").
    architecture: str = "dcgan"
    latent_dim: int = 128
    width: int | None = None
    norm: str = "layer"
    d_norm: str = "none"
    # Dropout rate after each discriminator activation (0: none), with
    # masks keyed by seed, step and example (`KeyedDropout`).
    d_dropout: float = 0.0
    # Optimisation: GLOBAL batch (over all replicas), epochs, Adam settings.
    batch_size: int = 256
    epochs: int = 30
    learning_rate: float = 2e-4
    beta_1: float = 0.5
    beta_2: float = 0.999
    # The discriminator's own rate and betas (None: the generator's), for
    # the two time-scale update rule; scaled with the batch like those.
    d_learning_rate: float | None = None
    d_beta_1: float | None = None
    d_beta_2: float | None = None
    # Optimizer of both networks: "adam", "lars" (its rate multiplies the
    # layer-wise trust ratio: values near 1 are usual) or "lamb"; and epochs
    # of linear learning-rate warm-up.
    optimizer: str = "adam"
    warmup_epochs: int = 0
    # Scale learning_rate with batch_size: "none", "linear", "sqrt" or
    # "sqrt-adam" (also Adam's beta_2 and epsilon), from base_batch_size
    # (the batch size learning_rate is meant for).
    lr_scaling: str = "none"
    base_batch_size: int = 64
    # Adversarial loss, gradient penalty (None, "wgan-gp", "r1"), n_critic.
    loss: str = "non_saturating"
    gradient_penalty: str | None = None
    penalty_weight: float | None = None
    discriminator_steps: int = 1
    # "alternating" (D, then G on fresh latents) or "simultaneous" (both
    # from one generator forward: the TF DCGAN tutorial's step).
    update: str = "alternating"
    # Keep an exponential moving average of the generator (None: off):
    # a decay per step, or a half-life in images (the same span of images
    # at any batch size), shortened to ema_rampup x the images seen early on.
    ema_decay: float | None = None
    ema_halflife_images: int | None = None
    ema_rampup: float | None = 0.05
    # Differentiable augmentation of real and generated images ("none" or
    # comma-separated "translation", "cutout", "color"), the probability of
    # each, and ADA's adaptive probability aiming at a mean real-logit sign
    # of augment_target; empty pixels get augment_background.
    augment: str = "none"
    augment_probability: float = 1.0
    augment_adaptive: bool = False
    augment_target: float = 0.6
    augment_background: float = -1.0
    # Speed: dtype policy ("auto": mixed_bfloat16 on TPUs and on GPUs and
    # CPUs with native bfloat16, float32 elsewhere; `precision.resolve`),
    # XLA (True, False or "auto": as Keras's "auto", on with a GPU or TPU
    # and off on CPU-only machines on TensorFlow, off where synchronized
    # batch norm meets a multi-replica MirroredStrategy; on JAX on),
    # strategy kind ("auto", "tpu",
    # "gpu", "cpu"), how many of this machine's GPUs or CPU devices to train
    # on (None: all of them; not for TPUs or several processes), and
    # training steps per compiled call (Keras's `steps_per_execution`: fewer
    # host round trips for small batches; one device, TPUs and JAX only).
    precision: str = "auto"
    jit_compile: bool | str = "auto"
    strategy: str = "auto"
    num_replicas: int | None = None
    steps_per_execution: int = 1
    # The type the gradients cross the replicas in ("float32", or "bfloat16":
    # half the bytes; see `GAN.compile`).
    all_reduce_dtype: str = "float32"
    # Several processes (see `distribute.get_strategy`): the all-reduce
    # across them on TensorFlow ("auto", "ring", "nccl"), its packing in
    # bytes (0: TensorFlow decides) and time-out (None: none); how long a process
    # waits at start for the others, and how long one may go silent
    # before the others stop with an error naming it.
    collective: str = "auto"
    collective_bytes_per_pack: int = 0
    collective_timeout_seconds: float | None = None
    start_timeout_seconds: float = 300.0
    heartbeat_timeout_seconds: float = 30.0
    # Reproducibility: seeds the weights, the latents and the shuffling.
    seed: int = 0
    # Outputs: images per sample grid, and a grid every N epochs (or every N
    # images seen, mid-epoch too; None: by epochs); the whole GAN saved
    # (snapshots/gan_epoch_NNNN.keras) every N epochs and at the end (0: at
    # the end only).
    num_samples: int = 64
    sample_every: int = 1
    sample_every_images: int | None = None
    snapshot_every: int = 10
    # At most about this share of the training time drawing sample grids:
    # a scheduled grid is skipped when the training since the last one is
    # too short for its cost (None: every scheduled grid; the last epoch's
    # is always drawn).
    sample_max_share: float | None = 0.05
    # Side work on the clock and by images seen, not every epoch: the backup
    # that `--resume` continues from every N minutes of training, in the
    # middle of an epoch too (and when a run stops early; 0: at every epoch's
    # end), the held-out split validated after the first epoch and every N
    # images seen (rounded to whole epochs; None: every epoch), and the
    # curves' figures redrawn at most every N seconds (and at the end; 0:
    # every epoch).
    backup_minutes: float = 5.0
    validation_every_images: int | None = 20_000
    curves_every_seconds: float = 30.0
    # Quality metrics (FCD, classifier score, KID, precision, recall) every
    # N epochs (0: off), on this many generated images: MNIST against the
    # shipped classifier, other labelled data against one of its classes.
    quality_every: int = 5
    quality_images: int = 1000
    # "inception": FID (with KID, precision and recall) on the standard FID
    # network for any data, labelled or not ("auto": FID without labels).
    quality_features: str = "auto"
    # Or score every N images seen (the same points at any batch size);
    # with a target_fcd and no quality_every_images, every quality_every
    # epochs' worth of the dataset's images.
    quality_every_images: int | None = None
    # At most about this share of the time spent scoring: a scheduled score
    # is skipped when too little training came since the last one (None:
    # every scheduled score; off with a target_fcd, whose time to target
    # must not depend on the machine's speed).
    quality_max_share: float | None = 0.05
    # The FCD whose first reaching gives steps/images/seconds to target.
    target_fcd: float | None = None
    # The final FID (any data; `runs/final_fid.py`): on N generated and N
    # real images after the last epoch (0: off; None: 10,000 when they cost
    # at most quality_max_share of the training time, else skipped).
    fid_images: int | None = None

    def strategy_options(self):
        """The keyword arguments of `distribute.get_strategy` this config sets.

        Returns:
            A dict: `kind`, `num_replicas` and the collective and time-out
            settings.
        """
        return dict(
            kind=self.strategy,
            num_replicas=self.num_replicas,
            collective=self.collective,
            bytes_per_pack=self.collective_bytes_per_pack,
            collective_timeout_seconds=self.collective_timeout_seconds,
            start_timeout_seconds=self.start_timeout_seconds,
            heartbeat_timeout_seconds=self.heartbeat_timeout_seconds,
        )

    def __post_init__(self):
        check_config(self)

    def image_source(self, split=None, data=None):
        """The `ImageSource` of the run's images: what the data loader, the
        quality metrics and the studies read (checked where it is made: the
        config's own is made once, when the config is).

        Args:
            split: Another split than `split` (the validation split).
            data: Other data than `dataset` (arrays a notebook passes), read
                with the config's image options.

        Returns:
            A `keras_tpugan.data.ImageSource`.
        """
        if split is None and data is None:
            return self._image_source
        return self._image_source_of(self.split if split is None else split, data)

    @functools.cached_property
    def _image_source(self):
        return self._image_source_of(self.split, None)

    def _image_source_of(self, split, data):
        return ImageSource.of(
            self.dataset if data is None else data,
            split=split,
            source=self.source,
            image_size=self.image_size,
            channels=self.channels,
            resize=self.resize,
            stream=self.stream,
        )

    @classmethod
    def preset(cls, name, **changes):
        """Returns a preset by name, with `changes` applied as it is made.

        Args:
            name: `"demo"`, `"demo-conditional"`, `"images"` (your own
                images), `"smoke"` or `"mnist-tpu"`.
            **changes: Settings that replace the preset's (checked with
                the rest: a folder and the `image_size` it needs come
                together).

        Returns:
            A `TrainConfig`.

        Example:

        >>> TrainConfig.preset("smoke", epochs=2).epochs
        2
        """
        if name not in PRESETS:
            raise ValueError(
                f"Expected a preset in {sorted(PRESETS)}. Received: {name!r}."
            )
        return cls(**{**PRESETS[name], **changes})

    def override(self, assignments):
        """Returns a copy with `key=value` strings applied, type-checked.

        Args:
            assignments: Strings such as `"epochs=5"` or
                `"gradient_penalty=none"`.

        Returns:
            A new `TrainConfig`.
        """
        return dataclasses.replace(self, **self.parsed(assignments))

    @classmethod
    def parsed(cls, assignments):
        """The `key=value` strings as a dict of typed values, unapplied.

        Args:
            assignments: Strings such as `"epochs=5"`.

        Returns:
            A dict from setting names to values of the fields' types.
        """
        fields = {f.name: f for f in dataclasses.fields(cls)}
        changes = {}
        for item in assignments:
            key, sep, text = item.partition("=")
            key = key.strip()
            if not sep:
                raise ValueError(f"Expected key=value. Received: {item!r}.")
            if key not in fields:
                raise ValueError(
                    f"Unknown setting {key!r}. Valid settings: "
                    f"{', '.join(sorted(fields))}."
                )
            changes[key] = parse_value(text.strip(), fields[key].type, key)
        return changes

    def augmentation(self):
        """The `DiffAugment` the config describes (None for "none").

        Returns:
            A `keras_tpugan.DiffAugment` or None.
        """
        if self.augment == "none":
            return None
        return DiffAugment(
            policy=self.augment,
            probability=self.augment_probability,
            adaptive=self.augment_adaptive,
            target=self.augment_target,
            background=self.augment_background,
        )

    def scaled_adam_moments(self, network="g"):
        """`(beta_2, epsilon)` of a network's optimizer at `batch_size`.

        Scaled from `base_batch_size` under `lr_scaling="sqrt-adam"`,
        unchanged otherwise.

        Args:
            network: `"g"` or `"d"`.

        Returns:
            `(beta_2, epsilon)`.
        """
        beta_2 = self.beta_2
        if network == "d" and self.d_beta_2 is not None:
            beta_2 = self.d_beta_2
        return large_batch.scaled_adam_moments(
            beta_2, 1e-7, self.batch_size, self.base_batch_size, self.lr_scaling
        )

    @property
    def scaled_d_learning_rate(self):
        """`d_learning_rate` (or `learning_rate`), scaled like it."""
        rate = self.d_learning_rate or self.learning_rate
        return large_batch.scaled_learning_rate(
            rate, self.batch_size, self.base_batch_size, self.lr_scaling
        )

    @property
    def scaled_learning_rate(self):
        """`learning_rate` scaled from `base_batch_size` to `batch_size`."""
        return large_batch.scaled_learning_rate(
            self.learning_rate, self.batch_size, self.base_batch_size, self.lr_scaling
        )

    def to_dict(self):
        """Returns the settings as a JSON-ready dict."""
        return dataclasses.asdict(self)
