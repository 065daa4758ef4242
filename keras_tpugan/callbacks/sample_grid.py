"""`SampleGrid`: a grid of generated images per epoch, and a GIF of them."""

import uuid

from keras import ops

from keras_tpugan import images as images_lib
from keras_tpugan.callbacks.gan_callback import FAST_PNG, GANCallback, show_inline
from keras_tpugan.callbacks.image_schedule import ImageSchedule
from keras_tpugan.callbacks.scoring_share import ScoringShare
from keras_tpugan.callbacks.training_clock import TrainingClock
from keras_tpugan.latents import seeded_latents
from keras_tpugan.tf_import import tensorflow


class SampleGrid(GANCallback):
    """Saves a grid of generated images every few epochs, or images seen.

    The latents are drawn once from `seed`, so the grids of successive
    epochs show the same latents and can be compared. A conditional GAN
    gets one row per class. Files: `epoch_0001.png`, ... and, at the end of
    training, `samples.gif` animating them. In a notebook the latest grid
    is shown in the cell output, refreshed in place.

    With `every_n_images` the grids follow a schedule in images seen
    instead (`ImageSchedule`: after the step at which each multiple is
    reached, mid-epoch if need be), named by the images seen
    (`images_000020480.png`, ...), with the last epoch's grid named as
    above; a run's grids then come as often whatever its batch size, its
    epochs' length and its device. The TensorBoard images' step is the
    epoch, or with `every_n_images` the images seen.

    Args:
        directory: Output directory.
        every_n_epochs: Save a grid after every `every_n_epochs` epochs
            (and after the last one).
        num_images: Images per grid; a grid that is not full is padded
            with black cells. For a conditional GAN it is rounded up to a
            whole number of rows, one per class.
        seed: Seed of the fixed latents.
        scale: Integer upscaling of the pixels (nearest neighbour).
        gif: Write `samples.gif` at the end of training.
        tensorboard_dir: If set, also write each grid as a TensorBoard image
            summary there.
        show: Show the grid inline in notebooks.
        max_share: At most about this share of the training time to spend on
            grids (`ScoringShare`: a scheduled grid is skipped when the
            training since the last one is too short for its cost; None:
            every scheduled grid). The last epoch's is always drawn. On a
            fast device, where an epoch takes less than a grid's fixed cost
            many times over, it keeps the grids from slowing the run.
        every_n_images: Save a grid every this many images seen, instead of
            every `every_n_epochs` epochs (None: by epochs).
        global_batch_size: Images per step over all replicas (required with
            `every_n_images`).

    Example:

    ```python
    gan.fit(ds, epochs=5, callbacks=[ktg.callbacks.SampleGrid("runs/x/samples")])
    ```
    """

    def __init__(
        self,
        directory,
        every_n_epochs=1,
        num_images=64,
        seed=0,
        scale=2,
        gif=True,
        tensorboard_dir=None,
        show=True,
        max_share=None,
        every_n_images=None,
        global_batch_size=None,
    ):
        super().__init__(directory)
        ScoringShare(max_share)  # checks it
        self._schedule = None
        if every_n_images is None:
            # Keras dispatches steps asynchronously only while no callback
            # has a batch hook; grids by epochs need none.
            self.on_train_batch_end = super().on_train_batch_end
        else:
            self._schedule = ImageSchedule(every_n_images, global_batch_size)
        self.every_n_images = every_n_images
        self.global_batch_size = global_batch_size
        if every_n_epochs < 1 or num_images < 1 or scale < 1:
            raise ValueError(
                "Expected every_n_epochs, num_images and scale >= 1. Received: "
                f"every_n_epochs={every_n_epochs}, num_images={num_images}, "
                f"scale={scale}."
            )
        self.every_n_epochs = every_n_epochs
        self.num_images = num_images
        self.seed = seed
        self.scale = scale
        self.gif = gif
        self.tensorboard_dir = tensorboard_dir
        if tensorboard_dir:
            # Writing TensorBoard images needs TensorFlow's summary writer.
            self._tf = tensorflow("SampleGrid(tensorboard_dir=...)")
        self.show = show
        self.max_share = max_share
        self.saved = []
        self._display_id = f"sample-grid-{uuid.uuid4().hex}"

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        gan = self.model
        self.saved = []
        self.rows, self.cols, self.labels = images_lib.grid_layout(
            self.num_images, gan.num_classes
        )
        count = self.num_images if self.labels is None else len(self.labels)
        self.latents = seeded_latents(count, gan.latent_dim, [self.seed, 1])
        self._clock = TrainingClock()
        self._share = ScoringShare(self.max_share)
        self._drawn_at = None
        if self._schedule is not None:  # a resumed run keeps its schedule
            self._schedule.start(int(ops.convert_to_numpy(gan.step_counter)))
        self._writer = None
        if self.tensorboard_dir and self.chief:
            self._writer = self._tf.summary.create_file_writer(self.tensorboard_dir)

    @property
    def skipped(self):
        """Scheduled grids skipped to keep within `max_share`."""
        return self._share.skipped

    def on_test_begin(self, logs=None):
        self._clock.pause()  # validation is not training time

    def on_test_end(self, logs=None):
        self._clock.resume()

    def on_epoch_begin(self, epoch, logs=None):
        if self._schedule is not None:
            self._schedule.epoch_begin()

    def on_train_batch_end(self, batch, logs=None):  # with every_n_images only
        if self._schedule.batch_end(batch) and self._allowed():
            images = self._schedule.images
            self._drawn(f"images_{images:09d}.png", step=images)

    def on_epoch_end(self, epoch, logs=None):
        last = epoch + 1 == self.params.get("epochs")
        if self._schedule is not None:  # the last, unless drawn at this step
            due = last and self._drawn_at != self._schedule.images
        else:
            due = self.due(epoch, self.every_n_epochs) and (last or self._allowed())
        if due and self.chief:
            step = epoch + 1 if self._schedule is None else self._schedule.images
            self._drawn(f"epoch_{epoch + 1:04d}.png", step=step)

    def _allowed(self):
        # Only the chief draws, and decides alone (no collective).
        return self.chief and self._share.allows(self._clock.seconds(), agree=False)

    def _drawn(self, name, step):
        self._share.timed(lambda: self._draw(name, step), self._clock)
        self._drawn_at = step

    def _draw(self, name, step):
        grid = images_lib.tile(
            self.model.generate(self.latents, labels=self.labels),
            self.rows,
            self.cols,
            scale=self.scale,
        )
        path = self.path(name)
        from PIL import Image

        Image.fromarray(grid).save(path, **FAST_PNG)
        self.saved.append(path)
        if self._writer is not None:
            with self._writer.as_default():
                pixels = grid[None, ..., None] if grid.ndim == 2 else grid[None]
                self._tf.summary.image("samples", pixels, step=step)
            self._writer.flush()
        if self.show:
            show_inline(path, self._display_id)

    def on_train_end(self, logs=None):
        if self.gif and self.chief and self.saved:
            images_lib.save_gif(self.saved, self.path("samples.gif"))
