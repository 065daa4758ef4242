"""The `keras-tpugan` command line: argument parsing and printing only.

Each subcommand parses its arguments into a `TrainConfig` (or typed
arguments) and calls one importable function (`train.train`,
`sweep.run_sweep`, `search.search_batch_size`, `sample.sample_grid`,
`throughput.throughput_matrix`), which notebooks call too. Errors are one line.
The subcommands' parsers and handlers live by group: `cli.run` (train,
sample), `cli.study` (sweep, tune), `cli.bench` and `cli.launch`; what they
share in `cli.arguments`.
TensorFlow's native start-up logs are silenced (see
`keras_tpugan.native_logs`) unless `--verbose` or `KERAS_TPUGAN_VERBOSE=1`
is given.
"""

import argparse
import errno
import os
import re
import shutil
import sys
import tempfile
import traceback
import warnings

import keras_tpugan
from keras_tpugan import __version__
from keras_tpugan.cli import bench as bench_commands
from keras_tpugan.cli import launch as launch_commands
from keras_tpugan.cli import run as run_commands
from keras_tpugan.cli import study as study_commands
from keras_tpugan.launch import backends
from keras_tpugan.launch.backends import BACKENDS
from keras_tpugan.runs.results import first_line

# The package's own files: their warnings print as one line (`main`).
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

# Each group of subcommands: its parsers, handlers and examples.
_GROUPS = (run_commands, study_commands, bench_commands, launch_commands)
EXAMPLES = {name: text for group in _GROUPS for name, text in group.EXAMPLES.items()}
_COMMANDS = {name: fn for group in _GROUPS for name, fn in group.COMMANDS.items()}


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the examples' layout, and shows each flag's default where it
    has one and its help does not say it."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if (
            action.option_strings
            and default not in (None, False, [], argparse.SUPPRESS)
            and "default" not in text
        ):
            shown = (
                " ".join(map(str, default)) if isinstance(default, list) else default
            )
            text += f" (default: {shown})"
        return text


