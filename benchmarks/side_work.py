"""How much of a run's wall time goes to side work, and to which kind.

Usage:
    python benchmarks/side_work.py
    python benchmarks/side_work.py --rows demo-w16 fast
    python benchmarks/side_work.py --rows demo --demo-epochs 250

Runs `keras_tpugan.runs.train.train` once per row, in this process, with
each kind of side work timed where it runs (`fit` calls it between steps,
on the training thread): validation (`fit`'s evaluation of the held-out
split), the backup (`TimedBackup`), the snapshots, the sample grid,
the curves (`LossCurves`: `history.csv` and the figures), TensorBoard and
the quality scores. The steps are the time from each epoch's first batch
to its last, less the side work done between them in batch hooks (a backup
from the middle of an epoch, the curves' per-step values); the first epoch
(which compiles) is left out of every figure. A backup's checksum, record
and rename run on a thread of their own and are not counted: only the
weights' write on the training thread is.
It prints, per row, the seconds of steps, of each kind of side work (per
call and in all, and its first call of 1 ms or more against its later ones:
validation's first call traces or compiles its step, unless it ran in the
first epoch) and their share of the wall time, the time between one
epoch's last callback and the next one's first step ("between epochs":
Keras's new epoch, the data's), the end of the run (after the last
epoch's callbacks: `on_train_end`, the generator and summary written),
the rest ("other": the other callbacks), and the wall time over the
steps' (`+105%`: the run took twice its steps' time). The end of the run
holds the train-end work of the kinds above as well. Last, the first
epoch's seconds (from `on_train_begin`) and its validation's, which no
figure counts.

Rows (the presets of `keras-tpugan train`, with these settings):
    demo-w16: the demo's schedule at width 16, 10 epochs (a fast step).
    smoke-w16: the smoke preset at width 16, 8 epochs, no quality scores.
    demo: `make demo` (width 64); `--demo-epochs` epochs (default 25 of
        its 250, the same per-epoch work).
    fast: a model small enough to stand in for a fast device (width 8,
        8 latents, batch 256: an epoch of steps of about 0.2 s on a 2-core
        CPU), the demo's side work, 10 epochs.
"""

import argparse
import collections
import contextlib
import os
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402

from keras_tpugan import callbacks  # noqa: E402
from keras_tpugan.runs import train as train_module  # noqa: E402
from keras_tpugan.runs.config import TrainConfig  # noqa: E402
from keras_tpugan.runs.snapshots import Snapshots  # noqa: E402
from keras_tpugan.runs.timed_backup import TimedBackup  # noqa: E402

# Each kind of side work: the callback classes whose epoch-end (and
# train-end) work it is.
KINDS = {
    "backup": (TimedBackup,),
    "snapshot": (Snapshots,),
    "grid": (callbacks.SampleGrid,),
    "curves": (callbacks.LossCurves,),
    "tensorboard": (keras.callbacks.TensorBoard,),
    "quality": (callbacks.QualityMetrics,),
}
# (The backup of an epoch is written as the next epoch begins, one from the
# middle of an epoch as the next batch begins; the curves keep each step's
# values.)
HOOKS = (
    "on_epoch_begin",
    "on_epoch_end",
    "on_train_end",
    "on_train_batch_begin",
    "on_train_batch_end",
)


def rows(demo_epochs):
    """The rows: name -> (preset, settings)."""
    return {
        "demo-w16": ("demo", {"epochs": 10, "width": 16}),
        "smoke-w16": ("smoke", {"epochs": 8, "width": 16, "quality_every": 0}),
        "demo": ("demo", {"epochs": demo_epochs}),
        "fast": (
            "demo",
            {"epochs": 10, "width": 8, "latent_dim": 8, "batch_size": 256},
        ),
    }


class _Clock(keras.callbacks.Callback):
    """Times the steps of each epoch and `fit`'s validation."""

    def __init__(self, seconds):
        super().__init__()
        self.seconds = seconds
        self.epoch = 0
        self.started = None
        # Side work timed before the epoch's first step since the last epoch
        # ended, and between its steps.
        self.begin_work = self.batch_work = 0.0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch, self.started = epoch, None

    def on_train_batch_begin(self, batch, logs=None):
        if self.started is None:
            self.started = time.perf_counter()
            if self.epoch > 1:  # since the last callback of the epoch before,
                # less the side work timed in this epoch's on_epoch_begin
                between = self.started - self.ended - self.begin_work
                self.seconds["between epochs"].append(between)

    def on_train_batch_end(self, batch, logs=None):
        self.last = time.perf_counter()

    def on_test_begin(self, logs=None):
        self.test_started = time.perf_counter()

    def on_test_end(self, logs=None):
        spent = time.perf_counter() - self.test_started
        self.seconds["validation" if self.epoch > 0 else "first validation"].append(
            spent
        )

    def on_epoch_end(self, epoch, logs=None):
        if epoch > 0:
            self.seconds["steps"].append(self.last - self.started - self.batch_work)
        self.ended = time.perf_counter()  # the last callback: the epoch's end
        self.begin_work = self.batch_work = 0.0


