"""The `keras-tpugan` command line: argument parsing and printing only.

Each subcommand parses its arguments into a `TrainConfig` (or typed
arguments) and calls one importable function (`train.train`,
`sweep.run_sweep`, `tuning.search_batch_size`, `sample.sample_grid`,
`bench.throughput_matrix`), which notebooks call too. Errors are one line.
TensorFlow's native start-up logs are silenced (see
`keras_tpugan.native_logs`) unless `--verbose` or `KERAS_TPUGAN_VERBOSE=1`
is given.
"""

import argparse
import dataclasses
import json
import os
import sys
import warnings

from keras_tpugan import backends
from keras_tpugan.backends import BACKENDS
from keras_tpugan.precision import POLICIES
from keras_tpugan.reports import first_line
from keras_tpugan.trainers.base import ALL_REDUCE_DTYPES

# The package's own files: their warnings print as one line (`main`).
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep

PRESET_HELP = (
    "demo (the default without --data), images (the default with --data: the "
    "demo's recipe at Adam 1e-3, the model sized for --image-size), "
    "demo-conditional, smoke, mnist-tpu"
)


EXAMPLES = {
    "train": """examples:
  keras-tpugan train --preset demo --out runs/demo
  keras-tpugan train --preset smoke --set epochs=2 --set batch_size=32 --out runs/smoke
  keras-tpugan train --preset mnist-tpu --out runs/mnist-tpu
  keras-tpugan train --backend jax --preset mnist-tpu --out runs/mnist-tpu-jax
  keras-tpugan train --data photos/ --image-size 64 --out runs/photos
  keras-tpugan train --data cifar10 --image-size 32 --preset smoke --out runs/c10
  keras-tpugan train --data photos/ --image-size 64 --time-budget 3600 --out runs/p
  keras-tpugan train --data photos/ --image-size 64 --resume --out runs/p
""",
    "sweep": """examples:
  keras-tpugan sweep --preset smoke --batch-sizes 32 64 --epochs 2 --out runs/s
  keras-tpugan sweep --preset demo --grid augment=none,translation+cutout \\
      --grid d_norm=none,spectral --seeds 0 1 --out runs/ablation
  keras-tpugan sweep --preset demo --batch-sizes 64 128 256 512 --epochs 30 \\
      --lr-scaling sqrt --out runs/sweep
  keras-tpugan sweep --preset mnist-tpu --batch-sizes 64 128 256 512 \\
      --out runs/tpu-study
  keras-tpugan sweep --data photos/ --image-size 32 --batch-sizes 64 128 \\
      --epochs 20 --out runs/photos-sweep
""",
    "sample": """examples:
  keras-tpugan sample --model runs/demo --num 64 --out grid.png
  keras-tpugan sample --model runs/cond/generator.keras --labels 3 3 3 7 7 7 --num 6 \\
      --out sevens.png
""",
    "tune": """examples:
  keras-tpugan tune --batch-sizes 32 64 --image-budget 2560 --preset smoke --out runs/t
  keras-tpugan tune --batch-sizes 64 128 256 512 --learning-rates 1e-4 2e-4 \\
      --tuner bayesian --max-trials 6 --objective time_to_fcd --target-fcd 60 \\
      --out runs/tune
  keras-tpugan tune --preset demo --batch-sizes 64 128 256 512 \\
      --space lr_scaling=none,sqrt-adam,linear --objective steps_to_fcd \\
      --target-fcd 80 --image-budget 230400 --evaluations 48 --out runs/large_batch
  keras-tpugan tune --data photos/ --image-size 32 --batch-sizes 64 128 \\
      --objective fcd --image-budget 20000 --out runs/photos-tune
""",
    "bench": """examples:
  keras-tpugan bench --batch-sizes 64 128 256 --csv bench.csv
  keras-tpugan bench --replicas 1 2 --precisions mixed_bfloat16 --xla on
  keras-tpugan bench --backend tensorflow jax --batch-sizes 64 128 --csv both.csv
  keras-tpugan bench --peers --csv peers.csv
  keras-tpugan bench --processes 1 2 --precisions float32
  keras-tpugan bench --accelerator --out runs/accelerator
""",
    "launch": """examples:
  keras-tpugan launch --processes 2 -- train --preset smoke --out runs/two
  keras-tpugan launch --processes 2 -- train --backend jax --preset smoke --out runs/j
  keras-tpugan launch --processes 2 -- python my_script.py
""",
}


