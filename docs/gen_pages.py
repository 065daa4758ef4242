"""Pages that `mkdocs build` generates (mkdocs-gen-files runs this script).

- `reference/`: one page per public module, rendered by mkdocstrings from
  the docstrings, and the section's navigation (`reference/SUMMARY.md`).
- `guides/cli-help.md`: every subcommand's `--help`, as the installed
  command prints it.
"""

import os
import re
import subprocess
import sys

import mkdocs_gen_files

# The public modules: what `import keras_tpugan` gives, then the lab's
# entry points that the guides teach.
PUBLIC_MODULES = {
    "Library": [
        "keras_tpugan",
        "keras_tpugan.gan",
        "keras_tpugan.gan_optimizer",
        "keras_tpugan.callbacks",
        "keras_tpugan.data",
        "keras_tpugan.distribute",
        "keras_tpugan.metrics",
        "keras_tpugan.models",
        "keras_tpugan.losses",
        "keras_tpugan.penalties",
        "keras_tpugan.augment",
        "keras_tpugan.keyed_dropout",
        "keras_tpugan.precision",
        "keras_tpugan.images",
        "keras_tpugan.large_batch",
        "keras_tpugan.lars",
        "keras_tpugan.warmup",
    ],
    "Runs and studies": [
        "keras_tpugan.runs.config",
        "keras_tpugan.runs.train",
        "keras_tpugan.runs.sample",
        "keras_tpugan.studies.sweep",
        "keras_tpugan.studies.search",
        "keras_tpugan.studies.tuning",
    ],
}


def _reference():
    summary = []
    for section, modules in PUBLIC_MODULES.items():
        summary.append(f"* {section}\n")
        for module in modules:
            page = f"{module.replace('.', '/')}.md"
            with mkdocs_gen_files.open(f"reference/{page}", "w") as f:
                f.write(f"# `{module}`\n\n::: {module}\n")
            summary.append(f"    * [{module}]({page})\n")
    with mkdocs_gen_files.open("reference/SUMMARY.md", "w") as f:
        f.writelines(summary)


def _help(*args):
    env = dict(os.environ, COLUMNS="88")
    return subprocess.run(
        [sys.executable, "-m", "keras_tpugan.cli", *args, "--help"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout


def _cli_help():
    top = _help()
    commands = re.search(r"\{([a-z,-]+)\}", top).group(1).split(",")
    with mkdocs_gen_files.open("guides/cli-help.md", "w") as f:
        f.write(
            "# Every command's help\n\n"
            "What `keras-tpugan --help` and each subcommand's `--help` print "
            "(generated when the site is built). The "
            "[command-line guide](cli.md) shows them at work.\n\n"
        )
        f.write(f"## `keras-tpugan`\n\n```text\n{top}```\n\n")
        for name in commands:
            f.write(f"## `keras-tpugan {name}`\n\n```text\n{_help(name)}```\n\n")


_reference()
_cli_help()
