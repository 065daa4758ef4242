"""`QualityMetrics`: FCD or FID, classifier score, KID, precision, recall.

At about 560 lines it is over the package's 400: most of it is the class's
documentation and its one schedule (epochs, or images seen through
`image_schedule`); the reference images and their classifier (what
`for_data` scores against) are in `quality_reference`, the clock in
`training_clock`, the share of the time scoring in `scoring_share`.
"""

import time

import keras

from keras_tpugan import data as data_lib
from keras_tpugan import distribute, metrics
from keras_tpugan.callbacks.gan_callback import GANCallback
from keras_tpugan.callbacks.image_schedule import ImageSchedule
from keras_tpugan.callbacks.quality_reference import (
    fid_reference_features,
    reference_arguments,
    uses_mnist_classifier,
)
from keras_tpugan.callbacks.scoring_share import ScoringShare
from keras_tpugan.callbacks.training_clock import TrainingClock

NAMES = {
    "classifier": (
        "fcd",
        "classifier_score",
        "kid",
        "precision",
        "recall",
        "fcd_real_floor",
        "classifier_score_real",
    ),
    "inception": ("fid", "kid", "precision", "recall", "fid_real_floor"),
}


# What an unscored epoch logs: the worst value of each score.
UNSCORED = {
    "fcd": float("inf"),
    "fid": float("inf"),
    "kid": float("inf"),
    "classifier_score": float("-inf"),
    "precision": float("-inf"),
    "recall": float("-inf"),
}


