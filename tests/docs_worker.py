"""Runs the README's and the guides' python blocks in a process of its own,
for `test_docs.py`.

    python docs_worker.py DIR PAGE [PAGE ...]

It runs with TensorFlow's default CPU kernels (oneDNN), as a user's machine
has them. The suite turns them off in its own processes (`conftest.py`: its
comparisons to 1e-6 need Eigen's fixed summation order), and these pages,
which train at the demo's width, then took about half as long again. Each
page runs as `test_docs.run_page` runs it, in a folder of its own under DIR,
with the suite's other settings (four CPU devices, the caches, the XLA
flags). What each page's test checks is written to DIR/results.json:
`{page: {"facts": {...}}}`, or `{page: {"error": traceback}}`.
"""

import json
import pathlib
import sys
import traceback

import conftest  # noqa: F401  (the suite's set-up, oneDNN left as the caller set it)
import keras
import pytest
import test_docs

import keras_tpugan as ktg


def facts(page, scope, folder):
    """What `test_docs.py` checks of a page that ran, as JSON values."""
    if page != "README.md":
        return {"trained": isinstance(scope.get("gan"), ktg.GAN) or "best" in scope}
    run = folder / "runs/mine"
    loaded = keras.saving.load_model(run / "gan.keras")
    images = scope["images"]
    return {
        "images_shape": list(images.shape),
        "images_range": [float(images.min()), float(images.max())],
        "written": [
            name
            for name in ("samples/epoch_0001.png", "history.csv")
            if (run / name).exists()
        ],
        "generated": scope["gan"].generate(4, seed=1).tolist(),
        "loaded_generated": loaded.generate(4, seed=1).tolist(),
    }


def main(directory, pages):
    directory = pathlib.Path(directory)
    results = {}
    for number, page in enumerate(pages):
        folder = directory / str(number)
        folder.mkdir()
        with pytest.MonkeyPatch.context() as monkeypatch:
            try:
                scope = test_docs.run_page(page, folder, monkeypatch)
                results[page] = {"facts": facts(page, scope, folder)}
            except Exception:  # reported to the page's test
                results[page] = {"error": traceback.format_exc()}
    (directory / "results.json").write_text(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
