"""The `keras-tpugan` command line: a thin front end over the library.

Each subcommand parses its arguments and calls one importable function
(`train.train`, `sweep.run_sweep`, `tuning.search_batch_size`,
`sample.sample_grid`, `bench.throughput_matrix`), which notebooks call too.
Errors are one line.
"""

import argparse
import json
import sys

EXAMPLES = {
    "train": """examples:
  keras-tpugan train --preset demo --out runs/demo
  keras-tpugan train --preset smoke --set epochs=2 --set batch_size=32 --out runs/smoke
  keras-tpugan train --preset mnist-tpu --out runs/mnist-tpu
""",
    "sweep": """examples:
  keras-tpugan sweep --preset smoke --batch-sizes 32 64 --epochs 2 --out runs/s
  keras-tpugan sweep --preset demo --batch-sizes 64 128 256 512 --epochs 30 \\
      --lr-scaling sqrt --out runs/sweep
  keras-tpugan sweep --preset mnist-tpu --batch-sizes 64 128 256 512 \\
      --out runs/tpu-study
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
""",
    "bench": """examples:
  keras-tpugan bench --batch-sizes 64 128 256 --csv bench.csv
  keras-tpugan bench --replicas 1 2 --precisions mixed_bfloat16 --xla on
""",
}


def _parser():
    parser = argparse.ArgumentParser(
        prog="keras-tpugan",
        description="Train GANs with Keras on TPUs, GPUs and CPUs.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name, help_text, description):
        return commands.add_parser(
            name,
            help=help_text,
            description=description,
            epilog=EXAMPLES[name],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    train = command(
        "train",
        "train a GAN from a preset and overrides",
        "Train a GAN; writes samples, curves, the generator and summary.json "
        "under --out.",
    )
    train.add_argument(
        "--preset", default="demo", help="demo (default), smoke, mnist-tpu"
    )
    train.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting of the preset (repeatable)",
    )
    train.add_argument("--out", required=True, help="run directory")
    train.add_argument("--quiet", action="store_true", help="one line per epoch")

    sweep = command(
        "sweep",
        "the batch-size study: one run per batch size, compared",
        "Train one GAN per batch size (same seed and data) and write "
        "results.csv/json/md and plots under --out.",
    )
    sweep.add_argument("--batch-sizes", type=int, nargs="+", required=True)
    sweep.add_argument("--epochs", type=int, default=None, help="default: the preset's")
    sweep.add_argument(
        "--lr-scaling",
        choices=("none", "linear", "sqrt"),
        default="none",
        help="scale the learning rate with the batch (vs the smallest)",
    )
    sweep.add_argument(
        "--optimizer",
        choices=("adam", "lars", "lamb"),
        default=None,
        help="default: the preset's (adam)",
    )
    sweep.add_argument(
        "--warmup-epochs", type=int, default=None, help="linear learning-rate warm-up"
    )
    sweep.add_argument("--preset", default="demo")
    sweep.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
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
        "search the batch size (and learning rate) with keras-tuner",
        "Search batch sizes with a budget in images seen; writes results.csv/md/"
        "json and quality_vs_time.png under --out.",
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
        "--lr-scaling", choices=("none", "linear", "sqrt"), default="linear"
    )
    tune.add_argument(
        "--tuner", choices=("grid", "random", "bayesian", "hyperband"), default="grid"
    )
    tune.add_argument(
        "--objective", choices=("fcd", "time_to_fcd", "images_per_sec"), default="fcd"
    )
    tune.add_argument(
        "--image-budget", type=int, default=64_000, help="images seen per trial"
    )
    tune.add_argument("--target-fcd", type=float, default=50.0)
    tune.add_argument("--max-trials", type=int, default=None)
    tune.add_argument("--preset", default="demo")
    tune.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    tune.add_argument("--out", required=True)

    bench = command(
        "bench",
        "throughput matrix: precision x XLA x batch size x replicas",
        "Measure training images/s of the default MNIST model on synthetic data.",
    )
    bench.add_argument("--batch-sizes", type=int, nargs="+", default=[64, 128, 256])
    bench.add_argument("--replicas", type=int, nargs="+", default=[1])
    bench.add_argument(
        "--precisions",
        nargs="+",
        default=["float32", "mixed_bfloat16"],
        choices=("float32", "mixed_bfloat16", "mixed_float16"),
    )
    bench.add_argument("--xla", nargs="+", default=["off", "on"], choices=("off", "on"))
    bench.add_argument("--steps", type=int, default=10, help="steps per timing")
    bench.add_argument("--repeats", type=int, default=3, help="timings per cell")
    bench.add_argument("--width", type=int, default=128)
    bench.add_argument("--latent-dim", type=int, default=128)
    bench.add_argument("--csv", default=None, help="also save the table as CSV")
    return parser