def _parser():
    parser = argparse.ArgumentParser(
        prog="keras-tpugan",
        description="Train GANs with Keras on TPUs, GPUs and CPUs.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name, help_text, description):
        sub = commands.add_parser(
            name,
            help=help_text,
            description=description,
            epilog=EXAMPLES[name],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sub.add_argument(
            "--verbose",
            action="store_true",
            help="show TensorFlow's native start-up logs (also: "
            "KERAS_TPUGAN_VERBOSE=1)",
        )
        if name == "bench":
            sub.add_argument(
                "--backend",
                nargs="+",
                choices=BACKENDS,
                default=None,
                help="Keras backend(s); several are measured side by side, "
                "each in its own process (default: KERAS_BACKEND or tensorflow)",
            )
        else:
            sub.add_argument(
                "--backend",
                choices=BACKENDS,
                default=None,
                help="Keras backend (default: KERAS_BACKEND or tensorflow)",
            )
        return sub

    train = command(
        "train",
        "train a GAN from a preset and overrides",
        "Train a GAN; writes samples, curves, the generator and summary.json "
        "under --out.",
    )
    train.add_argument("--preset", default=None, help=PRESET_HELP)
    train.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting of the preset (repeatable)",
    )
    _add_data_arguments(train)
    train.add_argument(
        "--snapshot-every",
        type=int,
        default=None,
        metavar="K",
        help="save the whole GAN every K epochs and at the end (default 10; 0: "
        "at the end only)",
    )
    train.add_argument(
        "--time-budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop at the end of the epoch in which this much training time "
        "has passed (continue later with --resume)",
    )
    train.add_argument(
        "--resume",
        action="store_true",
        help="continue the unfinished run in --out from its last completed epoch",
    )
    train.add_argument("--out", required=True, help="run directory")
    train.add_argument("--quiet", action="store_true", help="one line per epoch")

    sweep = command(
        "sweep",
        "the batch-size study, or an ablation over any settings",
        "Train one GAN per batch size (same seed and data), or with --grid one "
        "per combination of settings and seed, and write results.csv/json/md "
        "and plots under --out.",
    )
    sweep.add_argument("--batch-sizes", type=int, nargs="+", default=None)
    sweep.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="an ablation axis: any config setting and its values (repeatable; "
        "'+' inside a value stands for a comma: augment=translation+cutout)",
    )
    sweep.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=[0, 1],
        help="with --grid: the seeds of each setting (default: 0 1)",
    )
    sweep.add_argument("--epochs", type=int, default=None, help="default: the preset's")
    sweep.add_argument(
        "--lr-scaling",
        default="none",
        help="none (default), linear or sqrt: scale the learning rate with the "
        "batch (vs the smallest)",
    )
    sweep.add_argument(
        "--optimizer", default=None, help="adam, lars or lamb (default: the preset's)"
    )
    sweep.add_argument(
        "--warmup-epochs", type=int, default=None, help="linear learning-rate warm-up"
    )
    sweep.add_argument(
        "--target-fcd",
        type=float,
        default=None,
        help="score every batch size after the same images and report the steps, "
        "images and seconds to reach this FCD",
    )
    sweep.add_argument("--preset", default=None, help=PRESET_HELP)
    sweep.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    _add_data_arguments(sweep)
    sweep.add_argument("--out", required=True)

    sample = command(
        "sample",
        "write a grid of images from a saved generator",
        "Load a generator (a run directory or a .keras file) and write a PNG grid.",
    )
    sample.add_argument("--model", required=True, help="run directory or .keras file")
    sample.add_argument("--num", type=int, default=64)
    sample.add_argument("--labels", type=int, nargs="+", default=None)
    sample.add_argument("--seed", type=int, default=0)
    sample.add_argument("--out", required=True, help="output PNG")

    tune = command(
        "tune",
        "search the batch size, learning rate and settings with keras-tuner",
        "Search batch sizes (and any settings, --space) with a budget in images "
        "seen; writes results.csv/md/json and quality_vs_time.png under --out.",
    )
    tune.add_argument("--batch-sizes", type=int, nargs="+", required=True)
    tune.add_argument(
        "--learning-rates",
        type=float,
        nargs="+",
        default=None,
        help="base rates (default: the preset's)",
    )
    tune.add_argument(
        "--lr-scaling",
        default="linear",
        help="none, linear (default), sqrt or sqrt-adam",
    )
    tune.add_argument(
        "--base-batch-size",
        type=int,
        default=None,
        help="the batch size the preset's learning rate is meant for, which "
        "--lr-scaling scales from (default: the smallest of --batch-sizes)",
    )
    tune.add_argument(
        "--space",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="also search this setting over these values (repeatable; + inside "
        "a value stands for a comma), for example --space warmup_epochs=0,2",
    )
    tune.add_argument(
        "--tuner", default="grid", help="grid (default), random, bayesian, hyperband"
    )
    tune.add_argument(
        "--objective",
        default="time_to_fcd",
        help="time_to_fcd (default: training seconds to --target-fcd), "
        "steps_to_fcd (training steps to it), fcd (at the end of the budget) "
        "or images_per_sec",
    )
    tune.add_argument(
        "--image-budget", type=int, default=64_000, help="images seen per trial"
    )
    tune.add_argument(
        "--evaluations",
        type=int,
        default=4,
        help="FCD measurements per trial, evenly spread over the budget",
    )
    tune.add_argument("--target-fcd", type=float, default=50.0)
    tune.add_argument("--max-trials", type=int, default=None)
    tune.add_argument("--preset", default=None, help=PRESET_HELP)
    tune.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    _add_data_arguments(tune)
    tune.add_argument("--out", required=True)

    bench = command(
        "bench",
        "throughput matrix: precision x XLA x batch size x replicas",
        "Measure training images/s of the default MNIST model on synthetic data.",
    )
    bench.add_argument(
        "--batch-sizes",
        type=int,
        nargs="+",
        default=None,
        help="default: 64 128 256 (with --peers: 16 64 128 512)",
    )
    bench.add_argument("--replicas", type=int, nargs="+", default=[1])
    bench.add_argument(
        "--precisions",
        nargs="+",
        default=["float32", "mixed_bfloat16"],
        choices=POLICIES,
    )
    bench.add_argument(
        "--xla",
        nargs="+",
        default=None,
        choices=("off", "on", "auto"),
        help="XLA settings (default: off on; with --processes: auto)",
    )
    bench.add_argument(
        "--steps",
        type=int,
        default=None,
        help="steps per timing (default 10; with --peers 2,048 images' worth)",
    )
    bench.add_argument(
        "--repeats", type=int, default=3, help="timings per cell (rounds of --peers)"
    )
    bench.add_argument(
        "--peers",
        action="store_true",
        help="instead: the TF DCGAN tutorial loop and the keras-io train_step "
        "pattern beside keras_tpugan's modes, same models, interleaved rounds "
        "(on JAX: the tutorial's step as a jax.jit loop; no keras-io row)",
    )
    bench.add_argument(
        "--profile",
        action="store_true",
        help="with --peers: instead of timing, trace --steps steps of each mode "
        "(default 16) with the backend's profiler and list kernel time per step "
        "by op type",
    )
    bench.add_argument(
        "--processes",
        type=int,
        nargs="+",
        default=None,
        help="instead: weak scaling over this many processes (for example 1 2) "
        "on this host, each pinned to the same number of cores, at a fixed "
        "batch per process (the first --batch-sizes, default 64; one "
        "--precisions and --xla; width and latent 64 unless given)",
    )
    bench.add_argument(
        "--all-reduce-dtype",
        choices=ALL_REDUCE_DTYPES,
        default="float32",
        help="with --processes: the type the gradients cross the processes in",
    )
    bench.add_argument("--width", type=int, default=None, help="default 128")
    bench.add_argument("--latent-dim", type=int, default=None, help="default 128")
    bench.add_argument("--csv", default=None, help="also save the table as CSV")
    bench.add_argument(
        "--accelerator",
        action="store_true",
        help="instead: the accelerator benchmark on every JAX device (images/s "
        "and model FLOP utilisation of two DCGANs, float32 and bfloat16 at "
        "batch 64-512 and the largest that fits; steps_per_execution; the "
        "seed's MNIST batch-size study), written under --out as CSV and "
        "Markdown; runs on JAX",
    )
    bench.add_argument(
        "--smoke",
        action="store_true",
        help="with --accelerator: about a minute on a CPU, small networks",
    )
    bench.add_argument(
        "--budget-seconds",
        type=float,
        default=480.0,
        help="with --accelerator: skip the cells that would start later",
    )
    bench.add_argument(
        "--out", default=None, help="with --accelerator (default runs/accelerator)"
    )
    _add_launch(command)
    return parser


