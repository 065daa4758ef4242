"""The Colab notebooks: generated from their .py sources, and they run."""

import glob
import os

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient

HERE = os.path.join(os.path.dirname(__file__), "..", "notebooks")
SOURCES = sorted(glob.glob(os.path.join(HERE, "*.py")))


def _cells(notebook):
    return [(c.cell_type, c.source) for c in notebook.cells]


@pytest.mark.parametrize("source", SOURCES, ids=os.path.basename)
def test_ipynb_is_generated_from_its_py_source(source):
    committed = nbformat.read(source.replace(".py", ".ipynb"), as_version=4)
    assert _cells(committed) == _cells(jupytext.read(source)), (
        f"{source} and its .ipynb differ: run `jupytext --to ipynb {source}`"
    )
    for cell in committed.cells:
        if cell.cell_type == "code":
            assert not cell.get("outputs"), "commit notebooks without outputs"


def _execute(name, overrides, tmp_path):
    notebook = nbformat.read(os.path.join(HERE, name), as_version=4)
    index = next(
        i
        for i, c in enumerate(notebook.cells)
        if "parameters" in c.metadata.get("tags", [])
    )
    notebook.cells.insert(index + 1, nbformat.v4.new_code_cell(overrides))
    client = NotebookClient(
        notebook,
        timeout=900,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    return notebook


def _text(notebook):
    return "\n".join(
        o.get("text", "") for c in notebook.cells for o in c.get("outputs", [])
    )


def test_quickstart_runs(tmp_path):
    """Slow (about 35 s): a new kernel imports TensorFlow, compiles and trains."""
    out = tmp_path / "q"
    nb = _execute(
        "01_quickstart_mnist.ipynb",
        "EPOCHS = 2\nBATCH_SIZE = 200\nWIDTH = 16\nQUALITY_EVERY = 1\n"
        f"OUT = {str(out)!r}",
        tmp_path,
    )
    for name in (
        "samples/epoch_0002.png",
        "samples/samples.gif",
        "loss_curves.png",
        "history.csv",
        "gan.keras",
        "final_grid.png",
    ):
        assert (out / name).exists(), name
    text = _text(nb)
    assert (
        "tensorflow: DefaultStrategy with 1 replica(s), policy mixed_bfloat16" in text
    )
    assert "'source': 'offline'" in text and "FCD" in text


def test_quickstart_runs_on_jax(tmp_path):
    """Slow (about 55-65 s): a new kernel imports JAX, compiles and trains, then
    scores the samples."""
    out = tmp_path / "j"
    nb = _execute(
        "01_quickstart_mnist.ipynb",
        "EPOCHS = 1\nBATCH_SIZE = 200\nWIDTH = 16\nQUALITY_EVERY = 1\n"
        f"BACKEND = 'jax'\nOUT = {str(out)!r}",
        tmp_path,
    )
    for name in ("samples/epoch_0001.png", "loss_curves.png", "gan.keras"):
        assert (out / name).exists(), name
    text = _text(nb)
    # As many replicas as JAX has CPU devices in this process's environment.
    assert "jax: DataParallel with " in text
    assert "replica(s), policy mixed_bfloat16" in text
    assert "FCD" in text


def test_batch_size_study_runs(tmp_path):
    """Slow (about 30-60 s): a new kernel runs a two-batch-size sweep."""
    out = tmp_path / "s"
    nb = _execute(
        "02_batch_size_study.ipynb",
        f"BATCH_SIZES = [100, 200]\nEPOCHS = 2\nPRESET = 'smoke'\nOUT = {str(out)!r}",
        tmp_path,
    )
    for name in (
        "results.md",
        "learning_curves.png",
        "epoch_time.png",
        "quality_vs_time.png",
    ):
        assert (out / name).exists(), name
    assert "fastest: batch" in _text(nb)


def test_keras_tuner_notebook_runs(tmp_path):
    """Slow (about 25-65 s): a new kernel runs a two-trial keras-tuner search."""
    out = tmp_path / "t"
    nb = _execute(
        "03_keras_tuner_batch_size.ipynb",
        "BATCH_SIZES = [100, 200]\nLEARNING_RATES = [2e-4]\nIMAGE_BUDGET = 800\n"
        f"PRESET = 'smoke'\nOUT = {str(out)!r}",
        tmp_path,
    )
    assert (out / "results.md").exists() and (out / "quality_vs_time.png").exists()
    assert "best by fcd: {'batch_size':" in _text(nb)
