"""`keras-tpugan sweep` and `keras-tpugan tune`: the batch-size study, the
ablation grid and the keras-tuner search."""

from keras_tpugan.cli.arguments import (
    add_config_arguments,
    config_from_args,
    set_keys,
)

EXAMPLES = {
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
    "tune": """examples:
  keras-tpugan tune --batch-sizes 32 64 --image-budget 2560 --preset smoke --out runs/t
  keras-tpugan tune --batch-sizes 64 128 256 512 --learning-rates 1e-4 2e-4 \\
      --tuner bayesian --max-trials 6 --objective time_to_fcd --target-fcd 60 \\
      --out runs/tune
  keras-tpugan tune --preset demo --batch-sizes 64 128 256 512 \\
      --space lr_scaling=none,sqrt-adam,linear --objective steps_to_fcd \\
      --target-fcd 80 --image-budget 230400 --evaluations 48 --out runs/large_batch
  keras-tpugan tune --data classes/ --image-size 32 --batch-sizes 64 128 \\
      --objective fcd --image-budget 20000 --out runs/classes-tune
  keras-tpugan tune --data faces/ --image-size 64 --batch-sizes 64 128 \\
      --objective fid --image-budget 20000 --out runs/faces-tune
""",
}


def add_parsers(command):
    """Adds `sweep` and `tune` to the parser (`command`: see `cli.main`)."""
    sweep = command(
        "sweep",
        "the batch-size study, or an ablation over any settings",
        "Train one GAN per batch size (same seed and data), or with --grid one "
        "per combination of settings and seed, and write results.csv/json/md "
        "and plots under --out.",
    )
    sweep.add_argument(
        "--batch-sizes",
        type=int,
        nargs="+",
        default=None,
        help="the global batch sizes of the study, one run each (no default: "
        "required without --grid); in place of train's --batch-size, which the "
        "study varies",
    )
    sweep.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="an ablation axis: any config setting and its values (repeatable; "
        "'+' inside a value stands for a comma: augment=translation+cutout; "
        "default: none, the batch-size study)",
    )
    sweep.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=[0, 1],
        help="with --grid: the seeds of each setting (default: 0 1)",
    )
    sweep.add_argument(
        "--lr-scaling",
        default="none",
        help="none, linear or sqrt: scale the learning rate with the batch (vs "
        "the smallest); none by default here, so that the study varies the "
        "batch alone (tune's default is linear)",
    )
    sweep.add_argument(
        "--optimizer", default=None, help="adam, lars or lamb (default: the preset's)"
    )
    sweep.add_argument(
        "--warmup-epochs",
        type=int,
        default=None,
        help="epochs of linear learning-rate warm-up (default: the preset's)",
    )
    sweep.add_argument(
        "--target-fcd",
        type=float,
        default=None,
        help="score every batch size after the same images and report the steps, "
        "images and seconds to reach this FCD (default: no target)",
    )
    add_config_arguments(sweep, flags=("epochs", "learning_rate"))
    sweep.add_argument(
        "--out", required=True, help="folder for the runs and results.csv/md/json"
    )

    tune = command(
        "tune",
        "search the batch size, learning rate and settings with keras-tuner",
        "Search batch sizes (and any settings, --space) with a budget in images "
        "seen; writes results.csv/md/json and quality_vs_time.png under --out.",
    )
    tune.add_argument(
        "--batch-sizes",
        type=int,
        nargs="+",
        required=True,
        help="the global batch sizes to search (in place of train's --batch-size)",
    )
    tune.add_argument(
        "--learning-rates",
        type=float,
        nargs="+",
        default=None,
        help="base rates to search, scaled by --lr-scaling (in place of "
        "train's --learning-rate; default: the preset's)",
    )
    tune.add_argument(
        "--lr-scaling",
        default="linear",
        help="none, linear, sqrt or sqrt-adam; linear by default here, so that "
        "the batch sizes searched are compared at rates scaled alike (sweep's "
        "default is none)",
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
        "a value stands for a comma), for example --space warmup_epochs=0,2 "
        "(default: the batch sizes and rates only)",
    )
    tune.add_argument(
        "--tuner", default="grid", help="grid (default), random, bayesian, hyperband"
    )
    tune.add_argument(
        "--objective",
        default="time_to_fcd",
        help="time_to_fcd (default: training seconds to --target-fcd), "
        "steps_to_fcd (training steps to it), fcd (at the end of the budget), "
        "fid (the standard FID at the end of the budget: any data, labelled "
        "or not) or images_per_sec",
    )
    tune.add_argument(
        "--image-budget",
        type=int,
        default=64_000,
        help="images seen per trial (in place of --epochs: every batch size "
        "sees the same images)",
    )
    tune.add_argument(
        "--evaluations",
        type=int,
        default=4,
        help="FCD measurements per trial, evenly spread over the budget, each "
        "on 500 generated images (--set quality_images=N for another count)",
    )
    tune.add_argument(
        "--target-fcd",
        type=float,
        default=50.0,
        help="the FCD that time_to_fcd and steps_to_fcd count to (50 here, "
        "set for MNIST's metric classifier: choose one for other data; sweep "
        "has none unless given, as it needs none)",
    )
    tune.add_argument(
        "--max-trials",
        type=int,
        default=None,
        help="trials of the grid, random and bayesian tuners (default: as many "
        "as there are combinations; hyperband sets its own)",
    )
    add_config_arguments(tune, flags=())
    tune.add_argument(
        "--out", required=True, help="folder for the trials and results.csv/md/json"
    )


def _sweep(args):
    from keras_tpugan.studies.ablation import parse_grid, run_ablation
    from keras_tpugan.studies.sweep import run_sweep

    if bool(args.grid) == bool(args.batch_sizes):
        raise ValueError(
            "Expected either --batch-sizes (the batch-size study) or --grid "
            "(an ablation; batch_size can be one of its axes). Received: "
            f"batch_sizes={args.batch_sizes}, grid={args.grid}."
        )
    config = config_from_args(
        args,
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
    from keras_tpugan.studies.ablation import parse_grid
    from keras_tpugan.studies.search import search_batch_size

    config = config_from_args(args)
    # The trials' own count (500) unless --set names one.
    counts = {}
    if "quality_images" in set_keys(args):
        counts["quality_images"] = config.quality_images
    best, _ = search_batch_size(
        config,
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
        **counts,
    )
    with open(f"{args.out}/results.md") as f:
        print(f.read())
    print(f"keras-tpugan: best {best}; wrote {args.out}/")
    return 0


COMMANDS = {"sweep": _sweep, "tune": _tune}