def _add_launch(command):
    launch = command(
        "launch",
        "run a command as N processes of one cluster on this host",
        "Start N processes of a keras-tpugan command (or any program) with the "
        "cluster environment both backends read (TF_CONFIG; "
        "KERAS_DISTRIBUTION_*), stream their output prefixed by rank, and fail "
        "when any process fails, naming it.",
    )
    launch.add_argument("--processes", type=int, required=True)
    launch.add_argument(
        "--grace-seconds",
        type=float,
        default=60.0,
        help="after a process fails, how long the others may take to end "
        "before they are killed (default 60)",
    )
    launch.add_argument(
        "--no-pin",
        action="store_true",
        help="do not pin each process to an equal share of the cores",
    )
    launch.add_argument("argv", nargs=argparse.REMAINDER, help="-- COMMAND ...")


def main(argv=None):
    """Runs the CLI.

    Args:
        argv: Arguments (default: `sys.argv[1:]`).

    Returns:
        The exit status: 0 on success, 2 on a usage or input error, 1 when
        the machine ran out of memory.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    format_warning = warnings.formatwarning
    warnings.formatwarning = _one_line_warnings(format_warning)
    try:
        status = _run(argv)
    finally:
        warnings.formatwarning = format_warning
    distribute = sys.modules.get("keras_tpugan.distribute")
    if distribute is not None:
        # A multi-process iterator still being deleted would abort the
        # process when Python finalizes: it leaves with its status instead.
        distribute.end_process(status)
    return status


def _one_line_warnings(format_warning):
    """A `warnings.formatwarning` that prints this package's warnings as one
    `keras-tpugan: warning: ...` line: their message says what to do, and
    the path and source line Python adds would be the package's own code.
    Other warnings (Keras's, TensorFlow's) keep `format_warning`'s form."""

    def formatted(message, category, filename, lineno, line=None):
        if os.path.abspath(filename).startswith(_PACKAGE_DIR):
            return f"keras-tpugan: warning: {message}\n"
        return format_warning(message, category, filename, lineno, line)

    return formatted


