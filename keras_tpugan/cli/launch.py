"""`keras-tpugan launch`: a command as N processes of one cluster on this host."""

import argparse

EXAMPLES = {
    "launch": """examples:
  keras-tpugan launch --processes 2 -- train --preset smoke --out runs/two
  keras-tpugan launch --processes 2 -- train --backend jax --preset smoke --out runs/j
  keras-tpugan launch --processes 2 -- python my_script.py
""",
}


def add_parsers(command):
    """Adds `launch` to the parser (`command`: see `cli.main`)."""
    launch = command(
        "launch",
        "run a command as N processes of one cluster on this host",
        "Start N processes of a keras-tpugan command (or any program) with the "
        "cluster environment both backends read (TF_CONFIG; "
        "KERAS_DISTRIBUTION_*), stream their output prefixed by rank, and fail "
        "when any process fails, naming it.",
    )
    launch.add_argument(
        "--processes", type=int, required=True, help="processes to start (N)"
    )
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


def _launch(args):
    from keras_tpugan.launch import launcher

    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    return launcher.launch(
        command,
        args.processes,
        grace_seconds=args.grace_seconds,
        pin_cores=not args.no_pin,
    )


COMMANDS = {"launch": _launch}