def main(argv=None):
    """Runs the CLI.

    Args:
        argv: Arguments (default: `sys.argv[1:]`).

    Returns:
        The exit status: 0 on success, 2 on a usage or input error, 1 when
        the machine ran out of memory.
    """
    args = _parser().parse_args(argv)
    try:
        return _COMMANDS[args.command](args)
    except (ValueError, FileNotFoundError) as e:
        print(f"keras-tpugan: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except Exception as e:
        import tensorflow as tf

        if isinstance(e, tf.errors.ResourceExhaustedError):
            print(
                "keras-tpugan: error: out of memory; use a smaller batch size "
                f"or model ({_one_line(e)})",
                file=sys.stderr,
            )
            return 1
        raise


def _one_line(error):
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _train(args):
    from keras_tpugan.config import TrainConfig
    from keras_tpugan.train import train

    config = TrainConfig.preset(args.preset).override(args.set)
    summary = train(config, args.out, verbose=2 if args.quiet else "auto")
    print(json.dumps(summary, indent=2))
    print(f"keras-tpugan: wrote {args.out}/")
    return 0


def _sweep(args):
    from keras_tpugan.sweep import run_sweep

    rows = run_sweep(
        args.batch_sizes,
        args.out,
        preset=args.preset,
        epochs=args.epochs,
        lr_scaling=args.lr_scaling,
        optimizer=args.optimizer,
        warmup_epochs=args.warmup_epochs,
        overrides=args.set,
    )
    with open(f"{args.out}/results.md") as f:
        print(f.read())
    failed = [r for r in rows if r["status"] != "ok"]
    print(
        f"keras-tpugan: wrote {args.out}/ ({len(rows) - len(failed)} runs ok, "
        f"{len(failed)} failed)"
    )
    return 0


def _tune(args):
    from keras_tpugan.config import TrainConfig
    from keras_tpugan.tuning import search_batch_size

    config = TrainConfig.preset(args.preset).override(args.set)
    best, rows = search_batch_size(
        config.dataset,
        batch_sizes=args.batch_sizes,
        learning_rates=args.learning_rates or [config.learning_rate],
        tuner=args.tuner,
        objective=args.objective,
        max_trials=args.max_trials,
        directory=args.out,
        lr_scaling=args.lr_scaling,
        image_budget=args.image_budget,
        target_fcd=args.target_fcd,
        config=config,
        source=config.source,
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


def _bench(args):
    import tensorflow as tf

    # Several replicas on a CPU-only machine: split the CPU into logical
    # devices before TensorFlow starts using it.
    wanted = max(args.replicas)
    if wanted > 1 and not tf.config.list_physical_devices("GPU"):
        cpu = tf.config.list_physical_devices("CPU")[0]
        configured = tf.config.get_logical_device_configuration(cpu) or []
        try:
            if len(configured) < wanted:
                tf.config.set_logical_device_configuration(
                    cpu, [tf.config.LogicalDeviceConfiguration()] * wanted
                )
        except RuntimeError as e:  # TensorFlow already started
            if len(tf.config.list_logical_devices("CPU")) < wanted:
                raise ValueError(
                    f"Cannot split the CPU into {wanted} devices now: {e}"
                ) from e
    from keras_tpugan.bench import throughput_matrix

    throughput_matrix(
        batch_sizes=args.batch_sizes,
        replicas=args.replicas,
        precisions=args.precisions,
        xla=[x == "on" for x in args.xla],
        steps=args.steps,
        repeats=args.repeats,
        width=args.width,
        latent_dim=args.latent_dim,
        csv_path=args.csv,
    )
    if args.csv:
        print(f"keras-tpugan: wrote {args.csv}")
    return 0


_COMMANDS = {
    "train": _train,
    "sweep": _sweep,
    "tune": _tune,
    "sample": _sample,
    "bench": _bench,
}


if __name__ == "__main__":
    sys.exit(main())