def _run(argv):
    args = _parser().parse_args(argv)
    try:
        if args.command == "bench" and args.backend and len(args.backend) > 1:
            return _bench(args)
        backend = args.backend[0] if isinstance(args.backend, list) else args.backend
        if args.command == "bench" and args.accelerator:
            if backend not in (None, "jax"):
                raise ValueError(
                    "Expected --backend jax (or none) with --accelerator: the "
                    f"accelerator benchmark runs on JAX. Received: --backend {backend}."
                )
            backend = "jax"
        if not backends.runs_on(backend):
            return backends.run_cli(backend, argv)
        return _COMMANDS[args.command](args)
    except (ValueError, FileNotFoundError) as e:
        print(f"keras-tpugan: error: {first_line(e, limit=None)}", file=sys.stderr)
        return 2
    except Exception as e:
        from keras_tpugan import distribute

        if distribute.is_out_of_memory(e):
            print(
                "keras-tpugan: error: out of memory; use a smaller batch size "
                f"or model ({first_line(e, limit=None)})",
                file=sys.stderr,
            )
            return 1
        raise


def _add_data_arguments(parser):
    """`--data`, `--image-size` and `--channels`: the user's own images."""
    parser.add_argument(
        "--data",
        default=None,
        metavar="PATH_OR_TFDS_NAME",
        help="a folder of images (flat, or a subfolder per class) or a TFDS "
        "name (cifar10, celeb_a, ...) in place of the preset's data",
    )
    parser.add_argument(
        "--image-size",
        type=int,
        default=None,
        metavar="N",
        help="bring every image to NxN (centre crop, then resize); required "
        "for folders",
    )
    parser.add_argument(
        "--channels",
        type=int,
        choices=(1, 3),
        default=None,
        help="1 (grey) or 3 (RGB); default: as the data",
    )


