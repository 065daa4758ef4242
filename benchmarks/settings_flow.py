"""How often a `train` run enters the data and distribution packages.

Usage:
    python benchmarks/settings_flow.py
    python benchmarks/settings_flow.py --args train --preset smoke --set epochs=1

Runs one `keras-tpugan` command in this process under `sys.setprofile`, and
counts the ENTRIES into each of `keras_tpugan.data`, `keras_tpugan.distribute`
and `keras_tpugan.data.image_files`: calls of one of their functions from the
package's own code outside them (outside `data` for `image_files`). It prints
them for the set-up (everything before the first training step: the CLI,
`prepare`, building and compiling the GAN, `fit`'s checks) and for the whole
run, and the functions entered; "of which run" counts the set-up's entries
from the CLI and `keras_tpugan.runs` (the settings on their way down), the
rest being the GAN's `fit` checking and placing its input. A context
manager counts once, entered from the `with` that opens it (`--callers`
lists every entry with the line it came from). Calls made inside the
compiled step do not appear (traced once), nor do Keras's and TensorFlow's
own calls.
"""

import argparse
import collections
import inspect
import os
import sys
import tempfile

PACKAGES = {
    "data": "keras_tpugan.data",
    "distribute": "keras_tpugan.distribute",
    "image_files": "keras_tpugan.data.image_files",
}
# The settings' way down: the CLI and the run's set-up (`prepare`, `train`).
RUN_PATH = ("keras_tpugan.cli", "keras_tpugan.runs")
# Where the set-up ends: the first training step (or the callbacks told of
# it: under MirroredStrategy the step runs in replica threads, unprofiled).
SETUP_ENDS = ("train_step", "on_train_batch_begin")


def _module(frame):
    return frame.f_globals.get("__name__", "") if frame is not None else ""


def _inside(module, package):
    return module == package or module.startswith(package + ".")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--args",
        nargs=argparse.REMAINDER,
        default=None,
        help="the keras-tpugan command (default: train --preset smoke "
        "--set epochs=1 --set quality_every=0)",
    )
    parser.add_argument(
        "--callers",
        action="store_true",
        help="also list, for each function entered, the caller it came from",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as out:
        command = args.args or [
            "train",
            "--preset",
            "smoke",
            "--set",
            "epochs=1",
            "--set",
            "quality_every=0",
        ]
        if "--out" not in command:
            command = [*command, "--out", os.path.join(out, "run")]
        setup, whole, names, callers = _count(command)
    print("command: keras-tpugan " + " ".join(command[:-2]))
    print(
        f"{'package':<12} {'set-up':>7} {'of which run':>13} {'whole run':>10}"
        "  functions entered"
    )
    for key in PACKAGES:
        entered = ", ".join(f"{n} x{c}" for n, c in names[key].most_common())
        print(
            f"{key:<12} {setup[key]:>7} {setup[key, 'run']:>13} {whole[key]:>10}"
            f"  {entered}"
        )
    print(
        "(set-up: before the first training step; of which run: entered from "
        "the CLI and keras_tpugan.runs, the settings' way down; the rest is the "
        "GAN's fit checking and placing its input)"
    )
    if args.callers:
        print("\ncallee <- caller")
        for (callee, caller), count in sorted(callers.items()):
            print(f"  {callee} <- {caller} x{count}")


def _count(command):
    from keras_tpugan.cli.main import main as cli_main

    setup, whole = collections.Counter(), collections.Counter()
    names = {key: collections.Counter() for key in PACKAGES}
    callers = collections.Counter()
    generators = {}
    state = {"setup": True}

    def profile(frame, event, arg):
        if event != "call":
            return
        name = frame.f_code.co_name
        if state["setup"] and name in SETUP_ENDS:
            state["setup"] = False
        back = frame.f_back
        # A context manager is entered from contextlib: its caller is the
        # frame that entered the `with`.
        while back is not None and _module(back) == "contextlib":
            back = back.f_back
        callee, caller = _module(frame), _module(back)
        # The package's own code entering (not TensorFlow calling back into a
        # tf.data function it traces).
        if not (
            callee.startswith("keras_tpugan") and caller.startswith("keras_tpugan")
        ):
            return
        if frame.f_code.co_flags & inspect.CO_GENERATOR:
            # A generator is "called" again at each resumption: count its first.
            if id(frame) in generators:
                return
            generators[id(frame)] = frame  # held, so that its id is not reused
        for key, package in PACKAGES.items():
            outside = PACKAGES["data"] if key == "image_files" else package
            if _inside(callee, package) and not _inside(caller, outside):
                whole[key] += 1
                entered = f"{callee.rsplit('.', 1)[-1]}.{name}"
                names[key][entered] += 1
                callers[entered, f"{caller}.{back.f_code.co_name}:{back.f_lineno}"] += 1
                if state["setup"]:
                    setup[key] += 1
                    if caller.startswith(RUN_PATH):
                        setup[key, "run"] += 1

    sys.setprofile(profile)
    try:
        status = cli_main(command)
    finally:
        sys.setprofile(None)
    if status != 0:
        raise SystemExit(f"keras-tpugan exited with {status}")
    return setup, whole, names, callers


if __name__ == "__main__":
    main()
