import csv
import os

import keras
import numpy as np
import pytest
from conftest import batches, random_images, tiny_gan, tiny_quality
from PIL import Image

import keras_tpugan as ktg

pytestmark = pytest.mark.both_backends


def test_sample_grid_writes_pngs_of_the_expected_size_and_a_gif(tmp_path):
    gan = tiny_gan()
    grid = ktg.callbacks.SampleGrid(tmp_path / "samples", num_images=6, scale=2)
    gan.fit(batches(random_images(8), 4), epochs=2, verbose=0, callbacks=[grid])
    files = sorted(os.listdir(tmp_path / "samples"))
    assert files == ["epoch_0001.png", "epoch_0002.png", "samples.gif"]
    image = Image.open(tmp_path / "samples" / "epoch_0001.png")
    # 6 images -> 3 columns x 2 rows of 56 px cells with 2 px padding.
    assert image.size == (3 * 58 + 2, 2 * 58 + 2)
    gif = Image.open(tmp_path / "samples" / "samples.gif")
    assert gif.n_frames == 2
    # The same latents every epoch, and training changed the images.
    first = np.asarray(image, "float32")
    second = np.asarray(Image.open(tmp_path / "samples" / "epoch_0002.png"), "float32")
    assert np.abs(first - second).mean() > 0


def test_sample_grid_every_n_epochs_and_one_row_per_class(tmp_path):
    gan = tiny_gan(num_classes=2)
    grid = ktg.callbacks.SampleGrid(tmp_path, every_n_epochs=2, num_images=5, scale=1)
    ds = batches(random_images(8), 4, labels=np.arange(8) % 2)
    gan.fit(ds, epochs=3, verbose=0, callbacks=[grid])
    pngs = sorted(f for f in os.listdir(tmp_path) if f.endswith(".png"))
    assert pngs == ["epoch_0002.png", "epoch_0003.png"]  # and the last epoch
    width, height = Image.open(tmp_path / pngs[0]).size
    assert (width, height) == (3 * 30 + 2, 2 * 30 + 2)  # 2 classes x 3 columns


def test_sample_grid_on_a_schedule_in_images_seen(tmp_path):
    gan = tiny_gan()
    grid = ktg.callbacks.SampleGrid(
        tmp_path, num_images=4, every_n_images=10, global_batch_size=4, gif=False
    )
    ds = batches(random_images(8), 4)  # 2 steps of 4 images an epoch
    gan.fit(ds, epochs=3, verbose=0, callbacks=[grid])
    # 10 and 20 images are first reached at steps 3 (mid-epoch) and 5; the
    # last epoch (24 images) was not on the schedule: drawn at its end.
    names = ["images_000000012.png", "images_000000020.png", "epoch_0003.png"]
    assert [os.path.basename(p) for p in grid.saved] == names
    assert sorted(os.listdir(tmp_path)) == sorted(names)
    # Resumed from the steps trained: 30 images come at step 8 (32), the
    # end of the run, so no second grid is drawn there.
    gan.fit(ds, epochs=4, initial_epoch=3, verbose=0, callbacks=[grid])
    assert [os.path.basename(p) for p in grid.saved] == ["images_000000032.png"]
    with pytest.raises(ValueError, match="global_batch_size"):
        ktg.callbacks.SampleGrid(tmp_path, every_n_images=100)


def test_image_schedules_count_every_step_of_a_multi_step_execution(
    tmp_path, classifier_dir
):
    gan = tiny_gan(compile_kwargs={"steps_per_execution": 2})
    grid = ktg.callbacks.SampleGrid(
        tmp_path, num_images=4, every_n_images=6, global_batch_size=4, gif=False
    )
    quality = tiny_quality(classifier_dir, every_n_images=6, global_batch_size=4)
    ds = batches(random_images(8), 4)
    # Keras calls the batch hooks once per 2 steps (batch index 1 each epoch).
    gan.fit(ds, epochs=3, verbose=0, callbacks=[grid, quality])
    assert int(keras.ops.convert_to_numpy(gan.step_counter)) == 6
    names = [f"images_{n:09d}.png" for n in (8, 16, 24)]
    assert [os.path.basename(p) for p in grid.saved] == names
    assert [r["images"] for r in quality.records] == [8, 16, 24]