def _config(args, **changes):
    from keras_tpugan.config import TrainConfig

    data = getattr(args, "data", None)
    preset = args.preset or ("demo" if data is None else "images")
    config = TrainConfig.preset(preset)
    if data is not None:
        config = dataclasses.replace(config, dataset=data)
    keys = {item.split("=", 1)[0].strip() for item in args.set}
    if (data is not None or "dataset" in keys) and "source" not in keys:
        # Other data than the preset's: its source is found anew (a preset
        # for the offline MNIST subset would refuse any other data).
        config = dataclasses.replace(config, source="auto")
    config = config.override(args.set)
    changes["image_size"] = getattr(args, "image_size", None)
    changes["channels"] = getattr(args, "channels", None)
    changes = {k: v for k, v in changes.items() if v is not None}
    return dataclasses.replace(config, **changes)


def _train(args):
    from keras_tpugan.train import train

    summary = train(
        _config(args, snapshot_every=args.snapshot_every),
        args.out,
        verbose=2 if args.quiet else "auto",
        resume=args.resume,
        time_budget_seconds=args.time_budget,
    )
    print(json.dumps(summary, indent=2))
    print(f"keras-tpugan: wrote {args.out}/")
    if summary["stopped_by_time_budget"]:
        print(
            f"keras-tpugan: stopped by --time-budget after epoch "
            f"{summary['epochs_completed']} of {summary['epochs']}; to continue, "
            "run the same command" + ("" if args.resume else " with --resume")
        )
    return 0


def _sweep(args):
    from keras_tpugan.ablation import parse_grid, run_ablation
    from keras_tpugan.sweep import run_sweep

    if bool(args.grid) == bool(args.batch_sizes):
        raise ValueError(
            "Expected either --batch-sizes (the batch-size study) or --grid "
            "(an ablation; batch_size can be one of its axes). Received: "
            f"batch_sizes={args.batch_sizes}, grid={args.grid}."
        )
    config = _config(
        args,
        epochs=args.epochs,
        optimizer=args.optimizer,
        warmup_epochs=args.warmup_epochs,
        lr_scaling=args.lr_scaling,
        target_fcd=args.target_fcd,
    )
    if args.grid:
        rows = run_ablation(config, parse_grid(args.grid), args.out, seeds=args.seeds)
    else:
        rows = run_sweep(config, args.batch_sizes, args.out)
    with open(f"{args.out}/results.md") as f:
        print(f.read())
    failed = [r for r in rows if r["status"] != "ok"]
    print(
        f"keras-tpugan: wrote {args.out}/ ({len(rows) - len(failed)} runs ok, "
        f"{len(failed)} failed)"
    )
    return 0


def _tune(args):
    from keras_tpugan.ablation import parse_grid
    from keras_tpugan.tuning import search_batch_size

    best, _ = search_batch_size(
        _config(args),
        batch_sizes=args.batch_sizes,
        learning_rates=args.learning_rates,
        tuner=args.tuner,
        objective=args.objective,
        max_trials=args.max_trials,
        directory=args.out,
        lr_scaling=args.lr_scaling,
        base_batch_size=args.base_batch_size,
        space=parse_grid(args.space, option="--space"),
        image_budget=args.image_budget,
        evaluations=args.evaluations,
        target_fcd=args.target_fcd,
    )
    with open(f"{args.out}/results.md") as f:
        print(f.read())
    print(f"keras-tpugan: best {best}; wrote {args.out}/")
    return 0


