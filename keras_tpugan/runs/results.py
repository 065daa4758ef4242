"""Results files of runs, studies and benchmarks.

One writer for every tool: `write_results` saves rows as `results.csv`,
`results.json` and a Markdown `results.md`; `markdown_table` formats rows
by a column spec; `write_csv`, `read_history` and the cell formatting
the tables share; `write_json` writes a run's JSON file whole or not at all
(`keras_tpugan.whole_files.replaced_whole`).
"""

import csv
import json
import math
import os

import numpy as np

from keras_tpugan.whole_files import replaced_whole


def fmt(value, spec=".2f"):
    """Formats a cell: `-` for None and non-finite floats.

    Args:
        value: The value.
        spec: A format spec for numbers.

    Returns:
        A string.
    """
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return format(value, spec)
    return str(value)


def first_line(error, limit=200):
    """The first line of an error's message (its type's name if empty).

    Args:
        error: An exception.
        limit: Most characters kept (None: all).

    Returns:
        A string.
    """
    lines = str(error).strip().splitlines()
    return lines[0][:limit] if lines else type(error).__name__


def markdown_table(rows, columns):
    """Formats rows as Markdown table lines.

    Args:
        rows: Dicts.
        columns: `(key, header, spec)` triples; `spec` is a format spec, or
            a function from the row to the cell's text. A column with a
            spec other than `"s"` is right-aligned.

    Returns:
        A list of lines.
    """
    header = "| " + " | ".join(h for _, h, _ in columns) + " |"
    rule = "|" + "".join("---|" if s == "s" else "---:|" for _, _, s in columns)
    lines = [header, rule]
    for row in rows:
        cells = [
            spec(row) if callable(spec) else fmt(row.get(key), spec)
            for key, _, spec in columns
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def write_results(directory, rows, columns, payload=None, footer=()):
    """Writes `results.csv`, `results.json` and `results.md` under `directory`.

    Args:
        directory: Output folder (created if missing).
        rows: Result dicts; the CSV holds the columns' keys.
        columns: The table's `(key, header, spec)` triples (see
            `markdown_table`).
        payload: What `results.json` holds (default: the rows).
        footer: Lines written below the Markdown table.

    Returns:
        The path of `results.md`.
    """
    os.makedirs(directory, exist_ok=True)
    keys = [key for key, _, _ in columns]
    with open(os.path.join(directory, "results.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        writer.writeheader()
        writer.writerows({k: _csv_cell(row.get(k)) for k in keys} for row in rows)
    with open(os.path.join(directory, "results.json"), "w") as f:
        json.dump(rows if payload is None else payload, f, indent=2)
    path = os.path.join(directory, "results.md")
    lines = markdown_table(rows, columns)
    if footer:
        lines += ["", *footer]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def _csv_cell(value):
    return "" if value is None else value


def read_history(path):
    """Reads a `history.csv` (as `LossCurves` writes it) into float arrays.

    Args:
        path: The CSV file.

    Returns:
        A dict from column name to a float numpy array (NaN for blanks).
    """
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return {
        key: np.array([float(r[key]) if r[key] else np.nan for r in rows])
        for key in rows[0]
    }


def write_csv(rows, path):
    """Writes dicts as a CSV file, columns in the first row's key order.

    Args:
        rows: Dicts with the same keys.
        path: Output file.

    Returns:
        The path.
    """
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_json(payload, path):
    """Writes `payload` as indented JSON to `path`, whole or not at all."""
    with replaced_whole(path) as partial, open(partial, "w") as f:
        json.dump(payload, f, indent=2)