@contextlib.contextmanager
def _timed(seconds, clock):
    """Times every hook of `KINDS` (after the first epoch)."""
    saved = []
    for kind, classes in KINDS.items():
        for cls in classes:
            for hook in HOOKS:
                original = cls.__dict__.get(hook)
                if original is None:
                    continue

                def timed(
                    self, *args, _original=original, _kind=kind, _hook=hook, **kwargs
                ):
                    started = time.perf_counter()
                    try:
                        return _original(self, *args, **kwargs)
                    finally:
                        spent = time.perf_counter() - started
                        if _hook == "on_epoch_begin" or clock.started is None:
                            clock.begin_work += spent
                        elif _hook.startswith("on_train_batch"):
                            clock.batch_work += spent
                        if clock.epoch > 0:
                            seconds[_kind].append(spent)

                saved.append((cls, hook, original))
                setattr(cls, hook, timed)
    try:
        yield
    finally:
        for cls, hook, original in saved:
            setattr(cls, hook, original)


def measure(preset, settings):
    """Trains one row; returns its wall seconds (after the first epoch), the
    seconds of each kind of side work, per call, and the run's summary."""
    config = TrainConfig.preset(preset, **settings)
    seconds = collections.defaultdict(list)
    clock = _Clock(seconds)
    train_begin, second_epoch = [], []

    class SecondEpoch(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            train_begin.append(time.perf_counter())

        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 1:
                second_epoch.append(time.perf_counter())

    with tempfile.TemporaryDirectory() as workdir, _timed(seconds, clock):
        summary = train_module.train(
            config,
            os.path.join(workdir, "run"),
            verbose=0,
            extra_callbacks=[clock, SecondEpoch()],
        )
        done = time.perf_counter()
        wall = done - second_epoch[0]
        seconds["first epoch"].append(second_epoch[0] - train_begin[0])
        seconds["end of run"].append(done - clock.ended)
    return wall, seconds, summary


def _first_and_rest(calls):
    """The first call against the others, where a kind's first call traces or
    compiles what the next ones reuse (validation's step: ", first 530 ms,
    then 250 ms each"); calls that do nothing (not due) are left out."""
    done = [c for c in calls if c >= 1e-3]
    if len(done) < 2:
        return ""
    rest = done[1:]
    return (
        f" (first {done[0] * 1e3:.0f} ms, then {sum(rest) / len(rest) * 1e3:.0f} ms "
        "each)"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    table = rows(25)
    parser.add_argument("--rows", nargs="+", choices=list(table), default=list(table))
    parser.add_argument("--demo-epochs", type=int, default=25)
    args = parser.parse_args(argv)
    table = rows(args.demo_epochs)
    kinds = ["validation", *KINDS]
    results = {}
    for name in args.rows:
        preset, settings = table[name]
        wall, seconds, summary = measure(preset, settings)
        results[name] = (wall, seconds)
        steps = sum(seconds["steps"])
        side = sum(sum(seconds[k]) for k in kinds)
        print(
            f"{name}: wall {wall:.1f} s after the first epoch, steps {steps:.1f} s, "
            f"side work {side:.1f} s ({side / wall:.1%} of the wall time; "
            f"+{(wall - steps) / steps:.0%} over the steps)"
        )
        for kind in kinds:
            calls = seconds[kind]
            if calls:
                print(
                    f"  {kind:<12} {len(calls):>4} calls  "
                    f"{sum(calls) / len(calls) * 1e3:8.1f} ms each  "
                    f"{sum(calls):7.2f} s  {sum(calls) / wall:6.1%} of the wall time"
                    + _first_and_rest(calls)
                )
        between = sum(seconds["between epochs"])
        end = seconds["end of run"][0]
        other = wall - steps - side - between - end
        for part, value in (
            ("between epochs", between),
            ("end of run", end),
            ("other", other),
        ):
            print(f"  {part:<14} {value:32.2f} s  {value / wall:6.1%} of the wall time")
        # Not counted: the first epoch, which traces (or compiles) the steps,
        # validation's among them when it validates.
        first = seconds["first epoch"][0]
        validated = sum(seconds["first validation"])
        print(
            f"  not counted: the first epoch, {first:.2f} s"
            + (f" (its validation {validated:.2f} s)" if validated else "")
        )
        # The figures the side work keeps: the run's last scores.
        final = summary["final"]
        scores = ", ".join(
            f"{key} {final[key]:.2f}"
            for key in ("fcd", "classifier_score", "kid", "precision", "recall")
            if key in final
        )
        print(
            f"  the run: {summary['train_seconds']:.1f} s of training in all"
            + (f"; last scores: {scores}" if scores else "")
        )
    print()
    print("| row | wall s | steps s | side work s | side share | over the steps |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, (wall, seconds) in results.items():
        steps = sum(seconds["steps"])
        side = sum(sum(seconds[k]) for k in kinds)
        print(
            f"| {name} | {wall:.1f} | {steps:.1f} | {side:.2f} | {side / wall:.1%} "
            f"| +{(wall - steps) / steps:.0%} |"
        )
    return results


if __name__ == "__main__":
    main()
