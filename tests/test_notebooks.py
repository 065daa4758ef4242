"""The Colab notebooks: generated from their .py sources, and they run."""

import glob
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import types

import jupytext
import nbformat
import pytest
from conftest import photo_folder
from nbclient import NotebookClient

import keras_tpugan as ktg

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


def test_dropdowns_offer_every_choice_the_library_takes():
    from keras_tpugan import large_batch, precision
    from keras_tpugan.runs import config
    from keras_tpugan.studies import search, tuning

    choices = {
        "LR_SCALING": set(large_batch.LR_SCALINGS),
        "OPTIMIZER": set(large_batch.OPTIMIZERS),
        "OBJECTIVE": set(tuning.OBJECTIVES),
        "TUNER": set(search.TUNERS),
        "PRECISION": set(precision.POLICIES),
        "BACKEND": {"auto", "tensorflow", "jax"},
    }
    seen = set()
    for source in SOURCES:
        for line in open(source).read().splitlines():
            name, _, rest = line.partition(" = ")
            if "# @param [" not in rest:
                continue
            offered = set(json.loads(rest.split("# @param ", 1)[1]))
            if name == "PRESET":  # a choice of presets, each one that exists
                assert offered <= set(config.PRESETS), (source, name)
            else:
                assert offered == choices[name], (source, name)
            seen.add(name)
    assert seen == {*choices, "PRESET"}


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
    # BACKEND and PRECISION "auto": TensorFlow on this machine without a TPU,
    # and the policy "auto" stands for here.
    policy, _ = ktg.precision.resolve()
    assert f"tensorflow: DefaultStrategy with 1 replica(s), policy {policy}" in text
    assert "'source': 'offline'" in text and "FCD" in text and "recall" in text


def test_quickstart_runs_on_jax(tmp_path):
    """Slow (about 40-65 s): a new kernel imports JAX, compiles and trains, with
    scoring off (QualityMetrics on JAX: test_callbacks, test_metrics)."""
    out = tmp_path / "j"
    nb = _execute(
        "01_quickstart_mnist.ipynb",
        "EPOCHS = 1\nBATCH_SIZE = 200\nWIDTH = 16\nQUALITY_EVERY = 0\n"
        f"BACKEND = 'jax'\nOUT = {str(out)!r}",
        tmp_path,
    )
    for name in ("samples/epoch_0001.png", "loss_curves.png", "gan.keras"):
        assert (out / name).exists(), name
    text = _text(nb)
    # As many replicas as JAX has CPU devices in this process's environment.
    assert "jax: DataParallel with " in text
    assert f"replica(s), policy {ktg.precision.resolve()[0]}" in text
    # QUALITY_EVERY = 0 turns scoring off.
    assert "quality scoring is off (QUALITY_EVERY = 0)" in text
    assert "FCD" not in text


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


NOTEBOOKS = [os.path.basename(s).replace(".py", ".ipynb") for s in SOURCES]


def _run_setup_cell(
    name,
    monkeypatch,
    colab,
    package="",
    backend="auto",
    installed=True,
    tpu=False,
    tensorflow_tpu=False,
):
    """Runs a notebook's install-and-backend cell here, with Colab, pip, the
    installed packages and the TPU's device files mocked."""
    notebook = nbformat.read(os.path.join(HERE, name), as_version=4)
    (cell,) = [c for c in notebook.cells if "setup" in c.metadata.get("tags", [])]
    pip = []
    monkeypatch.setattr(subprocess, "run", lambda command, check: pip.append(command))
    if colab:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda module, *args: (
            None if module == "keras_tpugan" and not installed else find_spec(module)
        ),
    )
    monkeypatch.setattr(
        glob, "glob", lambda p: ["/dev/accel0"] if tpu and "accel" in p else []
    )
    for variable in ("TPU_ACCELERATOR_TYPE", "COLAB_TPU_ADDR"):
        monkeypatch.delenv(variable, raising=False)
    version = importlib.metadata.version

    def versions(distribution):
        if distribution != "tensorflow-tpu":
            return version(distribution)
        if not tensorflow_tpu:
            raise importlib.metadata.PackageNotFoundError(distribution)
        return "2.20.0"

    monkeypatch.setattr(importlib.metadata, "version", versions)
    monkeypatch.setenv("KERAS_BACKEND", os.environ.get("KERAS_BACKEND", ""))
    scope = {"PACKAGE": package, "BACKEND": backend}
    exec(cell.source, scope)
    return pip, os.environ["KERAS_BACKEND"]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_install_cell_installs_package_in_colab_or_says_what_to_set(
    name, monkeypatch, capsys
):
    pip, _ = _run_setup_cell(name, monkeypatch, colab=True, package="dist/x.whl")
    assert pip == [[sys.executable, "-m", "pip", "install", "-q", "dist/x.whl"]]
    # Outside Colab the notebook uses its environment: nothing installed.
    pip, _ = _run_setup_cell(name, monkeypatch, colab=False, package="dist/x.whl")
    assert pip == []
    # Not installed and no PACKAGE: one line saying what to set.
    with pytest.raises(
        SystemExit, match=r"^keras_tpugan is not installed: set PACKAGE"
    ):
        _run_setup_cell(name, monkeypatch, colab=True, installed=False)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_auto_backend_is_jax_on_a_tpu_without_tensorflow_tpu_support(
    name, monkeypatch, capsys
):
    assert _run_setup_cell(name, monkeypatch, colab=True, tpu=True)[1] == "jax"
    assert "backend: jax (TPU attached: True)" in capsys.readouterr().out
    # TensorFlow's TPU build installed, or no TPU: TensorFlow.
    with_tf = _run_setup_cell(
        name, monkeypatch, colab=True, tpu=True, tensorflow_tpu=True
    )
    assert with_tf[1] == "tensorflow"
    assert _run_setup_cell(name, monkeypatch, colab=True)[1] == "tensorflow"
    # A backend named is kept.
    assert _run_setup_cell(name, monkeypatch, colab=True, backend="jax")[1] == "jax"


