"""What several subcommands share: the preset help, the data arguments and
the `TrainConfig` they make."""

from keras_tpugan.runs.settings_help import EVERYDAY_FLAGS, SETTINGS_HELP

PRESET_HELP = (
    "demo (the default without --data), images (the default with --data: the "
    "demo's recipe at Adam 1e-3, the model sized for --image-size), "
    "demo-conditional, smoke, mnist-tpu"
)


def add_config_arguments(parser, flags=("batch_size", "epochs", "learning_rate")):
    """`--preset`, `--set`, the everyday settings' flags and the data's
    arguments: what `config_from_args` reads.

    Args:
        parser: The subcommand's parser.
        flags: The settings of `EVERYDAY_FLAGS` that get a flag besides the
            ones every command has (`--seed`, `--precision`, `--mirror`).
    """
    parser.add_argument("--preset", default=None, help=PRESET_HELP)
    for flag, setting, kind in EVERYDAY_FLAGS:
        if setting in flags or setting in ("seed", "precision"):
            parser.add_argument(
                flag,
                dest=setting,
                type=kind,
                default=None,
                metavar=setting.split("_")[-1].upper(),
                help=f"{SETTINGS_HELP[setting]} (default: the preset's)",
            )
    parser.add_argument(
        "--mirror",
        dest="xflip",
        action="store_true",
        default=None,
        help=SETTINGS_HELP["xflip"],
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other setting (repeatable); `keras-tpugan settings` lists "
        "them all with their defaults",
    )
    add_data_arguments(parser)


def add_data_arguments(parser):
    """`--data`, `--image-size` and `--channels`: the user's own images."""
    parser.add_argument(
        "--data",
        default=None,
        metavar="PATH_OR_TFDS_NAME",
        help="a folder of images (flat, or a subfolder per class) or a TFDS "
        "name (cifar10, celeb_a, ...) in place of the preset's data (default: "
        "the preset's MNIST)",
    )
    parser.add_argument(
        "--image-size",
        type=int,
        default=None,
        metavar="N",
        help="bring every image to NxN (centre crop, then resize); required "
        "for folders (default: the data's own size)",
    )
    parser.add_argument(
        "--channels",
        type=int,
        choices=(1, 3),
        default=None,
        help="1 (grey) or 3 (RGB); default: as the data",
    )


def set_keys(args):
    """The settings that `--set` names."""
    return {item.split("=", 1)[0].strip() for item in args.set}


def config_from_args(args, **changes):
    """The `TrainConfig` of `--preset`, `--data`, the everyday flags and
    `--set`, with `changes` (those not None) applied; a flag wins over the
    same setting in `--set`."""
    from keras_tpugan.runs.config import TrainConfig

    data = getattr(args, "data", None)
    preset = args.preset or ("demo" if data is None else "images")
    first = {} if data is None else {"dataset": data}
    keys = set_keys(args)
    if (data is not None or "dataset" in keys) and "source" not in keys:
        # Other data than the preset's: its source is found anew (a preset
        # for the offline MNIST subset would refuse any other data).
        first["source"] = "auto"
    for name in ("image_size", "channels", "xflip", *(s for _, s, _ in EVERYDAY_FLAGS)):
        changes.setdefault(name, getattr(args, name, None))
    changes = {k: v for k, v in changes.items() if v is not None}
    # Made at once, so that no half-made config is checked (a folder
    # without the --image-size that comes with it).
    return TrainConfig.preset(
        preset, **{**first, **TrainConfig.parsed(args.set), **changes}
    )
