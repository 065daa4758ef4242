"""The README's examples run as written."""

import os
import pathlib
import re
import textwrap

import keras
import numpy as np
import pytest
from conftest import batches, random_images, tiny_gan

import keras_tpugan as ktg

pytestmark = pytest.mark.both_backends

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def _python_block_after(heading):
    text = README.read_text()
    start = text.index(f"\n{heading}\n")
    return re.search(r"```python\n(.*?)```", text[start:], re.S).group(1)


@pytest.mark.tensorflow_only  # its TensorBoard callback needs TensorFlow
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


def test_the_adversarial_loss_example_trains_and_saves(tmp_path):
    """The README's extension point for a new objective, as written there."""
    text = README.read_text()
    start = text.index("- Extension points:")
    code = re.search(r"```python\n(.*?)```", text[start:], re.S).group(1)
    ds = batches(random_images(8), 8, repeat=1)

    def trained(loss=None):
        keras.utils.set_random_seed(3)
        gan = tiny_gan(compile_kwargs={"jit_compile": True})
        scope = {"keras": keras, "ktg": ktg, "gan": gan}
        if loss is None:  # the README's block: the class, then gan.compile
            exec(compile(textwrap.dedent(code), "README.md", "exec"), scope)
        else:
            gan.compile(loss=loss, jit_compile=True)
        return gan, gan.fit(ds, epochs=2, verbose=0).history

    gan, history = trained()
    assert type(gan.adversarial_loss).__name__ == "MinimaxLoss"
    _, reference = trained("non_saturating")
    # The discriminator's objective is non-saturating's: the same first step.
    np.testing.assert_allclose(history["d_loss"][0], reference["d_loss"][0], rtol=1e-5)
    assert all(g < 0 for g in history["g_loss"])  # -softplus: the user's own
    gan.save(tmp_path / "gan.keras")
    loaded = keras.saving.load_model(tmp_path / "gan.keras")
    assert type(loaded.adversarial_loss) is type(gan.adversarial_loss)
    assert loaded.adversarial_loss.name == "minimax"
