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
run, and the functions entered. Calls made inside the compiled step do not
appear (traced once), nor do Keras's and TensorFlow's own calls.
"""

import argparse
import collections
import os
import sys
import tempfile

PACKAGES = {
    "data": "keras_tpugan.data",
    "distribute": "keras_tpugan.distribute",
    "image_files": "keras_tpugan.data.image_files",
}
# Where the set-up ends: the first training step.
SETUP_ENDS = ("train_step",)


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
        setup, whole, names = _count(command)
    print("command: keras-tpugan " + " ".join(command[:-2]))
    print(f"{'package':<12} {'set-up':>7} {'whole run':>10}  functions entered")
    for key in PACKAGES:
        entered = ", ".join(f"{n} x{c}" for n, c in names[key].most_common())
        print(f"{key:<12} {setup[key]:>7} {whole[key]:>10}  {entered}")


def _count(command):
    from keras_tpugan.cli.main import main as cli_main

    setup, whole = collections.Counter(), collections.Counter()
    names = {key: collections.Counter() for key in PACKAGES}
    state = {"setup": True}

    def profile(frame, event, arg):
        if event != "call":
            return
        name = frame.f_code.co_name
        if state["setup"] and name in SETUP_ENDS:
            state["setup"] = False
        callee, caller = _module(frame), _module(frame.f_back)
        # The package's own code entering (not TensorFlow calling back into a
        # tf.data function it traces).
        if not (
            callee.startswith("keras_tpugan") and caller.startswith("keras_tpugan")
        ):
            return
        for key, package in PACKAGES.items():
            outside = PACKAGES["data"] if key == "image_files" else package
            if _inside(callee, package) and not _inside(caller, outside):
                whole[key] += 1
                names[key][f"{callee.rsplit('.', 1)[-1]}.{name}"] += 1
                if state["setup"]:
                    setup[key] += 1

    sys.setprofile(profile)
    try:
        status = cli_main(command)
    finally:
        sys.setprofile(None)
    if status != 0:
        raise SystemExit(f"keras-tpugan exited with {status}")
    return setup, whole, names


if __name__ == "__main__":
    main()