def test_an_image_schedule_is_due_once_per_multiple_reached():
    schedule = ktg.callbacks.ImageSchedule(every_n_images=1000, global_batch_size=256)
    schedule.start(steps=0)
    due = [schedule.batch_end(batch) for batch in range(8)]
    assert [b + 1 for b, d in enumerate(due) if d] == [4, 8]
    assert schedule.images == 2048
    schedule.start(steps=11)  # resumed: 2,816 images; 3,000 next
    schedule.epoch_begin()
    assert [schedule.batch_end(b) for b in (0, 2)] == [True, False]
    assert schedule.steps == 14
    for bad in (0, None, 2.5, True):
        with pytest.raises(ValueError, match="Expected every_n_images >= 1"):
            ktg.callbacks.ImageSchedule(every_n_images=bad, global_batch_size=4)
    with pytest.raises(ValueError, match="global_batch_size=None"):
        ktg.callbacks.ImageSchedule(every_n_images=10, global_batch_size=None)


def test_loss_curves_write_csv_and_png(tmp_path):
    gan = tiny_gan()
    curves = ktg.callbacks.LossCurves(tmp_path)
    speed = ktg.callbacks.Throughput(global_batch_size=4)
    gan.fit(
        batches(random_images(8), 4), epochs=2, verbose=0, callbacks=[speed, curves]
    )
    with open(tmp_path / "history.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["epoch"] for r in rows] == ["1", "2"]
    assert set(rows[0]) == {
        "epoch",
        "loss",
        "d_loss",
        "g_loss",
        "d_real",
        "d_fake",
        "images_per_sec",
        "step_time_ms",
        "g_learning_rate",
        "d_learning_rate",
    }
    assert Image.open(tmp_path / "loss_curves.png").size == (1000, 400)
    assert len(curves.steps["g_loss"]) == 4
    # Per-step values average back to the epoch means Keras logged.
    np.testing.assert_allclose(
        np.mean(curves.steps["d_loss"][2:]), curves.epochs["d_loss"][1], rtol=1e-5
    )
    assert speed.first_epoch_seconds > 0 and speed.mean_images_per_sec > 0
    assert float(rows[1]["images_per_sec"]) == pytest.approx(speed.images_per_sec[1])
    # A resumed fit (from epoch 3 of 4) plots at the epochs' own numbers, and
    # a held-out value at the epoch that was validated (every 2nd).
    resumed = ktg.callbacks.LossCurves(tmp_path / "resumed")
    gan.fit(
        batches(random_images(8), 4),
        initial_epoch=2,
        epochs=4,
        validation_data=batches(random_images(4, seed=1), 4),
        validation_freq=2,
        verbose=0,
        callbacks=[resumed],
    )
    assert resumed.epoch_numbers["d_loss"] == [3, 4]
    assert resumed.epoch_numbers["val_d_loss"] == [4]
    lines = resumed.figure().axes[0].lines  # held out, then d_loss, g_loss
    np.testing.assert_array_equal(lines[0].get_xdata(), [4])  # val_d_loss
    np.testing.assert_allclose(lines[1].get_xdata(), [2.5, 3, 3.5, 4])  # steps
    np.testing.assert_array_equal(lines[3].get_xdata(), [3, 4])  # epoch means


def test_long_curves_are_drawn_as_a_band_at_a_bounded_number_of_points(tmp_path):
    from matplotlib.collections import PolyCollection

    from keras_tpugan.callbacks import loss_curves

    gan = tiny_gan()
    curves = ktg.callbacks.LossCurves(tmp_path, show=False)
    gan.fit(batches(random_images(8), 4), epochs=1, verbose=0, callbacks=[curves])
    # As after 2,501 steps of 5 epochs: more than MAX_POINTS per curve.
    steps = 2501
    values = np.random.default_rng(0).normal(size=steps)
    curves.steps = {"d_loss": list(values), "g_loss": list(values + 1)}
    curves.epochs = {"d_loss": [0.0] * 5, "g_loss": [1.0] * 5}
    curves.epoch_numbers = {"d_loss": [1, 2, 3, 4, 5], "g_loss": [1, 2, 3, 4, 5]}
    axes = curves.figure().axes[0]
    smooth = axes.lines[0]  # d_loss's average, at the band's points
    assert len(smooth.get_xdata()) == loss_curves.MAX_POINTS
    (band, _) = [c for c in axes.collections if isinstance(c, PolyCollection)]
    # Each run of steps' extremes bound the band: the whole range is in it.
    heights = band.get_paths()[0].vertices[:, 1]
    assert heights.min() == values.min() and heights.max() == values.max()
    at, low, high = loss_curves._envelope(values, 4)
    edges = [0, 625, 1250, 1875, 2501]
    np.testing.assert_array_equal(at, [312, 937, 1562, 2187])
    for i in range(4):
        run = values[edges[i] : edges[i + 1]]
        assert (low[i], high[i]) == (run.min(), run.max())


def test_redrawn_figures_equal_new_ones_pixel_for_pixel(tmp_path):
    # The PNGs are redrawn in figures kept from the first drawing: after
    # more steps, a held-out value, scores and the switch to a band they
    # equal figures built anew, and hold no artist of an earlier drawing.
    import io

    def pixels(figure_or_path):
        if isinstance(figure_or_path, str):
            return np.asarray(Image.open(figure_or_path))
        buffer = io.BytesIO()
        figure_or_path.savefig(buffer, dpi=100, format="png")
        return np.asarray(Image.open(buffer))

    gan = tiny_gan()
    curves = ktg.callbacks.LossCurves(tmp_path, show=False, every_seconds=0)
    gan.fit(batches(random_images(8), 4), epochs=1, verbose=0, callbacks=[curves])
    first = pixels(str(tmp_path / "loss_curves.png"))
    rng = np.random.default_rng(0)
    for steps, epochs in ((40, 2), (2400, 5)):  # the second past MAX_POINTS
        values = rng.normal(size=steps)
        names = ("d_loss", "g_loss", "d_real", "d_fake")
        curves.steps = {name: list(values + i) for i, name in enumerate(names)}
        numbers = list(range(1, epochs + 1))
        curves.epochs = {
            **{name: list(rng.normal(size=epochs)) for name in names},
            "val_d_loss": [0.5],
            "val_d_real": [0.25],
            "fcd": [30.0] + [float("inf")] * (epochs - 2) + [20.0],
            "kid": [3.0] + [float("inf")] * (epochs - 2) + [2.0],
        }
        curves.epoch_numbers = {
            **{name: numbers for name in names},
            "val_d_loss": [epochs],
            "val_d_real": [epochs],
            "fcd": numbers,
            "kid": numbers,
        }
        curves._scores_undrawn = True
        curves._draw()
        drawn = pixels(str(tmp_path / "loss_curves.png"))
        assert drawn.shape == first.shape and (drawn != first).any()
        np.testing.assert_array_equal(drawn, pixels(curves.figure()))
        np.testing.assert_array_equal(
            pixels(str(tmp_path / "quality.png")), pixels(curves.quality_figure())
        )
    kept, _ = curves._kept["curves"]
    new = curves.figure()
    for ax_kept, ax_new in zip(kept.axes, new.axes, strict=True):
        assert len(ax_kept.lines) == len(ax_new.lines)
        assert len(ax_kept.collections) == len(ax_new.collections) == 2  # bands


def test_a_resumed_fit_replaces_the_rows_of_the_epochs_it_trains_again(tmp_path):
    # A run killed at epoch 3 whose backup was at epoch 1 left rows 1-3; the
    # fit resumed from epoch 1 keeps row 1 and writes rows 2-4 once each.
    gan = tiny_gan()
    data = batches(random_images(8), 4)
    gan.fit(data, epochs=3, verbose=0, callbacks=[ktg.callbacks.LossCurves(tmp_path)])
    with open(tmp_path / "history.csv") as f:
        first = list(csv.DictReader(f))
    gan.fit(
        data,
        initial_epoch=1,
        epochs=4,
        verbose=0,
        callbacks=[ktg.callbacks.LossCurves(tmp_path)],
    )
    with open(tmp_path / "history.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["epoch"] for r in rows] == ["1", "2", "3", "4"]
    assert rows[0] == first[0]
    assert rows[1]["d_loss"] != first[1]["d_loss"]  # epoch 2, trained again
    assert [f for f in os.listdir(tmp_path) if "partial" in f] == []
    # A fit from epoch 0 appends, as before.
    gan.fit(data, epochs=1, verbose=0, callbacks=[ktg.callbacks.LossCurves(tmp_path)])
    with open(tmp_path / "history.csv") as f:
        assert [r["epoch"] for r in csv.DictReader(f)] == ["1", "2", "3", "4", "1"]


def test_callbacks_refuse_a_model_that_is_not_a_gan(tmp_path):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(loss="mse")
    with pytest.raises(ValueError, match="SampleGrid expects a keras_tpugan.GAN"):
        model.fit(
            np.zeros((4, 2)),
            np.zeros(4),
            verbose=0,
            callbacks=[ktg.callbacks.SampleGrid(tmp_path)],
        )


def test_unwritable_directory_fails_at_train_begin(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    gan = tiny_gan()
    with pytest.raises(ValueError, match="LossCurves cannot write to"):
        gan.fit(
            batches(random_images(8), 4),
            epochs=1,
            verbose=0,
            callbacks=[ktg.callbacks.LossCurves(blocker / "run")],
        )
    assert int(gan.step_counter.numpy()) == 0


def test_tile_pads_missing_cells():
    grid = ktg.images.tile(np.ones((5, 4, 4, 1)), cols=3, pad=1)
    assert grid.shape == (2 * 5 + 1, 3 * 5 + 1)
    assert grid[1:5, 1:5].min() == 255 and grid[6:10, 11:15].max() == 0
    with pytest.raises(ValueError, match="rows \\* cols >= the 5 images"):
        ktg.images.tile(np.ones((5, 4, 4, 1)), rows=1, cols=3)


def test_all_callbacks_for_two_epochs_on_the_offline_subset(tmp_path, classifier_dir):
    """Slow (about 20-40 s): two epochs over the 4,000 offline digits, each
    scored on 500 generated images by the metric classifier."""
    ds = ktg.data.load_images("mnist", source="offline", batch_size=200)
    gan = tiny_gan(ema_decay=0.9)
    quality = ktg.callbacks.QualityMetrics(
        num_images=500, classifier_dir=classifier_dir
    )
    callbacks = [
        ktg.callbacks.Throughput(global_batch_size=200),
        quality,
        ktg.callbacks.DivergenceGuard(),
        ktg.callbacks.SampleGrid(tmp_path / "samples"),
        ktg.callbacks.LossCurves(tmp_path),
    ]
    history = gan.fit(ds, epochs=2, verbose=0, callbacks=callbacks)
    assert sorted(os.listdir(tmp_path / "samples")) == [
        "epoch_0001.png",
        "epoch_0002.png",
        "samples.gif",
    ]
    assert Image.open(tmp_path / "samples" / "epoch_0001.png").size == (8 * 58 + 2,) * 2
    with open(tmp_path / "history.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2
    assert set(rows[0]) == {
        "epoch",
        "loss",
        "d_loss",
        "g_loss",
        "d_real",
        "d_fake",
        "images_per_sec",
        "step_time_ms",
        "fcd",
        "classifier_score",
        "kid",
        "precision",
        "recall",
        "fcd_real_floor",
        "classifier_score_real",
        "g_learning_rate",
        "d_learning_rate",
    }
    fcd = history.history["fcd"]
    assert np.isfinite(fcd).all() and fcd[-1] > history.history["fcd_real_floor"][-1]
    assert 1.0 <= history.history["classifier_score"][-1] <= 10.0
    assert history.history["classifier_score_real"][-1] > 9.0
    for name in ("precision", "recall"):
        assert all(0.0 <= value <= 1.0 for value in history.history[name])


def test_quality_metrics_every_n_epochs_and_keras_best_logic(classifier_dir, tmp_path):
    gan = tiny_gan()
    quality = tiny_quality(classifier_dir, every_n_epochs=2)
    seen, weights = [], []

    def record(epoch, logs):
        seen.append(dict(logs))
        weights.append(gan.generator.get_weights())

    # Keras's "best" logic, listed BEFORE QualityMetrics: fit runs the
    # callbacks that add to the logs first, so these see the scores; and
    # without `mode`: the GAN declares which way each score improves.
    stopping = keras.callbacks.EarlyStopping("fcd", patience=10)
    checkpoint = keras.callbacks.ModelCheckpoint(
        str(tmp_path / "best.weights.h5"),
        monitor="fcd",
        save_best_only=True,
        save_weights_only=True,
    )
    best_score = keras.callbacks.EarlyStopping("classifier_score", patience=10)
    curves = ktg.callbacks.LossCurves(tmp_path, show=False)
    history = gan.fit(
        batches(random_images(8), 4),
        epochs=4,
        verbose=0,
        callbacks=[
            keras.callbacks.LambdaCallback(on_epoch_end=record),
            stopping,
            checkpoint,
            best_score,
            curves,
            quality,
        ],
    )
    # quality.png plots the scored epochs only (not the unscored ones' inf).
    assert Image.open(tmp_path / "quality.png").size == (1200, 360)
    (fcd_line, *_) = curves.quality_figure().axes[0].get_lines()
    assert list(fcd_line.get_xdata()) == [2, 4]
    # Scored after epochs 2 and 4; the others log the worst values.
    fcd = history.history["fcd"]
    assert [r["step"] for r in quality.records] == [4, 8]
    assert [r["fcd"] for r in quality.records] == [fcd[1], fcd[3]]
    assert [s["fcd"] for s in seen] == fcd
    assert fcd[0] == fcd[2] == np.inf and np.isfinite(fcd[1]) and np.isfinite(fcd[3])
    assert seen[0]["classifier_score"] == -np.inf and seen[0]["kid"] == np.inf
    assert seen[0]["precision"] == seen[0]["recall"] == -np.inf
    assert 0.0 <= seen[1]["recall"] <= 1.0
    assert np.isfinite(seen[0]["fcd_real_floor"])
    best = int(np.argmin(fcd))
    assert best in (1, 3) and stopping.best == fcd[best]
    assert best_score.best == max(history.history["classifier_score"]) > 0
    # The checkpoint holds the best scored epoch's weights.
    gan.load_weights(tmp_path / "best.weights.h5")
    for a, b in zip(gan.generator.get_weights(), weights[best], strict=True):
        np.testing.assert_array_equal(a, b)
    with open(tmp_path / "history.csv") as f:
        rows = list(csv.DictReader(f))
    # history.csv leaves the unscored epochs' scores blank (no `inf`).
    assert [r["fcd"] for r in rows][0::2] == ["", ""]
    assert [float(r["fcd"]) for r in rows[1::2]] == pytest.approx(fcd[1::2])
    assert "inf" not in (tmp_path / "history.csv").read_text()


def test_quality_metrics_computes_the_real_kid_terms_once(classifier_dir, monkeypatch):
    gan = tiny_gan()
    quality = tiny_quality(classifier_dir)
    sizes = []
    compute = ktg.metrics.kernel_reference_terms

    def counted(features, other_size, **kwargs):
        sizes.append(other_size)
        return compute(features, other_size, **kwargs)

    monkeypatch.setattr(ktg.metrics, "kernel_reference_terms", counted)
    gan.fit(batches(random_images(8), 4), epochs=3, verbose=0, callbacks=[quality])
    # Once, as training begins, for three scores.
    assert len(quality.records) == 3 and sizes == [50]
    # A score's KID is the one computed whole, to the last digit.
    images = gan.generate(quality.num_images, seed=quality.seed)
    features, _ = ktg.metrics.classifier_outputs(quality.classifier, images)
    whole = ktg.metrics.kernel_distance(quality.real_features, features)
    assert quality.score()["kid"] == whole
    assert sizes == [50]
    # New real features get their own terms.
    quality.real_features = quality.real_features + 1.0
    quality.score()
    assert sizes == [50, 50]
    with pytest.raises(ValueError, match="Expected 10 reference terms"):
        ktg.metrics.kernel_distance(
            quality.real_features, features, reference_terms=[0.0]
        )


def _rgb_gan():
    gan = ktg.GAN(
        ktg.models.dcgan_generator(latent_dim=8, image_shape=(32, 32, 3), width=8),
        ktg.models.dcgan_discriminator(image_shape=(32, 32, 3), width=8),
        latent_dim=8,
    )
    gan.compile()
    return gan, batches(np.zeros((4, 32, 32, 3), "float32"), 4)


def test_quality_metrics_refuses_rgb_generators_with_the_classifier(classifier_dir):
    gan, ds = _rgb_gan()
    quality = ktg.callbacks.QualityMetrics(classifier_dir=classifier_dir)
    with pytest.raises(ValueError, match="28x28x1 digits.*features='inception'"):
        gan.fit(ds, epochs=1, verbose=0, callbacks=[quality])
    with pytest.raises(ValueError, match="Expected `real_images`"):
        ktg.callbacks.QualityMetrics(features="inception")


def test_quality_metrics_for_data_scores_against_a_classifier_of_its_classes(
    tmp_path,
):
    """Slow (about 20-55 s): trains a metric classifier of two classes (twice:
    of arrays, and of a streamed folder's subset), then fits and scores an RGB
    GAN with the first."""
    folder = tmp_path / "classes"
    rng = np.random.default_rng(0)
    labels = np.arange(40) % 2
    images = rng.integers(0, 60, (40, 32, 32, 3)).astype("uint8")
    images[labels == 1, ..., 0] += 180  # class 1 is red
    quality = ktg.callbacks.QualityMetrics.for_data(
        (images, labels), every_n_epochs=1, num_images=8
    )
    record = quality.classifier_record
    assert record["num_classes"] == 2 and 0 <= record["test_accuracy"] <= 1
    # A tenth held out for the floor, the rest to compare with.
    assert (record["held_out_images"], record["real_images"]) == (4, 36)
    assert quality.real_images.shape == (36, 32, 32, 3)
    assert quality.real_images.min() >= -1 and quality.real_images.max() <= 1
    gan, ds = _rgb_gan()
    history = gan.fit(ds, epochs=1, verbose=0, callbacks=[quality])
    assert np.isfinite(history.history["fcd"][0])
    assert 1.0 <= history.history["classifier_score_real"][0] <= 2.0
    # A streamed folder of the same images (one subfolder per class): at
    # most max_images of them read, a subset drawn from the seed.
    for label in (0, 1):
        (folder / str(label)).mkdir(parents=True)
    for i, (image, label) in enumerate(zip(images, labels, strict=True)):
        Image.fromarray(image).save(folder / str(label) / f"{i:02d}.png")
    streamed = ktg.callbacks.QualityMetrics.for_data(
        str(folder), image_size=32, stream=True, max_images=30, num_images=8
    )
    record = streamed.classifier_record
    assert (record["held_out_images"], record["real_images"]) == (3, 27)
    pixels = np.round((streamed.real_images + 1) * 127.5).astype("uint8")
    originals = {x.tobytes() for x in images}
    assert len({x.tobytes() for x in pixels} & originals) == 27
    # MNIST at 28x28x1: the shipped classifier and digits.
    mnist = ktg.callbacks.QualityMetrics.for_data("mnist", num_images=8)
    assert mnist.classifier_record is None and mnist.own_classifier is None
    # No labels, or one class: no classifier to measure with.
    with pytest.raises(ValueError, match="Expected labelled images.*no labels"):
        ktg.callbacks.QualityMetrics.for_data(images)
    with pytest.raises(ValueError, match="one class"):
        ktg.callbacks.QualityMetrics.for_data((images, np.zeros(40, "int32")))
    # ... or, asked to, None (a caller that then trains without figures).
    for data in (images, (images, np.zeros(40, "int32"))):
        assert ktg.callbacks.QualityMetrics.for_data(data, on_unlabelled="none") is None
    with pytest.raises(ValueError, match="Expected on_unlabelled to be 'raise', 'n"):
        ktg.callbacks.QualityMetrics.for_data(images, on_unlabelled="skip")


class _Poison(keras.callbacks.Callback):
    """Makes the discriminator's weights NaN after epoch `after`."""

    def __init__(self, after):
        super().__init__()
        self.after = after

    def on_epoch_end(self, epoch, logs=None):
        if epoch + 1 == self.after:
            for w in self.model.discriminator.trainable_weights:
                w.assign(np.full(w.shape, np.nan, "float32"))


def test_divergence_guard_stops_on_nan_and_restores_good_weights():
    gan = tiny_gan()
    guard = ktg.callbacks.DivergenceGuard(d_loss_band=None)
    history = gan.fit(
        batches(random_images(8), 4),
        epochs=5,
        verbose=0,
        callbacks=[guard, _Poison(after=2)],
    )
    # Epoch 2's end is recorded as good before the poison (guard runs first).
    assert "became nan at epoch 3, step 1" in guard.stopped_reason
    assert "restored to the end of epoch 2" in guard.stopped_reason
    assert len(history.epoch) == 3
    for w in gan.get_weights():
        assert np.isfinite(w).all()


def test_divergence_guard_stops_when_d_loss_leaves_the_band():
    gan = tiny_gan()
    start = [w.copy() for w in gan.get_weights()]
    guard = ktg.callbacks.DivergenceGuard(d_loss_band=(100.0, 200.0), patience=2)
    history = gan.fit(
        batches(random_images(8), 4), epochs=5, verbose=0, callbacks=[guard]
    )
    assert len(history.epoch) == 2
    assert "stayed outside [100.0, 200.0] for 2 epoch(s)" in guard.stopped_reason
    assert "the start of training" in guard.stopped_reason
    for a, b in zip(start, gan.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="low < high"):
        ktg.callbacks.DivergenceGuard(d_loss_band=(2.0, 1.0))


@pytest.mark.tensorflow_only  # TensorFlow's summary writer (on JAX: test_jax_alone)
def test_sample_grid_writes_tensorboard_images(tmp_path):
    from tensorboard.backend.event_processing import event_accumulator

    gan = tiny_gan()
    grid = ktg.callbacks.SampleGrid(
        tmp_path / "s", tensorboard_dir=str(tmp_path / "tb")
    )
    gan.fit(batches(random_images(8), 4), epochs=2, verbose=0, callbacks=[grid])
    (events,) = os.listdir(tmp_path / "tb")
    accumulator = event_accumulator.EventAccumulator(
        str(tmp_path / "tb" / events), size_guidance={"tensors": 0}
    )
    accumulator.Reload()
    assert [event.step for event in accumulator.Tensors("samples")] == [1, 2]


def test_keras_terminate_on_nan_stops_at_the_first_nan_step():
    gan = tiny_gan()
    images = random_images(16)
    images[8:12] = np.nan  # the 3rd of 4 batches
    history = gan.fit(
        batches(images, 4),
        epochs=3,
        verbose=0,
        callbacks=[keras.callbacks.TerminateOnNaN()],
    )
    # `loss` = d_loss + g_loss is in the logs, so Keras's callback sees it.
    assert int(keras.ops.convert_to_numpy(gan.step_counter)) == 3
    assert len(history.epoch) == 1 and np.isnan(history.history["loss"][0])


def test_quality_metrics_on_a_schedule_in_images_seen(classifier_dir):
    gan = tiny_gan()
    quality = tiny_quality(classifier_dir, every_n_images=6, global_batch_size=4)
    history = gan.fit(
        batches(random_images(8), 4), epochs=3, verbose=0, callbacks=[quality]
    )
    # 4 images a step: 6, 12, 18, 24 images are first reached at steps 2,
    # 3 (mid-epoch), 5 and 6.
    assert [r["step"] for r in quality.records] == [2, 3, 5, 6]
    assert [r["images"] for r in quality.records] == [8, 12, 20, 24]
    seconds = [r["seconds"] for r in quality.records]
    assert seconds == sorted(seconds) and seconds[0] > 0
    # Each epoch logs its last score.
    fcds = [r["fcd"] for r in quality.records]
    assert history.history["fcd"] == [fcds[0], fcds[1], fcds[3]]
    assert quality.first_reaching(1e9)["step"] == 2
    assert quality.first_reaching(-1.0) is None
    with pytest.raises(ValueError, match="global_batch_size"):
        ktg.callbacks.QualityMetrics(every_n_images=100)


def test_the_shipped_mnist_classifier_serves_mnist_at_its_own_size_only():
    uses = ktg.callbacks.QualityMetrics.uses_mnist_classifier
    assert uses("mnist") and uses("mnist", 28, 1) and uses("mnist", (28, 28))
    assert not uses("mnist", 32) and not uses("mnist", channels=3)
    assert not uses("cifar10") and not uses(("mnist",))
    source = ktg.data.ImageSource
    assert uses(source("mnist", image_size=28)) and uses(source("mnist", channels=1))
    assert not uses(source("mnist", image_size=32)) and not uses(source("cifar10"))


def test_the_progress_bar_leaves_out_unscored_epochs_scores(classifier_dir, capsys):
    """An unscored epoch logs `fcd: inf` for Keras's best logic; the printed
    line does not show it (a reader would take it for a failure)."""
    gan = tiny_gan()
    quality = tiny_quality(classifier_dir, every_n_epochs=2)
    history = gan.fit(
        batches(random_images(8), 4), epochs=2, verbose=2, callbacks=[quality]
    )
    lines = [line for line in capsys.readouterr().out.splitlines() if "d_loss" in line]
    assert len(lines) == 2
    # The real-data floors are measured every epoch and shown.
    assert "fcd_real_floor: " in lines[0] and "fcd_real_floor: " in lines[1]
    assert ": inf" not in lines[0] and ": -inf" not in lines[0]
    assert " fcd: " not in lines[0] and " kid: " not in lines[0]
    assert " fcd: " in lines[1] and " kid: " in lines[1] and "inf" not in lines[1]
    # The logs keep the worst value, for EarlyStopping and ModelCheckpoint.
    assert history.history["fcd"][0] == np.inf
    assert np.isfinite(history.history["fcd"][1])


@pytest.mark.tensorflow_only  # TensorBoard's writer needs TensorFlow
def test_the_runs_tensorboard_leaves_out_unscored_epochs_scores(tmp_path, monkeypatch):
    import tensorflow as tf

    from keras_tpugan.runs.scored_tensorboard import ScoredTensorBoard

    board = ScoredTensorBoard(str(tmp_path), write_graph=False, profile_batch=0)
    board.set_model(tiny_gan())
    board.on_train_begin()
    board.on_epoch_end(0, {"d_loss": 1.0, "fcd": np.inf, "recall": -np.inf})
    board.on_epoch_end(1, {"d_loss": 0.5, "fcd": 3.0, "recall": 0.5})
    board.on_train_end()
    tags = {}
    for path in (tmp_path / "train").glob("*tfevents*"):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                tags.setdefault(event.step, set()).add(value.tag)
    # (Keras adds the optimizers' learning rates to each epoch.)
    assert "epoch_d_loss" in tags[0] and not {"epoch_fcd", "epoch_recall"} & tags[0]
    assert {"epoch_d_loss", "epoch_fcd", "epoch_recall"} <= tags[1]
    # Per-batch scalars only where a writer records them (update_freq).
    scalar, built = tf.summary.scalar, set()

    def counted(name, *args, **kwargs):
        built.add(name)
        return scalar(name, *args, **kwargs)

    monkeypatch.setattr(tf.summary, "scalar", counted)
    for freq, expected in (("epoch", set()), ("batch", {"batch_d_loss"})):
        board = ScoredTensorBoard(
            str(tmp_path / freq), write_graph=False, profile_batch=0, update_freq=freq
        )
        board.set_model(tiny_gan())
        built.clear()
        board.on_train_begin()
        board.on_train_batch_begin(0)
        board.on_train_batch_end(0, {"d_loss": 1.0})
        board.on_train_end()
        assert built == expected
