"""The `keras-tpugan` command line: a thin front end over `keras_tpugan.train`."""

import argparse
import json
import sys

TRAIN_EXAMPLE = """example:
  keras-tpugan train --preset demo --out runs/demo
  keras-tpugan train --preset smoke --set epochs=2 --set batch_size=32 --out runs/smoke
"""


def _parser():
    parser = argparse.ArgumentParser(
        prog="keras-tpugan",
        description="Train GANs with Keras on TPUs, GPUs and CPUs.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser(
        "train",
        help="train a GAN from a preset and overrides",
        description="Train a GAN; writes samples, curves, the generator and "
        "summary.json under --out.",
        epilog=TRAIN_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    train.add_argument(
        "--preset", default="demo", help="demo (default), smoke or mnist-tpu"
    )
    train.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting of the preset (repeatable)",
    )
    train.add_argument("--out", required=True, help="run directory")
    train.add_argument(
        "--quiet", action="store_true", help="one line per epoch, no progress bar"
    )
    return parser


def main(argv=None):
    """Runs the CLI.

    Args:
        argv: Arguments (default: `sys.argv[1:]`).

    Returns:
        The exit status: 0 on success, 2 on a usage or input error.
    """
    args = _parser().parse_args(argv)
    try:
        if args.command == "train":
            from keras_tpugan.config import TrainConfig
            from keras_tpugan.train import train

            config = TrainConfig.preset(args.preset).override(args.set)
            summary = train(config, args.out, verbose=2 if args.quiet else "auto")
            print(json.dumps(summary, indent=2))
            print(f"keras-tpugan: wrote {args.out}/")
    except ValueError as e:
        print(f"keras-tpugan: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