class QualityMetrics(GANCallback):
    """Scores generated images every few epochs and logs the scores.

    With `features="classifier"` (MNIST-like 28x28x1 images) it uses the
    package's MNIST classifier (`metrics.mnist_classifier`: the shipped
    one, or the one rebuilt in `classifier_dir`) to compare `num_images`
    generated images with the real training digits:

    - `fcd`: Frechet classifier distance (lower is better);
    - `classifier_score`: Inception-score recipe (10 is the ceiling);
    - `kid`: kernel distance (lower is better);
    - `precision` and `recall` (Kynkaanniemi et al., 2019, on the same
      features): the fraction of generated images that fall among the real
      ones, and of real images that the generated ones cover (higher is
      better; a collapsed generator keeps its precision and loses recall);
    - `fcd_real_floor` and `classifier_score_real`: the same measured on
      held-out real digits, the best a generator can hope for.

    With a `classifier` (from `metrics.data_classifier`: the same network
    trained on the run's own labelled images, any size and channels) it
    logs the same figures against it, the classifier score's ceiling
    being the number of classes; pass `real_images` and `held_out_images`.

    With `features="inception"` (any images, RGB or grey, labelled or not;
    pass `real_images`, and `held_out_images` for the floor) it logs `fid`,
    `kid`, `precision`, `recall` and `fid_real_floor` on the pool features
    of the standard FID network (`metrics.FIDInception`: the 2015-12-05
    Inception graph that published FIDs use, its weights found as
    `metrics.fid_weights_path` says), so `fid` compares with published
    figures measured the same way (50,000 images against the training set).

    The values join the epoch logs (so History, CSV files, TensorBoard,
    `EarlyStopping`, `ModelCheckpoint(save_best_only=True)` and keras-tuner
    can use them). An epoch that is not scored logs the worst value each
    score can take, which no "best" logic picks: `fcd`, `fid` and `kid`
    `inf`, `classifier_score`, `precision` and `recall` `-inf` (the
    real-data floors are logged every epoch); `GAN.fit`'s progress bar does
    not print those. Those callbacks need no
    `mode`: the GAN declares `fcd`, `fid` and `kid` lower-is-better and the
    others higher-is-better.
    `GAN.fit` runs this callback before the user's callbacks, whatever the
    order of the list, so they all see the scores of the epoch.

    With `every_n_images` it scores on a schedule in images seen instead
    (after the step at which each multiple of `every_n_images` is reached,
    mid-epoch if need be), so runs with different batch sizes are scored
    after the same numbers of images; an epoch logs its last score, and
    the last epoch is scored at its end if it had none. Either
    way every score is kept in `records` with the step, the images seen and
    the training seconds so far (the time spent scoring and validating left
    out), and `first_reaching(target_fcd)` gives the first that reached a
    target: the time to quality.

    Args:
        every_n_epochs: Score after every `every_n_epochs` epochs (and after
            the last one).
        num_images: Generated images per score.
        real_images: Real images in [-1, 1] to compare with (default: the
            offline subset's 4,000 train digits).
        held_out_images: Held-out real images for the floor (default: the
            offline subset's 1,000 test digits).
        seed: Seed of the generated images' latents.
        classifier_dir: Cache folder of a rebuilt classifier (the shipped
            one is used when it holds none).
        features: `"classifier"` (a classifier's features: MNIST's, or
            `classifier`'s) or `"inception"` (the standard FID network: see
            above).
        classifier: A model from images in [-1, 1] to `[features,
            probabilities]` (or the `(model, record)` pair
            `metrics.data_classifier` returns), in place of the MNIST
            classifier.
        inception_weights: The FID network's weights file for
            `features="inception"` (None: looked for as
            `metrics.fid_weights_path` does).
        every_n_images: Score every this many images seen, instead of
            every `every_n_epochs` epochs.
        global_batch_size: Images per step over all replicas (required
            with `every_n_images`; otherwise it adds the images seen to
            `records`).
        max_share: At most about this share of the time to spend scoring
            (`ScoringShare`; None: every scheduled score). The last epoch
            is always scored. With the FID network the first scheduled
            score is judged too, by a lower bound on its cost timed on one
            batch (`first_score_bound`, in seconds). Leave it None to
            compare times to a target across runs: which points are skipped
            depends on the machine.

    Example:

    ```python
    quality = ktg.callbacks.QualityMetrics(every_n_epochs=5)
    history = gan.fit(ds, epochs=30, callbacks=[quality])
    history.history["fcd"][-1]
    ```
    """

    log_order = 1  # after Throughput, before the user's callbacks

    def __init__(
        self,
        every_n_epochs=1,
        num_images=1000,
        real_images=None,
        held_out_images=None,
        seed=0,
        classifier_dir=None,
        features="classifier",
        inception_weights=None,
        every_n_images=None,
        global_batch_size=None,
        classifier=None,
        max_share=None,
    ):
        super().__init__(None)
        self.max_share = max_share
        self._share = ScoringShare(max_share)  # checks it
        if isinstance(classifier, tuple):
            classifier = classifier[0]
        if classifier is not None and (
            features != "classifier" or real_images is None or held_out_images is None
        ):
            raise ValueError(
                "Expected real_images and held_out_images (in [-1, 1]) with a "
                "classifier, and features='classifier'. Received: "
                f"real_images={'None' if real_images is None else 'given'}, "
                f"held_out_images={'None' if held_out_images is None else 'given'}"
                f", features={features!r}."
            )
        self.own_classifier = classifier
        self._schedule = None
        if every_n_images is not None:
            self._schedule = ImageSchedule(every_n_images, global_batch_size)
        self.every_n_images = every_n_images
        self.global_batch_size = global_batch_size
        self.records = []
        if every_n_images is None:
            # Keras dispatches steps asynchronously only while no callback
            # has a batch hook; scoring per epoch needs none.
            self.on_train_batch_end = super().on_train_batch_end
        if features not in NAMES:
            raise ValueError(
                f"Expected features in {tuple(NAMES)}. Received: features={features!r}."
            )
        if features == "inception" and real_images is None:
            raise ValueError(
                "Expected `real_images` (in [-1, 1]) with features='inception'. "
                "Received: real_images=None."
            )
        if every_n_epochs < 1 or num_images < 4:
            raise ValueError(
                "Expected every_n_epochs >= 1 and num_images >= 4 (recall needs "
                "each generated image's third nearest neighbour among them). "
                f"Received: every_n_epochs={every_n_epochs}, num_images={num_images}."
            )
        self.every_n_epochs = every_n_epochs
        self.num_images = num_images
        self.real_images = real_images
        self.held_out_images = held_out_images
        self.seed = seed
        self.classifier_dir = classifier_dir
        self.features = features
        self.inception_weights = inception_weights
        self._fid_network = None
        self.real_features = None
        self._kid_reference = (None, None, None)  # features, size, their terms
        # The bound that judged the first scheduled FID score (seconds).
        self.first_score_bound = None

    @classmethod
    def for_data(
        cls,
        data="mnist",
        seed=0,
        max_images=50_000,
        on_unlabelled="raise",
        **kwargs,
    ):
        """`QualityMetrics` for a dataset: MNIST's classifier, or one of its classes.

        For MNIST at 28x28x1 it is the default `QualityMetrics` (the shipped
        classifier and the offline digits). With `features="inception"`, or
        for unlabelled data with `on_unlabelled="fid"`, it scores FID on the
        standard network against the images read (a tenth held out for the
        floor), whatever their labels. For any other labelled data
        (a TFDS name, a folder with one subfolder per class, `(images,
        labels)` arrays) it reads the images as `data.load_images` does,
        trains `metrics.data_classifier` on their classes (cached: the runs
        of one dataset share it) and scores against up to 10,000 of the
        images, the floor against the tenth the classifier held out. The
        classifier's record is in `classifier_record` (`None` for MNIST).
        At most `max_images` images are read into memory for it: a subset
        drawn from `seed` (a streamed folder decodes only those; a streamed
        TFDS split reads its first ones, which TFDS stored shuffled).

        Args:
            data: A `data.ImageSource`, or the data as for
                `data.load_images` (the same images the GAN trains on). A
                streamed source is larger than memory: only the subset is
                read.
            seed: Seed of the classifier's split and training, of the
                subset read, and of the generated images' latents.
            max_images: The most images read to train the classifier and
                score against.
            on_unlabelled: What to do with data that has no labels, or one
                class: `"raise"` a `ValueError`, return `"none"` (for a
                caller that trains without figures then), or score `"fid"`
                (`features="inception"`: the standard FID network, against
                the subset read, a tenth held out for the floor).
            **kwargs: With raw data, `data.load_images`' image options
                (`source`, `image_size`, `channels`, `resize`, `stream`,
                ...: `data.ImageSource.options()`); the rest are
                `QualityMetrics` arguments (`every_n_epochs`, `num_images`,
                ...).

        Returns:
            A `QualityMetrics`, or None for unlabelled data with
            `on_unlabelled="none"`.

        Raises:
            ValueError: With `on_unlabelled="raise"`, the data has no labels
                (a flat folder, a TFDS dataset without a label feature), or
                one class only: FCD, the classifier score and KID need a
                classifier of its classes.

        Example:

        ```python
        quality = ktg.callbacks.QualityMetrics.for_data(
            "cifar10", image_size=32, every_n_epochs=5, num_images=500
        )
        gan.fit(ds, epochs=30, callbacks=[quality])
        ```
        """
        if on_unlabelled not in ("raise", "none", "fid"):
            raise ValueError(
                "Expected on_unlabelled to be 'raise', 'none' or 'fid'. Received: "
                f"on_unlabelled={on_unlabelled!r}."
            )
        image_options = {
            k: kwargs.pop(k)
            for k in list(kwargs)
            if k in data_lib.ImageSource.options()
        }
        reference = reference_arguments(
            data_lib.ImageSource.of(data, **image_options),
            seed=seed,
            max_images=max_images,
            fid=kwargs.get("features") == "inception",
            on_unlabelled=on_unlabelled,
        )
        if reference is None:
            return None
        arguments, record = reference
        quality = cls(seed=seed, **{**kwargs, **arguments})
        quality.classifier_record = record
        return quality

    @staticmethod
    def uses_mnist_classifier(data, image_size=None, channels=None):
        """Whether `for_data` scores this data with the shipped MNIST classifier.

        Args:
            data: A `data.ImageSource`, or the data with `image_size` and
                `channels` as for `for_data`.
            image_size: As for `for_data` (with raw data).
            channels: As for `for_data` (with raw data).

        Returns:
            True for MNIST read at 28x28x1 (its own size and channels).
        """
        return uses_mnist_classifier(data, image_size, channels)

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        # Steps before this fit (a resumed run continues its schedule).
        self._steps = int(keras.ops.convert_to_numpy(self.model.step_counter))
        self._latest = None
        self._share = ScoringShare(self.max_share)
        self.first_score_bound = None
        if self._schedule is not None:
            self._schedule.start(self._steps)
        shape = tuple(self.model.generator.output_shape[1:])
        if self.own_classifier is not None:
            expected = tuple(self.own_classifier.inputs[0].shape[1:])
            if shape != expected:
                raise ValueError(
                    f"Expected a generator of the classifier's {expected} images. "
                    f"Received: a generator of {shape} images."
                )
        elif self.features == "classifier" and shape != (28, 28, 1):
            raise ValueError(
                "QualityMetrics scores 28x28x1 digits with its MNIST classifier. "
                f"Received: a generator of {shape} images. For other images pass "
                "features='inception' and real_images."
            )
        self._prepare_reference()
        self._kid_reference_terms(self.num_images)
        # Training time counts from here: the real side's features (a minute
        # through the FID network on a CPU) and KID terms are not training.
        self._clock = TrainingClock()

    def _prepare_reference(self):
        """The real images' features and the floor, once."""
        if self.real_features is not None:
            return
        if self.features == "inception":
            self.fid_reference()
            return
        if self.own_classifier is not None:
            self.classifier, self.record = self.own_classifier, None
        else:
            self.classifier, self.record = metrics.mnist_classifier(self.classifier_dir)
        real, held_out = self.real_images, self.held_out_images
        if real is None and held_out is None:  # the same for every run
            self.real_features, self.floor = metrics.offline_mnist_reference(
                self.classifier, self.classifier_dir
            )
            return
        if real is None:
            real = data_lib.to_unit(data_lib.offline_mnist("train")[0])
        if held_out is None:
            held_out = data_lib.to_unit(data_lib.offline_mnist("test")[0])
        self.real_features, _ = self._extract(real)
        held_features, held_probs = self._extract(held_out)
        self.floor = {
            "fcd_real_floor": metrics.frechet_distance(
                self.real_features, held_features
            ),
            "classifier_score_real": metrics.classifier_score(held_probs),
        }

    def fid_reference(self):
        """Computes the real images' FID features and the floor, once (and
        reads them from the cache when a run on the same images has:
        `quality_reference.fid_reference_features`).

        `on_train_begin` calls it; a caller that scores several runs
        against the same images (a search's trials) can call it once and
        give each run's `QualityMetrics` the same `real_features` and
        `floor`.

        Returns:
            `(real_features, floor)`: the features of `real_images` and the
            dict `{"fid_real_floor": FID of held_out_images}` (NaN without
            them).
        """
        if self.real_features is None:
            self.real_features, self.floor = fid_reference_features(
                self.fid_network(), self.real_images, self.held_out_images
            )
        return self.real_features, self.floor

    def fid_network(self):
        """The standard FID network it scores with, built on first use."""
        if self._fid_network is None:
            self._fid_network = metrics.FIDInception(self.inception_weights)
        return self._fid_network

    def _kid_reference_terms(self, num_generated):
        """The real side's KID terms, computed as training begins and kept
        while the real features and the number scored stay the same."""
        real, size, terms = self._kid_reference
        if real is not self.real_features or size != num_generated:
            terms = metrics.kernel_reference_terms(self.real_features, num_generated)
            self._kid_reference = (self.real_features, num_generated, terms)
        return terms

    def _extract(self, images):
        if self.features == "inception":
            return self.fid_network().features(images), None
        return metrics.classifier_outputs(self.classifier, images)

    def on_epoch_begin(self, epoch, logs=None):
        if self._schedule is not None:
            self._schedule.epoch_begin()

    def on_train_batch_end(self, batch, logs=None):  # with every_n_images only
        due = self._schedule.batch_end(batch)
        self._steps = self._schedule.steps
        if due and self._within_share():
            self._latest = self._score_and_record()

    def on_test_begin(self, logs=None):
        self._clock.pause()

    def on_test_end(self, logs=None):
        self._clock.resume()

    def on_epoch_end(self, epoch, logs=None):
        last = epoch + 1 == self.params.get("epochs")
        if self.every_n_images:
            scores, self._latest = self._latest, None
            if scores is None and last:  # the end of training, off schedule
                scores = self._score_and_record()
        elif self.due(epoch, self.every_n_epochs) and (last or self._within_share()):
            scores = self._score_and_record()
        else:
            scores = None
        if logs is None:
            return
        if scores is not None:
            logs.update(scores)
            return
        # Unscored: the worst value each score can take, never a "best".
        # (NaN was taken as the best by EarlyStopping; a missing key makes
        # ModelCheckpoint(save_best_only=True) save the unscored epoch.)
        logs.update(
            {name: UNSCORED[name] for name in NAMES[self.features] if name in UNSCORED}
        )
        logs.update(self.floor)

    @property
    def skipped(self):
        """Scheduled scores skipped to keep within `max_share`."""
        return self._share.skipped

    def _within_share(self):
        if (
            self.max_share is not None
            and self.features == "inception"
            and not self._share.knows_cost
        ):
            # The FID network's score can cost more than the share allows
            # for a long time (tens of seconds on a CPU): the first one too
            # is judged, by a bound timed off the clock.
            self._clock.pause()
            self.first_score_bound = self._fid_score_bound()
            self._clock.resume()
            self._share.expected(self.first_score_bound)
        strategy = getattr(self.model, "distribute_strategy", None)
        return self._share.allows(self._clock.seconds(), strategy)

    def _fid_score_bound(self):
        """A lower bound on a score's seconds with the FID network.

        A batch of generated images is timed through the network (after a
        first one, which may trace it), once for each full batch a score
        holds; the generation, the rest of the last batch and the distances
        are not counted.
        """
        network = self.fid_network()
        batch = min(network.batch_size, self.num_images)
        images = self.model.generate(2 * batch, seed=self.seed)
        network.features(images[:batch])
        started = time.perf_counter()
        network.features(images[batch:])
        return (time.perf_counter() - started) * (self.num_images // batch)

    def _score_and_record(self):
        if not self.every_n_images:  # no batch hook counts the steps
            self._steps = int(keras.ops.convert_to_numpy(self.model.step_counter))
        scores = self._share.timed(self.score, self._clock)
        images = None
        if self.global_batch_size:
            images = self._steps * self.global_batch_size
        self.records.append(
            {
                "step": self._steps,
                "images": images,
                "seconds": self._clock.seconds(),
                **scores,
            }
        )
        return scores

    def first_reaching(self, target_fcd):
        """The first record whose FCD (or FID) is at most `target_fcd`.

        Args:
            target_fcd: The target.

        Returns:
            A dict with `step`, `images`, `seconds` and the scores, or None
            when no score reached it.
        """
        name = "fid" if self.features == "inception" else "fcd"
        for record in self.records:
            if record[name] <= target_fcd:
                return record
        return None

    def score(self):
        """Scores `num_images` images from the GAN now.

        Returns:
            A dict with the scores (`fcd`, `classifier_score`, `kid`,
            `precision`, `recall` and the real floor; `fid` in place of `fcd`
            and no classifier score for inception features). With several
            processes, every process gets the chief's scores
            (`distribute.chief_values`).
        """
        images = self.model.generate(self.num_images, seed=self.seed)
        features, probabilities = self._extract(images)
        distance = metrics.frechet_distance(self.real_features, features)
        terms = self._kid_reference_terms(len(features))
        kid = metrics.kernel_distance(
            self.real_features, features, reference_terms=terms
        )
        precision, recall = metrics.precision_recall(
            self.real_features, features, seed=self.seed
        )
        coverage = {"kid": kid, "precision": precision, "recall": recall}
        if self.features == "inception":
            scores = {"fid": distance, **coverage, **self.floor}
        else:
            scores = {
                "fcd": distance,
                "classifier_score": metrics.classifier_score(probabilities),
                **coverage,
                **self.floor,
            }
        # With several processes, every one logs (and decides on) the chief's.
        strategy = getattr(self.model, "distribute_strategy", None)
        return distribute.chief_values(scores, strategy)