def _sample(args):
    from keras_tpugan.sample import sample_grid

    if args.num < 1:
        raise ValueError(f"Expected --num >= 1. Received: {args.num}.")
    sample_grid(args.model, args.out, num=args.num, labels=args.labels, seed=args.seed)
    print(f"keras-tpugan: wrote {args.out}")
    return 0


# `--xla` on the command line, as `jit_compile`.
_XLA = {"on": True, "off": False, "auto": "auto"}


def _bench(args):
    from keras_tpugan import bench

    if args.accelerator:
        from keras_tpugan import accelerator_bench

        out = args.out or os.path.join("runs", "accelerator")
        accelerator_bench.run_benchmark(
            out, smoke=args.smoke, budget_seconds=args.budget_seconds
        )
        print(f"keras-tpugan: wrote {out}/accelerator.csv and accelerator.md")
        return 0
    if args.smoke or args.out:
        raise ValueError(
            "Expected --smoke and --out with --accelerator only. Received: "
            "them without --accelerator."
        )
    if args.profile and not args.peers:
        raise ValueError(
            "Expected --profile with --peers (it profiles the peers "
            "benchmark's modes). Received: --profile alone. Add --peers."
        )
    if args.peers:
        return _peers(args)
    if args.processes:
        return _weak_scaling(args)
    kwargs = dict(
        batch_sizes=args.batch_sizes or [64, 128, 256],
        replicas=args.replicas,
        precisions=args.precisions,
        xla=[_XLA[x] for x in args.xla or ["off", "on"]],
        steps=args.steps or 10,
        repeats=args.repeats,
        width=args.width or 128,
        latent_dim=args.latent_dim or 128,
        csv_path=args.csv,
    )
    if args.backend and len(args.backend) > 1:
        bench.throughput_across_backends(args.backend, **kwargs)
    else:
        bench.throughput_matrix(**kwargs)
    if args.csv:
        print(f"keras-tpugan: wrote {args.csv}")
    return 0


def _weak_scaling(args):
    from keras_tpugan.scaling import weak_scaling

    xla = args.xla or ["auto"]
    for flag, values in (("--precisions", args.precisions), ("--xla", xla)):
        if len(values) != 1:
            raise ValueError(
                f"Expected one value of {flag} with --processes. Received: "
                f"{' '.join(values)}. For example --precisions float32 --xla on."
            )
    weak_scaling(
        processes=args.processes,
        batch_size=(args.batch_sizes or [64])[0],
        precision=args.precisions[0],
        xla=_XLA[xla[0]],
        steps=args.steps or 20,
        repeats=args.repeats,
        width=args.width or 64,
        latent_dim=args.latent_dim or 64,
        all_reduce_dtype=args.all_reduce_dtype,
        csv_path=args.csv,
    )
    if args.csv:
        print(f"keras-tpugan: wrote {args.csv}")
    return 0


def _peers(args):
    from keras_tpugan import peers, reports, step_profile

    if args.profile:
        rows = step_profile.profile_modes(
            batch_sizes=args.batch_sizes or [16, 128],
            steps=args.steps or 16,
            width=args.width or 128,
        )
        for line in reports.profile_table(rows):
            print(line)
        if args.csv:
            reports.write_csv(rows, args.csv)
            print(f"keras-tpugan: wrote {args.csv}")
        return 0
    peers.peers_table(
        batch_sizes=args.batch_sizes or [16, 64, 128, 512],
        steps=args.steps,
        rounds=args.repeats,
        width=args.width or 128,
        csv_path=args.csv,
    )
    if args.csv:
        print(f"keras-tpugan: wrote {args.csv}")
    return 0


def _launch(args):
    from keras_tpugan import launcher

    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    return launcher.launch(
        command,
        args.processes,
        grace_seconds=args.grace_seconds,
        pin_cores=not args.no_pin,
    )


_COMMANDS = {
    "train": _train,
    "sweep": _sweep,
    "tune": _tune,
    "sample": _sample,
    "bench": _bench,
    "launch": _launch,
}


if __name__ == "__main__":
    sys.exit(main())
