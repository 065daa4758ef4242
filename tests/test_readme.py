"""The README's examples run as written."""

import os
import pathlib
import re

import numpy as np
import pytest

pytestmark = pytest.mark.both_backends

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def _python_block_after(heading):
    text = README.read_text()
    start = text.index(f"\n{heading}\n")
    return re.search(r"```python\n(.*?)```", text[start:], re.S).group(1)


def test_the_keras_callbacks_example_runs(tmp_path, classifier_dir, capsys):
    """Slow (about 20-25 s): the example trains for three epochs with every
    callback, TensorBoard included."""
    code = _python_block_after("## Using Keras callbacks with the GAN")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        scope = {}
        exec(compile(code, "README.md", "exec"), scope)
    finally:
        os.chdir(cwd)
    logged = scope["history"].history
    assert len(logged["fcd"]) == 3 and all(np.isfinite(logged["fcd"]))
    assert len(logged["val_d_real"]) == 3
    assert logged["g_learning_rate"][1] == pytest.approx(
        logged["g_learning_rate"][0] * 0.95, rel=1e-5
    )
    assert (tmp_path / "runs/callbacks/best.weights.h5").exists()
    assert (tmp_path / "runs/callbacks/log.csv").read_text().count("\n") == 4
    assert list((tmp_path / "runs/callbacks/tensorboard").rglob("*tfevents*"))
    assert not (tmp_path / "runs/callbacks/backup").exists()  # done: removed
    printed = capsys.readouterr().out
    assert "'val_d_real'" not in printed and "'d_real'" in printed