def test_own_images_notebook_trains_on_a_folder_and_continues_a_stopped_run(tmp_path):
    """Slow (about 100-130 s): four new kernels, each importing TensorFlow;
    the first stops on its time budget after epoch 1 of 2, the second
    continues the same run folder to the end, the third finds it finished
    and leaves it, the fourth trains it on to 3 epochs."""
    photos = photo_folder(tmp_path / "photos", 16)
    out = tmp_path / "own"
    overrides = (
        f"DATA = {str(photos)!r}\nIMAGE_SIZE = 32\nCHANNELS = 3\nEPOCHS = 2\n"
        f"BATCH_SIZE = 8\nWIDTH = 8\nQUALITY_EVERY = 0\nOUT = {str(out)!r}\n"
        "STREAM = True\n"  # the folder read batch by batch from its files
    )
    first = _text(
        _execute(
            "04_your_own_images.ipynb",
            overrides + "TIME_BUDGET_MINUTES = 1e-6",
            tmp_path,
        )
    )
    assert "a new run in" in first and "'num_examples': 16" in first
    assert "'image_shape': [32, 32, 3]" in first
    assert "'memory_bytes': 0, 'streamed': True" in first
    assert (out / "real_images.png").exists() and (out / "backup").is_dir()
    assert (out / "samples/epoch_0001.png").exists()
    assert not (out / "samples/epoch_0002.png").exists()
    second = _text(_execute("04_your_own_images.ipynb", overrides, tmp_path))
    assert "continuing the run in" in second and "'resumed_at_epoch': 1" in second
    assert (out / "samples/epoch_0002.png").exists()
    assert (out / "loss_curves.png").exists() and not (out / "backup").exists()
    assert list((out / "snapshots").glob("gan_epoch_0002.keras"))
    # Run again as it is: the finished run is left as it is, and said so.
    summary = (out / "summary.json").read_text()
    third = _text(_execute("04_your_own_images.ipynb", overrides, tmp_path))
    assert f"the run in {out} has finished its 2 epochs" in third
    assert (out / "summary.json").read_text() == summary
    # Raising EPOCHS trains it on from its last snapshot.
    fourth = _text(
        _execute("04_your_own_images.ipynb", overrides + "EPOCHS = 3", tmp_path)
    )
    assert "training the finished run in" in fourth
    assert "'resumed_at_epoch': 2" in fourth
    assert (out / "samples/epoch_0003.png").exists()


def test_own_images_notebook_mounts_drive_and_trains_on_an_uploaded_zip(
    tmp_path, monkeypatch
):
    """Its Colab cell, with google.colab's drive and files mocked."""
    import shutil

    notebook = nbformat.read(os.path.join(HERE, "04_your_own_images.ipynb"), 4)
    (cell,) = [c for c in notebook.cells if "colab-data" in c.metadata.get("tags", [])]
    archive = shutil.make_archive(
        str(tmp_path / "photos"), "zip", photo_folder(tmp_path / "mine", 16)
    )
    mounted = []
    colab = types.ModuleType("google.colab")
    colab.drive = types.SimpleNamespace(mount=mounted.append)
    colab.files = types.SimpleNamespace(
        upload=lambda: {os.path.basename(archive): b"..."}
    )
    monkeypatch.setitem(sys.modules, "google", types.ModuleType("google"))
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.chdir(tmp_path)
    isdir = os.path.isdir
    monkeypatch.setattr(
        os.path, "isdir", lambda p: p == "/content/drive/MyDrive" or isdir(p)
    )
    settings = {"DATA": "cifar10", "MOUNT_DRIVE": True, "UPLOAD_ZIP": True, "OUT": ""}
    scope = {"sys": sys, "os": os, **settings}
    exec(cell.source, scope)
    assert mounted == ["/content/drive"] and scope["DATA"] == "uploaded"
    assert len(list((tmp_path / "uploaded").glob("*.jpg"))) == 16
    # The run folder is on Drive by default, unless one is named.
    assert scope["OUT"] == "/content/drive/MyDrive/keras-tpugan/own_images"
    scope = {"sys": sys, "os": os, **settings, "OUT": "mine", "UPLOAD_ZIP": False}
    exec(cell.source, scope)
    assert scope["OUT"] == "mine"
    # Outside Colab: neither, DATA as set, and without Drive a local folder.
    monkeypatch.delitem(sys.modules, "google.colab")
    monkeypatch.setattr(os.path, "isdir", isdir)
    scope = {"sys": sys, "os": os, **settings}
    exec(cell.source, scope)
    assert scope["DATA"] == "cifar10" and mounted == ["/content/drive"] * 2
    assert scope["OUT"] == "runs/own_images"


@pytest.mark.parametrize("source", SOURCES, ids=os.path.basename)
def test_each_notebook_asks_colab_for_an_accelerator(source):
    metadata = nbformat.read(source.replace(".py", ".ipynb"), 4).metadata
    assert metadata["accelerator"] in ("TPU", "GPU")
    assert "colab" in metadata