def _parser():
    parser = argparse.ArgumentParser(
        prog="keras-tpugan",
        description="Train GANs with Keras on TPUs, GPUs and CPUs.",
    )
    parser.add_argument(
        "--version", action="version", version=f"keras-tpugan {__version__}"
    )
    commands = parser.add_subparsers(dest="command", required=True)

    # What each group's `add_parsers(command)` calls: adds a subcommand with
    # the arguments every one takes, and returns its parser.
    def command(name, help_text, description):
        sub = commands.add_parser(
            name,
            help=help_text,
            description=description,
            epilog=EXAMPLES[name],
            formatter_class=_HelpFormatter,
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

    for group in _GROUPS:
        group.add_parsers(command)
    return parser


def main(argv=None):
    """Runs the CLI.

    Args:
        argv: Arguments (default: `sys.argv[1:]`).

    Returns:
        The exit status: 0 on success, 2 on a usage or input error, 1 when
        the machine ran out of memory or a write was refused (no space left,
        no permission: one line names the file and the free space, and
        the traceback goes to `error.log` in the run folder).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    format_warning = warnings.formatwarning
    warnings.formatwarning = _one_line_warnings(format_warning)
    try:
        status = _run(argv)
    finally:
        warnings.formatwarning = format_warning
    # A multi-process iterator still being deleted would abort the process
    # when Python finalizes: it leaves with its status instead (returns at
    # once when the run had none).
    from keras_tpugan import distribute

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
        # Keras, TensorFlow and the package's API only now: `--help` and
        # `--version` answer without them.
        keras_tpugan._import_api()
        if args.command == "bench" and args.backend and len(args.backend) > 1:
            return _COMMANDS["bench"](args)
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
    except Exception as e:
        _leave_if_a_process_is_lost(e, args)
        if isinstance(e, (ValueError, FileNotFoundError)):
            print(f"keras-tpugan: error: {first_line(e, limit=None)}", file=sys.stderr)
            return 2
        from keras_tpugan import distribute

        failed_write = _failed_write(e)
        if failed_write is not None:
            _report_failed_write(e, *failed_write, args)
            return 1
        if distribute.is_out_of_memory(e):
            print(
                "keras-tpugan: error: out of memory; use a smaller batch size "
                f"or model ({first_line(e, limit=None)})",
                file=sys.stderr,
            )
            return 1
        raise


def _leave_if_a_process_is_lost(error, args):
    """When `error` says a peer process of the run is gone: one line, the
    traceback in `error.log`, and status 1 at once (the exit handlers would
    wait for the lost process or, on JAX, abort). Only a run that started
    several processes has imported `distribute.lost`; otherwise (a usage
    error before Keras is imported, say) this returns at once."""
    lost = sys.modules.get("keras_tpugan.distribute.lost")
    if lost is not None and lost.lost_process(error) is not None:
        lost.leave_after_lost_process(error, status=1, log=_write_trace(error, args))


# The errors of a write that more room or another folder would let through.
_WRITE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}


def _failed_write(error):
    """`(path or None, strerror)` when `error` (or one it was raised from)
    is a write refused for want of space or permission, else None.

    HDF5 (the backups' weights) reports its I/O errors in its own words
    ("file write failed: ..., filename = '...', errno = 28, ..."): the
    errno and the file are read from them."""
    while error is not None:
        if isinstance(error, OSError):
            code, path = error.errno, error.filename
            if code is None:
                found = re.search(r"errno = (\d+)", str(error))
                code = int(found.group(1)) if found else None
                named = re.search(r"filename = '([^']+)'", str(error))
                path = named.group(1) if named else None
            if code in _WRITE_ERRORS:
                return path or _path_in_writer(error), os.strerror(code)
        error = error.__cause__ or error.__context__
    return None


def _path_in_writer(error):
    """The `path` the package's innermost frame of `error`'s traceback was
    writing (a grid's or a figure's), or None."""
    path, frame = None, error.__traceback__
    while frame is not None:
        code = frame.tb_frame.f_code
        written = frame.tb_frame.f_locals.get("path")
        if code.co_filename.startswith(_PACKAGE_DIR) and isinstance(written, str):
            path = written
        frame = frame.tb_next
    return path


def _report_failed_write(error, path, reason, args):
    """One line for a failed write (the file, the free space, what to do);
    the traceback goes to `error.log` in the run folder (or the temporary
    folder when that cannot be written), or to stderr with `--verbose`."""
    out = getattr(args, "out", None)
    where = os.path.dirname(os.path.abspath(path)) if path else out or "."
    while not os.path.isdir(where) and os.path.dirname(where) != where:
        where = os.path.dirname(where)
    free = shutil.disk_usage(where).free / 2**20
    log = _write_trace(error, args)
    print(
        f"keras-tpugan: error: could not write {path or 'a file under ' + where!r}: "
        f"{reason} ({free:.1f} MiB free there). Files written before it are "
        "whole, the last backup included: make room (or copy the run folder "
        "elsewhere) and continue with --resume."
        + (f" The traceback is in {log}." if log else ""),
        file=sys.stderr,
    )


def _write_trace(error, args):
    """Writes `error`'s traceback to `error.log` in the run folder (or the
    temporary folder when that cannot be written), or to stderr with
    `--verbose`. Returns the log's path, or None."""
    trace = "".join(traceback.format_exception(error))
    if getattr(args, "verbose", False):
        print(trace, file=sys.stderr, end="")
        return None
    for folder in (getattr(args, "out", None), tempfile.gettempdir()):
        try:
            log = os.path.join(folder, "error.log")
            with open(log, "w") as f:
                f.write(trace)
            return log
        except (OSError, TypeError):
            continue
    return None


if __name__ == "__main__":
    sys.exit(main())
