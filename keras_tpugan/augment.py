"""`DiffAugment`: differentiable augmentation of real and generated images."""

import keras
from keras import ops

POLICIES = ("translation", "cutout", "color")

# Random numbers each image needs, in this order: one "apply" draw per
# policy, then translation (2), cutout centre (2) and colour (3).
_APPLY = {"translation": 0, "cutout": 1, "color": 2}
_TRANSLATION, _CUTOUT, _COLOR = slice(3, 5), slice(5, 7), slice(7, 10)
NOISE_SIZE = 10


@keras.saving.register_keras_serializable(package="keras_tpugan")
class DiffAugment:
    """Differentiable augmentation (DiffAugment, Zhao et al., 2020).

    The discriminator sees real and generated images through the same
    random, differentiable transformations, in its own update and in the
    generator's (gradients flow through them to the generator). It keeps a
    discriminator from memorizing a small training set: the regime of the
    offline 4,000-digit MNIST subset. With `adaptive=True` the probability
    of applying each transformation is tuned during training as in ADA
    (Karras et al., 2020): it rises while the discriminator is too sure of
    the real images (the mean sign of its real logits above `target`) and
    falls otherwise.

    The transformations take their random numbers as an input (`noise`),
    which `keras_tpugan.GAN` draws from its seed and step like the
    latents, so augmented training is the same on any number of replicas
    and exact on resume. Empty pixels are filled with `background` (the
    value of the data's background in [-1, 1]), not with 0, which would
    paint gray borders no real image has.

    Args:
        policy: Comma-separated transformations: `"translation"` (shift by
            up to `translation` of the side, per image), `"cutout"` (blank a
            square of `cutout` of the side at a random place), `"color"`
            (brightness, saturation and contrast; RGB images only).
        probability: The probability of applying each transformation to an
            image (the starting value with `adaptive=True`).
        adaptive: Tune the probability from the real logits (ADA).
        target: ADA's target for the mean sign of the real logits.
        adjustment_images: With `adaptive`, images over which the
            probability can move from 0 to 1 (ADA uses 500,000; a smaller
            value adapts sooner on small datasets).
        background: The fill value of empty pixels (-1: black, MNIST's).
        translation: Largest shift, as a fraction of the side.
        cutout: Side of the cut-out square, as a fraction of the side.

    Example:

    ```python
    gan = ktg.GAN(
        generator, discriminator, latent_dim=128,
        augment=ktg.DiffAugment("translation,cutout", adaptive=True),
    )
    ```
    """

    def __init__(
        self,
        policy="translation,cutout",
        probability=1.0,
        adaptive=False,
        target=0.6,
        adjustment_images=100_000,
        background=-1.0,
        translation=0.125,
        cutout=0.5,
    ):
        self.policies = parse_policy(policy)
        self.policy = ",".join(self.policies)
        for name, value, low, high in (
            ("probability", probability, 0.0, 1.0),
            ("target", target, 0.0, 1.0),
            ("background", background, -1.0, 1.0),
            ("translation", translation, 0.0, 0.5),
            ("cutout", cutout, 0.0, 1.0),
        ):
            if isinstance(value, bool) or not low <= float(value) <= high:
                raise ValueError(
                    f"Expected augmentation {name} in [{low}, {high}]. "
                    f"Received: {name}={value!r}."
                )
        if float(adjustment_images) <= 0:
            raise ValueError(
                "Expected adjustment_images > 0 (the images over which the "
                "adaptive probability can go from 0 to 1). Received: "
                f"adjustment_images={adjustment_images!r}."
            )
        self.probability = float(probability)
        self.adaptive = bool(adaptive)
        self.target = float(target)
        self.adjustment_images = float(adjustment_images)
        self.background = float(background)
        self.translation = float(translation)
        self.cutout = float(cutout)

    def check_images(self, image_shape):
        """Refuses image shapes this policy cannot augment.

        Args:
            image_shape: `(height, width, channels)`.
        """
        if "color" in self.policies and image_shape[-1] != 3:
            raise ValueError(
                "Expected RGB images (3 channels) for the 'color' augmentation. "
                f"Received: images of shape {tuple(image_shape)}. Drop 'color' "
                "from the policy (translation and cutout work on any images)."
            )

    def __call__(self, images, noise, probability):
        """Augments a batch.

        Args:
            images: Float images `(batch, height, width, channels)`.
            noise: Uniform [0, 1) numbers `(batch, NOISE_SIZE)`.
            probability: Scalar probability of applying each policy.

        Returns:
            The augmented images, differentiable in `images`.
        """
        noise = ops.cast(noise, images.dtype)
        probability = ops.cast(probability, images.dtype)
        applied = ops.cast(noise[:, :3] < probability, images.dtype)
        if "translation" in self.policies:
            images = self._translate(images, noise[:, _TRANSLATION], applied[:, 0])
        if "cutout" in self.policies:
            images = self._cut_out(images, noise[:, _CUTOUT], applied[:, 1])
        if "color" in self.policies:
            images = self._color(images, noise[:, _COLOR], applied[:, 2])
        return images

    def _translate(self, images, noise, applied):
        # A shift per image as two 0/1 shift matrices (rows, columns): a
        # batched matmul, differentiable and free of gathers.
        height, width = images.shape[1], images.shape[2]
        shifts = []
        for axis, side in ((0, height), (1, width)):
            reach = int(side * self.translation + 0.5)
            shift = ops.floor(noise[:, axis] * (2 * reach + 1)) - reach
            shifts.append(shift * applied)
        rows = _shift_matrices(height, shifts[0], images.dtype)
        cols = _shift_matrices(width, shifts[1], images.dtype)
        moved = ops.einsum("bij,bjkc->bikc", rows, images)
        moved = ops.einsum("bkl,bilc->bikc", cols, moved)
        # Pixels that came from outside the image: the background.
        inside = ops.einsum("bi,bk->bik", ops.sum(rows, 2), ops.sum(cols, 2))
        inside = ops.expand_dims(inside, -1)
        return moved + (1.0 - inside) * self.background

    def _cut_out(self, images, noise, applied):
        height, width = images.shape[1], images.shape[2]
        masks = []
        for axis, side in ((0, height), (1, width)):
            size = int(side * self.cutout + 0.5)
            start = ops.floor(noise[:, axis] * (side + 1 - size % 2)) - size // 2
            index = ops.arange(side, dtype=images.dtype)[None, :]
            masks.append(
                ops.cast(
                    ops.logical_and(
                        index >= start[:, None], index < start[:, None] + size
                    ),
                    images.dtype,
                )
            )
        cut = ops.einsum("bi,bk->bik", masks[0], masks[1]) * applied[:, None, None]
        cut = ops.expand_dims(cut, -1)
        return images * (1.0 - cut) + cut * self.background

    def _color(self, images, noise, applied):
        keep = ops.reshape(applied, (-1, 1, 1, 1))

        def draw(i):
            return ops.reshape(noise[:, i], (-1, 1, 1, 1))

        def blend(augmented, original):
            return keep * augmented + (1.0 - keep) * original

        x = images
        x = blend(x + (draw(0) - 0.5), x)  # brightness
        mean = ops.mean(x, axis=3, keepdims=True)
        x = blend((x - mean) * (draw(1) * 2.0) + mean, x)  # saturation
        mean = ops.mean(x, axis=(1, 2, 3), keepdims=True)
        return blend((x - mean) * (draw(2) + 0.5) + mean, x)  # contrast

    def next_probability(self, probability, real_sign, global_batch):
        """ADA's update: the probability after one step.

        Args:
            probability: The current probability.
            real_sign: Mean sign of the discriminator's real logits over
                the global batch.
            global_batch: Images in the step.

        Returns:
            The new probability, in [0, 1].
        """
        step = ops.sign(real_sign - self.target) * global_batch / self.adjustment_images
        return ops.clip(probability + step, 0.0, 1.0)

    def get_config(self):
        return {
            "policy": self.policy,
            "probability": self.probability,
            "adaptive": self.adaptive,
            "target": self.target,
            "adjustment_images": self.adjustment_images,
            "background": self.background,
            "translation": self.translation,
            "cutout": self.cutout,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def parse_policy(policy):
    """The policies named in `policy` (a comma-separated string or a list).

    Returns:
        A tuple of policy names, in the order they are applied.
    """
    names = policy.split(",") if isinstance(policy, str) else list(policy)
    names = [n.strip() for n in names if n.strip()]
    unknown = [n for n in names if n not in POLICIES]
    if unknown or not names:
        raise ValueError(
            f"Expected an augmentation policy made of {POLICIES}, comma-"
            f"separated. Received: policy={policy!r}. For example "
            "'translation,cutout'."
        )
    return tuple(sorted(set(names), key=POLICIES.index))


def _shift_matrices(side, shift, dtype):
    # matrix[b, i, j] = 1 where output index i takes input index j = i - shift.
    index = ops.arange(side, dtype=dtype)
    target = index[None, :, None] - shift[:, None, None]
    return ops.cast(ops.equal(index[None, None, :], target), dtype)
