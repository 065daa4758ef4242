"""The side work's schedules: the backup on the clock, validation by images
seen, the curves redrawn at most every few seconds, the quality scores
within their share of the time."""

import json
import os

import keras
import numpy as np
import pytest
from conftest import (
    assert_same_epoch_means,
    batches,
    random_images,
    tiny_gan,
    tiny_quality,
)

import keras_tpugan as ktg
from keras_tpugan.runs import timed_backup
from keras_tpugan.runs.config import TrainConfig
from keras_tpugan.runs.train import _validation_epochs

pytestmark = pytest.mark.both_backends


class _Clock:
    """A stand-in for `time.monotonic` that moves only when told."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class _Advance(keras.callbacks.Callback):
    """Moves the clock by `seconds[epoch]` at the end of each epoch (before
    the backup's callback looks at it), or by `per_batch` seconds at the end
    of each batch. `GAN.fit` runs it first (`log_order`), before the
    backup's callback."""

    log_order = -2

    def __init__(self, clock, seconds=None, per_batch=0.0):
        super().__init__()
        self.clock, self.seconds, self.per_batch = clock, seconds, per_batch

    def on_train_batch_end(self, batch, logs=None):
        self.clock.now += self.per_batch

    def on_epoch_end(self, epoch, logs=None):
        if self.seconds:
            self.clock.now += self.seconds[epoch]


class _Saved(keras.callbacks.Callback):
    """Records the epoch the newest backup holds after each epoch: when the
    next begins (after the backup's callback began its write, and once its
    thread has finished it) and when training ends."""

    def __init__(self, backup):
        super().__init__()
        self.backup, self.backup_dir, self.epochs = backup, backup.backup_dir, []

    def on_epoch_begin(self, epoch, logs=None):
        if epoch > 0:
            self.backup.wait()
            self.epochs.append(_newest(self.backup_dir))

    def on_train_end(self, logs=None):
        self.epochs.append(_newest(self.backup_dir))


def _newest(backup_dir):
    """The epoch of the newest backup in `backup_dir`, or None."""
    found = timed_backup.TimedBackup(backup_dir, minutes=0).backups()
    return found[0][0] if found else None  # (no backups mid-epoch here)


def test_the_backup_follows_the_first_epoch_end_minutes_after_the_last(
    tmp_path, monkeypatch
):
    clock = _Clock()
    monkeypatch.setattr(timed_backup.time, "monotonic", clock)
    backup_dir = str(tmp_path / "backup")
    backup = timed_backup.TimedBackup(backup_dir, minutes=1.0)
    saved = _Saved(backup)
    # Minutes 0.5, 1.0, 1.5, 3.5, 4.0 at the end of epochs 1 to 5.
    minutes = [0.5, 0.5, 0.5, 2.0, 0.5]
    gan = tiny_gan()
    gan.fit(
        batches(random_images(8), 4, repeat=1),
        epochs=5,
        verbose=0,
        callbacks=[
            _Advance(clock, [m * 60 for m in minutes]),
            backup,
            saved,
        ],
    )
    # Backed up after epoch 2 (1 minute on) and 4 (2 minutes after that
    # backup, written as epoch 3 began), then at the end of training (epoch 5
    # was not yet backed up).
    assert saved.epochs == [None, 2, 2, 4, 5]
    # The two newest are kept, each whole.
    assert sorted(os.listdir(backup_dir)) == ["epoch_000004", "epoch_000005"]
    record = json.load(open(os.path.join(backup_dir, "epoch_000005", "state.json")))
    assert record["epoch"] == 5 and len(record["sha256"]) == 64
    # Every epoch with 0 minutes.
    every_epoch = timed_backup.TimedBackup(str(tmp_path / "every"), minutes=0)
    every = _Saved(every_epoch)
    gan.fit(
        batches(random_images(8), 4, repeat=1),
        epochs=3,
        verbose=0,
        callbacks=[every_epoch, every],
    )
    assert every.epochs == [1, 2, 3]


def _backups_written(monkeypatch):
    """The `(epoch, batch)` of each backup `TimedBackup` starts, in order."""
    written = []
    start_backup = timed_backup.start_backup

    def spy(model, backup_dir, epoch, batch=0, means=None):
        written.append((epoch, batch))
        return start_backup(model, backup_dir, epoch, batch, means)

    monkeypatch.setattr(timed_backup, "start_backup", spy)
    return written


def test_a_backup_is_written_mid_epoch_when_its_minutes_pass(tmp_path, monkeypatch):
    """Every `minutes` of training, in the middle of an epoch too: written as
    the next batch begins, named and recorded by its epoch and batch, and
    resumed from with the batches of that epoch it has trained."""
    clock = _Clock()
    monkeypatch.setattr(timed_backup.time, "monotonic", clock)
    written = _backups_written(monkeypatch)
    backup_dir = str(tmp_path / "backup")
    tiny_gan().fit(
        batches(random_images(16), 4),  # 4 batches an epoch
        epochs=2,
        verbose=0,
        callbacks=[
            _Advance(clock, per_batch=25.0),
            timed_backup.TimedBackup(backup_dir, minutes=1.0),
        ],
    )
    # 75 s after batch 3 of epoch 1 (written as batch 4 begins), 75 s after
    # that at batch 2 of epoch 2; epoch 2's end, 50 s on, at the end.
    assert written == [(0, 3), (1, 2), (2, 0)]
    kept = ["epoch_000001_batch_000002", "epoch_000002"]
    assert sorted(os.listdir(backup_dir)) == kept
    mid = os.path.join(backup_dir, "epoch_000001_batch_000002", "state.json")
    assert json.load(open(mid))["batch"] == 2
    import shutil

    shutil.rmtree(os.path.join(backup_dir, "epoch_000002"))
    backup = timed_backup.TimedBackup(backup_dir, minutes=1.0)
    assert backup.restore_epoch() == 1 and backup.restored_batch == 2
    # With 0 minutes: epoch ends only.
    written.clear()
    tiny_gan().fit(
        batches(random_images(16), 4),
        epochs=2,
        verbose=0,
        callbacks=[
            _Advance(clock, per_batch=600.0),
            timed_backup.TimedBackup(str(tmp_path / "every"), minutes=0),
        ],
    )
    assert written == [(1, 0), (2, 0)]


def _planned_backups(tmp_path, monkeypatch, steps_per_execution):
    """Three epochs of 8 batches with several processes, this process the
    chief of two, the clock 20 s on at each call of the batch hooks, a
    backup a minute: the plans agreed, the backups written and kept."""
    clock = _Clock()
    monkeypatch.setattr(timed_backup.time, "monotonic", clock)
    agreed = []

    def chief_values(values, strategy=None):  # this process is the chief
        agreed.append(values)
        return dict(values)

    monkeypatch.setattr(timed_backup.distribute, "chief_values", chief_values)
    written = _backups_written(monkeypatch)

    class OfTwoProcesses(timed_backup.TimedBackup):
        def on_train_begin(self, logs=None):
            super().on_train_begin(logs)
            self._one_process, self._kept = False, 3  # as in a run of two

    backup_dir = str(tmp_path / "backup")
    compiled = {"steps_per_execution": steps_per_execution}
    tiny_gan(compile_kwargs=compiled).fit(
        batches(random_images(32), 4),  # 8 batches an epoch
        epochs=3,
        verbose=0,
        callbacks=[
            _Advance(clock, per_batch=20.0),
            OfTwoProcesses(backup_dir, minutes=1.0),
        ],
    )
    plans = [(a["first"], a["every"]) for a in agreed]
    assert "due" not in agreed[0]  # the first epoch's, mid-epoch
    assert all("due" in a for a in agreed[1:])  # at the epochs' ends
    return plans, written, sorted(os.listdir(backup_dir))


def test_several_processes_back_up_mid_epoch_at_the_chiefs_planned_batches(
    tmp_path, monkeypatch
):
    """With several processes the chief plans, at each epoch's end, the next
    epoch's batches to back up at from its pace (one agreement an epoch),
    and the first epoch's as its third batch begins; 20 s a batch here."""
    plans, written, kept = _planned_backups(tmp_path, monkeypatch, 1)
    # Epoch 1: planned as batch 2 begins (40 s in, from batch 1's 20 s): at
    # batch 3 (60 s), then every 3 batches (a minute); 40 s after the one at
    # batch 6 at its end, so epoch 2 at batch 1 (20 s left), then 4 and 7;
    # 20 s after that at its end, so epoch 3 at batches 2 and 5; a minute
    # after that at its end: due; the end of training.
    assert plans == [(3, 3), (1, 3), (2, 3), (3, 3)]
    assert written == [(0, 3), (0, 6), (1, 1), (1, 4), (1, 7), (2, 2), (2, 5), (3, 0)]
    assert kept == [
        "epoch_000002_batch_000002",
        "epoch_000002_batch_000005",
        "epoch_000003",
    ]


def test_the_first_epochs_plan_counts_calls_of_several_steps(tmp_path, monkeypatch):
    """With `steps_per_execution=2` the batch hooks run at batches 0, 2, 4
    and 6 (20 s a call: 10 s a batch); the first epoch is planned as its
    third call begins, at batch 4."""
    plans, written, kept = _planned_backups(tmp_path, monkeypatch, 2)
    # Epoch 1: planned at batch 4 (40 s in): at batch 6 (60 s), every 6
    # batches; 20 s after it at the epoch's end, so epoch 2 at batch 4 (40 s
    # left); 40 s after that at its end, so epoch 3 at batch 2; a minute
    # after that at its end: due; the end of training.
    assert plans == [(6, 6), (4, 6), (2, 6), (6, 6)]
    assert written == [(0, 6), (1, 4), (2, 2), (3, 0)]
    assert kept == [
        "epoch_000001_batch_000004",
        "epoch_000002_batch_000002",
        "epoch_000003",
    ]


def test_a_resumed_fit_keeps_the_image_schedules(tmp_path, classifier_dir):
    """The backup restores the step counter before the scores and grids
    read it (`log_order`), so their schedules in images go on."""
    backup_dir = str(tmp_path / "backup")
    ds = batches(random_images(8), 4)  # 2 steps of 4 images an epoch
    tiny_gan().fit(
        ds, epochs=2, verbose=0, callbacks=[timed_backup.TimedBackup(backup_dir, 0)]
    )
    backup = timed_backup.TimedBackup(backup_dir, 0)
    assert backup.restore_epoch() == 2
    quality = tiny_quality(classifier_dir, every_n_images=6, global_batch_size=4)
    grid = ktg.callbacks.SampleGrid(
        tmp_path / "grids", num_images=4, every_n_images=6, global_batch_size=4
    )
    # Listed after them, the backup still runs first.
    tiny_gan().fit(
        ds, epochs=3, initial_epoch=2, verbose=0, callbacks=[quality, grid, backup]
    )
    # 16 images before; 18 is first reached at step 5 (20 images), 24 at 6.
    assert [r["step"] for r in quality.records] == [5, 6]
    assert [r["images"] for r in quality.records] == [20, 24]
    names = [os.path.basename(p) for p in grid.saved]
    assert names == ["images_000000020.png", "images_000000024.png"]


def test_validation_runs_every_so_many_images_in_whole_epochs():
    config = TrainConfig.preset("demo", epochs=12)  # 62 batches of 64: 3,968
    assert config.validation_every_images == 20_000
    # The first epoch, every 5 epochs (19,840 images), and the last.
    assert _validation_epochs(config, 62) == [1, 5, 10, 12]
    assert _validation_epochs(config.override(["epochs=10"]), 62) == [1, 5, 10]
    assert _validation_epochs(config.override(["epochs=1"]), 62) == [1]
    # A resumed fit validates its own first epoch.
    assert _validation_epochs(config, 62, first_epoch=7) == [5, 7, 10, 12]
    assert _validation_epochs(config, 62, first_epoch=12) == [5, 10, 12]
    for every in ("1", "none"):
        changed = config.override([f"validation_every_images={every}"])
        assert _validation_epochs(changed, 62) == 1
    assert _validation_epochs(config, None) == 1  # unknown size: every epoch
    with pytest.raises(ValueError, match="validation_every_images >= 1"):
        config.override(["validation_every_images=0"])
    with pytest.raises(ValueError, match="backup_minutes >= 0"):
        config.override(["backup_minutes=-1"])


def test_the_curves_are_redrawn_at_most_every_so_many_seconds(tmp_path, monkeypatch):
    from keras_tpugan.callbacks import loss_curves

    clock = _Clock()
    monkeypatch.setattr(loss_curves.time, "monotonic", clock)
    drawn = []

    scores_drawn = []

    class Curves(ktg.callbacks.LossCurves):
        def _draw(self):
            drawn.append(len(self.epochs["d_loss"]))
            super()._draw()

        def _plot_quality(self, axes):
            scores_drawn.append(len(self.epochs["d_loss"]))
            return super()._plot_quality(axes)

    def score(epoch, logs):  # scores after epochs 2 and 5, as QualityMetrics logs
        logs["fid"] = 10.0 - epoch if epoch in (1, 4) else float("inf")

    curves = Curves(tmp_path, show=False, every_seconds=10.0)
    tiny_gan().fit(
        batches(random_images(8), 4, repeat=1),
        epochs=6,
        verbose=0,
        callbacks=[
            _Advance(clock, [4, 4, 4, 4, 4, 4]),
            keras.callbacks.LambdaCallback(on_epoch_end=score),
            curves,
        ],
    )
    # After the first epoch, then once 10 s had passed (epochs 4: 12 s on),
    # and at the end (epochs 5 and 6 were not drawn).
    assert drawn == [1, 4, 6]
    # quality.png on the same clock, when a score came since: epoch 2's
    # drawn after epoch 4, epoch 5's at the end.
    assert scores_drawn == [4, 6]
    assert (tmp_path / "quality.png").exists()
    assert (tmp_path / "loss_curves.png").exists()
    # history.csv has every epoch.
    assert len((tmp_path / "history.csv").read_text().splitlines()) == 7
    with pytest.raises(ValueError, match="every_seconds"):
        ktg.callbacks.LossCurves(tmp_path, every_seconds=-1)


def test_scores_that_would_exceed_their_share_of_the_time_are_skipped(
    classifier_dir, monkeypatch
):
    """Each epoch trains 4 s and each score costs 3 s: with max_share=0.25 a
    score needs 9 s of training since the last one (3 s x 0.75 / 0.25)."""
    from keras_tpugan.callbacks import scoring_share, training_clock

    clock = _Clock()
    monkeypatch.setattr(scoring_share.time, "perf_counter", clock)
    monkeypatch.setattr(training_clock.time, "perf_counter", clock)
    scored = []

    class Costly(ktg.callbacks.QualityMetrics):
        def score(self):
            scored.append(int(keras.ops.convert_to_numpy(self.model.step_counter)))
            clock.now += 3.0
            return super().score()

    def fit(max_share):
        scored.clear()
        quality = Costly(
            num_images=50,
            classifier_dir=classifier_dir,
            real_images=random_images(100),
            held_out_images=random_images(100, seed=1),
            max_share=max_share,
        )
        history = tiny_gan().fit(
            batches(random_images(8), 4),
            epochs=7,
            verbose=0,
            callbacks=[_Advance(clock, [4] * 7), quality],
        )
        return quality, [fcd < float("inf") for fcd in history.history["fcd"]]

    quality, logged = fit(None)
    assert logged == [True] * 7 and quality.skipped == 0
    # Scored after epoch 1; 4 and 8 s later not yet; 12 s later (epoch 4)
    # yes; then epoch 7, the last, whatever the share.
    quality, logged = fit(0.25)
    assert logged == [True, False, False, True, False, False, True]
    assert scored == [2, 8, 14] and quality.skipped == 4
    assert [record["step"] for record in quality.records] == [2, 8, 14]
    with pytest.raises(ValueError, match=r"max_share in \(0, 1\)"):
        ktg.callbacks.QualityMetrics(max_share=1.5)
    with pytest.raises(ValueError, match="quality_max_share in"):
        TrainConfig.preset("demo", quality_max_share=0)


def test_the_first_fid_score_is_judged_by_a_bound_timed_on_one_batch(
    monkeypatch, tmp_path
):
    """With the FID network (here a stand-in that costs 0.5 s a batch of 10
    on the clock) the first scheduled score is judged too: a score of 50
    images costs at least 5 batches, 2.5 s, so with max_share=0.25 it needs
    7.5 s of training; each epoch trains 4 s. The real side's features
    (10 batches, 5 s) are not training time."""
    from keras_tpugan.callbacks import scoring_share, training_clock

    clock = _Clock()
    monkeypatch.setattr(scoring_share.time, "perf_counter", clock)
    monkeypatch.setattr(training_clock.time, "perf_counter", clock)
    # The stand-in's features are cached apart from the real network's.
    monkeypatch.setattr(ktg.metrics, "cache_dir", lambda: str(tmp_path))

    class SlowNetwork:
        batch_size = 10

        def features(self, images):
            images = np.asarray(images, "float64").reshape(len(images), -1)
            clock.now += 0.5 * -(-len(images) // self.batch_size)
            return images[:, :8]

    real = random_images(100)
    quality = ktg.callbacks.QualityMetrics(
        features="inception", num_images=50, real_images=real, max_share=0.25
    )
    quality.fid_network = SlowNetwork
    history = tiny_gan().fit(
        batches(random_images(8), 4),
        epochs=6,
        verbose=0,
        callbacks=[_Advance(clock, [4] * 6), quality],
    )
    # Timed off the clock: 0.5 s for a batch, 5 full batches a score.
    assert quality.first_score_bound == 2.5
    # Skipped at 4 s; scored at 8 s (its cost, 2.5 s, timed); skipped at
    # 12 s (4 s since); scored at 16 s; skipped at 20 s; the last epoch.
    logged = [fid < float("inf") for fid in history.history["fid"]]
    assert logged == [False, True, False, True, False, True]
    assert quality.skipped == 3
    assert [record["seconds"] for record in quality.records] == [8.0, 16.0, 24.0]
    assert quality.real_features.shape == (100, 8)
    assert (tmp_path / "fid_features").is_dir()


def test_grids_that_would_exceed_their_share_of_the_time_are_skipped(
    tmp_path, monkeypatch
):
    """Each epoch trains 4 s and each grid costs 3 s, as for scores above:
    with max_share=0.25 a grid needs 9 s of training since the last one."""
    from keras_tpugan.callbacks import scoring_share, training_clock

    clock = _Clock()
    monkeypatch.setattr(scoring_share.time, "perf_counter", clock)
    monkeypatch.setattr(training_clock.time, "perf_counter", clock)

    class Costly(ktg.callbacks.SampleGrid):
        def _draw(self, name, step):
            clock.now += 3.0
            super()._draw(name, step)

    grid = Costly(tmp_path, num_images=4, show=False, max_share=0.25)
    tiny_gan().fit(
        batches(random_images(8), 4),
        epochs=7,
        verbose=0,
        callbacks=[_Advance(clock, [4] * 7), grid],
    )
    drawn = sorted(f for f in os.listdir(tmp_path) if f.endswith(".png"))
    assert drawn == ["epoch_0001.png", "epoch_0004.png", "epoch_0007.png"]
    assert grid.skipped == 4
    with pytest.raises(ValueError, match=r"max_share in \(0, 1\)"):
        ktg.callbacks.SampleGrid(tmp_path, max_share=0)
    with pytest.raises(ValueError, match="sample_max_share in"):
        TrainConfig.preset("demo", sample_max_share=1.0)


class _Killed(BaseException):
    """Stands for a kill: nothing after it runs."""


class _KillAt(keras.callbacks.Callback):
    """Kills the run as batch `batch` of epoch `epoch` (0-based) begins."""

    def __init__(self, epoch, batch):
        super().__init__()
        self.at, self.epoch = (epoch, batch), None

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if (self.epoch, batch) == self.at:
            raise _Killed


class _Session(keras.callbacks.Callback):
    """Records the hooks it sees and the epochs it is told."""

    def __init__(self, stop_at=None):
        super().__init__()
        self.seen, self.stop_at = [], stop_at

    def on_train_begin(self, logs=None):
        self.seen.append(("begin", self.params["epochs"]))

    def on_epoch_end(self, epoch, logs=None):
        self.seen.append(("epoch", epoch, self.params["epochs"]))
        if epoch == self.stop_at:
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        self.seen.append(("end", self.params["epochs"]))


def test_fit_in_parts_is_one_session_for_the_callbacks():
    import numpy as np

    from keras_tpugan.runs.fit_parts import fit_in_parts

    class Batches(keras.utils.PyDataset):
        def __init__(self, count):
            super().__init__()
            self.count = count

        def __len__(self):
            return self.count

        def __getitem__(self, i):
            return np.zeros((4, 2), "float32"), np.zeros((4, 1), "float32")

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    data = [(Batches(1), 2), (Batches(2), 4)]
    session = _Session()
    histories = fit_in_parts(model, data, 1, [session], verbose=0)
    assert session.seen == [
        ("begin", 4),
        ("epoch", 1, 4),
        ("epoch", 2, 4),
        ("epoch", 3, 4),
        ("end", 4),
    ]
    # Keras's History per call: the rest of epoch 2 (one batch), then 3 and 4.
    assert [h.epoch for h in histories] == [[1], [2, 3]]
    # Stopped in the first part: the session ends there, once.
    session = _Session(stop_at=1)
    histories = fit_in_parts(model, data, 1, [session], verbose=0)
    assert session.seen == [("begin", 4), ("epoch", 1, 4), ("end", 4)]
    assert len(histories) == 1
    with pytest.raises(ValueError, match="Received: parts=\\[\\]"):
        fit_in_parts(model, [], 0, [session])


def test_fit_in_parts_keeps_the_order_gan_fit_gives_the_callbacks():
    """A callback with a `log_order` (the backup's -1) runs before the others
    in a session too, whatever the order of the list."""
    from keras_tpugan.runs.fit_parts import fit_in_parts

    seen = []

    class Plain(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen.append("plain")

    class First(keras.callbacks.Callback):
        log_order = -1

        def on_epoch_end(self, epoch, logs=None):
            seen.append("first")

    parts = [(batches(random_images(8), 4), 1)]
    fit_in_parts(tiny_gan(), parts, 0, [Plain(), First()], verbose=0)
    assert seen == ["first", "plain"]


@pytest.mark.jax_only
def test_a_run_killed_mid_epoch_resumes_to_the_uninterrupted_weights(tmp_path):
    """Slow (about 30-40 s): three small runs in this process (one whole; one
    killed in the middle of its second epoch, with a backup after every
    batch; that run resumed). On TensorFlow the same is checked with SIGKILL
    in processes of their own (test_cli.py)."""
    import threading

    import numpy as np

    from keras_tpugan.runs.train import train

    config = TrainConfig.preset(
        "smoke",
        epochs=3,
        width=8,
        latent_dim=8,
        batch_size=256,  # 15 batches an epoch
        quality_every=0,
        validation_split=None,
        snapshot_every=0,
        backup_minutes=1e-6,  # a backup after every batch
    )
    train(config, tmp_path / "whole", verbose=0)
    with pytest.raises(_Killed):
        train(config, tmp_path / "run", verbose=0, extra_callbacks=[_KillAt(1, 7)])
    for thread in threading.enumerate():  # a kill would end the write too
        if thread.name == "keras-tpugan-backup":
            thread.join()
    backup = timed_backup.TimedBackup(tmp_path / "run" / "backup", minutes=0)
    assert backup.restore_epoch() == 1 and backup.restored_batch == 7
    summary = train(config, tmp_path / "run", resume=True, verbose=0)
    assert summary["resumed_at_epoch"] == 1 and summary["resumed_at_batch"] == 7
    assert summary["epochs_completed"] == 3
    history = (tmp_path / "run" / "history.csv").read_text().splitlines()
    assert [row.split(",")[0] for row in history[1:]] == ["1", "2", "3"]
    # The resumed epoch logs the whole epoch's means (its first 7 batches'
    # from the backup's record), as the uninterrupted run did.
    assert_same_epoch_means(tmp_path / "run", tmp_path / "whole")
    whole, resumed = (
        keras.saving.load_model(tmp_path / name / "generator.keras").get_weights()
        for name in ("whole", "run")
    )
    assert len(whole) == len(resumed) > 4
    for a, b in zip(whole, resumed, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)
    # The epoch's rest and the other epochs were one session for the
    # callbacks: one snapshot at the end (none at the end of the epoch's
    # rest), and a GIF of both epochs' grids.
    snapshots = sorted(os.listdir(tmp_path / "run" / "snapshots"))
    assert snapshots == ["gan_epoch_0003.keras"]
    from PIL import Image

    with Image.open(tmp_path / "run" / "samples" / "samples.gif") as gif:
        assert gif.n_frames == 2
