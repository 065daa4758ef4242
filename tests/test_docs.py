"""The README's and the guides' code runs as written, and their commands parse.

Each page's python blocks run in order in one namespace, in an empty folder
that holds the images the pages name (`my_images/`: a flat folder of photos;
`my_classes/`: one subfolder per class). Two changes make them short, and
only these: `epochs=N` becomes `epochs=1`, and `image_budget=N` becomes
`image_budget=1_024`. Every page but the distributed guide runs as on a
machine of one device: `distribute.get_strategy` picks one of the suite's
four CPU devices when no replica count is asked for (the replica-parity
tests cover several; the search page's two trials took 35 s on four, 11 s
on one). The README's quickstart and the guides that run on any backend run
together in one process of their own (`docs_worker.py`), with TensorFlow's
default CPU kernels, as a user's machine has them (the suite's processes
turn oneDNN off for their comparisons to 1e-6; these pages, at the demo's
width, took about half as long again without it: test_docs.py 106 -> 79
CPU-seconds on an AMX CPU). The migration guide has its own test
(`test_migration.py`); the callbacks guide's example runs below with checks
of what each callback did.
"""

import ast
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
from conftest import batches, colour_folder, photo_folder, random_images, tiny_gan

import keras_tpugan as ktg
from keras_tpugan.cli import main as cli
from keras_tpugan.distribute import strategy as strategy_module
from keras_tpugan.runs.config import TrainConfig

pytestmark = pytest.mark.both_backends

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
GUIDES = DOCS / "guides"
WORKER = pathlib.Path(__file__).with_name("docs_worker.py")
BACKEND = keras.backend.backend()

# Every guide, and how its python blocks are tested: on any backend, on
# one, or by a test of their own.
PAGES = {
    "README.md": "test_the_readme_quickstart_trains_and_saves",
    "guides/own-data.md": "any",
    "guides/models-and-recipe.md": "any",
    "guides/quality-metrics.md": "any",
    "guides/checkpoints-and-resume.md": "any",
    "guides/distributed.md": "any",
    "guides/hyperparameter-search.md": "any",
    # Its example picks the JAX backend before Keras is imported.
    "guides/tpu-and-jax.md": "jax",
    "guides/cli.md": "no python",
    "guides/callbacks.md": "test_the_keras_callbacks_example_runs",
    "guides/migrating.md": "test_migration.py",
}


def _path(page):
    return README if page == "README.md" else DOCS / page


def _python_blocks(page):
    return re.findall(r"```python\n(.*?)```", _path(page).read_text(), re.S)


def _shortened(code):
    code = re.sub(r"\bepochs=\d+", "epochs=1", code)
    return re.sub(r"\bimage_budget=[\d_]+", "image_budget=1_024", code)


def _shortened_blocks(page):
    """The page's python blocks, dedented and shortened, in order."""
    return [_shortened(textwrap.dedent(code)) for code in _python_blocks(page)]


def run_page(page, folder, monkeypatch):
    """Runs the page's python blocks in `folder`; returns their namespace."""
    photo_folder(folder / "my_images", 64, shape=(40, 30, 3))
    colour_folder(folder / "my_classes", classes=2, per_class=64)
    if page != "guides/distributed.md":
        # Where `get_strategy` picks its devices, whoever calls it.
        monkeypatch.setattr(strategy_module, "_pick", _one_device_unless_asked)
    environ = dict(os.environ)
    cwd = os.getcwd()
    os.chdir(folder)
    scope = {}
    try:
        for code in _shortened_blocks(page):
            exec(compile(code, page, "exec"), scope)
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(environ)
    return scope


_PICK = strategy_module._pick


def _one_device_unless_asked(devices, num_replicas, kind):
    """The first device when no replica count is asked for."""
    return _PICK(devices, 1 if num_replicas is None else num_replicas, kind)


def test_every_guide_is_tested():
    on_disk = {f"guides/{p.name}" for p in GUIDES.glob("*.md")}
    listed = {page for page in PAGES if page.startswith("guides/")}
    assert on_disk == listed
    for page, how in PAGES.items():
        has_python = bool(_python_blocks(page))
        assert has_python == (how != "no python"), page


# The pages that run in `docs_worker.py`'s process: on TensorFlow the guides
# and the README's quickstart; the JAX pass runs the quickstart and the JAX
# page (the pages' code is the same on both backends; each page costs 5-15 s).
RUN_IN_WORKER = [
    "README.md",
    *(page for page, how in PAGES.items() if how == "any" and BACKEND != "jax"),
]


@pytest.fixture(scope="module")
def pages_run(tmp_path_factory, classifier_dir):
    """Every page of `RUN_IN_WORKER`, run once in `docs_worker.py`'s process
    with TensorFlow's default CPU kernels: `{page: {"facts": ...} or
    {"error": traceback}}`."""
    directory = tmp_path_factory.mktemp("pages")
    done = subprocess.run(
        [sys.executable, str(WORKER), str(directory), *RUN_IN_WORKER],
        env=dict(os.environ, TF_ENABLE_ONEDNN_OPTS="1"),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((directory / "results.json").read_text())


def _facts(pages_run, page):
    result = pages_run[page]
    assert "error" not in result, f"{page}:\n{result.get('error')}"
    return result["facts"]


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("page", [page for page, how in PAGES.items() if how == "any"])
def test_the_page_runs(page, pages_run):
    """Each trains a GAN or two for an epoch, or runs a search."""
    assert _facts(pages_run, page)["trained"], page


def test_the_readme_quickstart_trains_and_saves(pages_run):
    facts = _facts(pages_run, "README.md")
    assert facts["images_shape"] == [16, 32, 32, 3]
    low, high = facts["images_range"]
    assert low >= -1 and high <= 1
    assert facts["written"] == ["samples/epoch_0001.png", "history.csv"]
    np.testing.assert_allclose(facts["loaded_generated"], facts["generated"])
    assert np.shape(facts["generated"]) == (4, 32, 32, 3)


@pytest.mark.jax_only
def test_the_jax_page_runs(tmp_path):
    """In a process of its own, on one CPU device, with XLA's default
    optimization level: its bfloat16 step of the demo's width took 2.4 s at
    the suite's level 0, 0.3 s at the default (40 s against 14 s)."""
    page = "guides/tpu-and-jax.md"
    code = "\n".join(_shortened_blocks(page))
    code += (
        "\nimport json, keras"
        "\nprint('FACTS', json.dumps({'backend': keras.backend.backend(),"
        " 'steps': int(gan.optimizer.iterations.numpy())}))"
    )
    env = dict(os.environ, XLA_FLAGS="--xla_cpu_use_fusion_emitters=false")
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    facts = json.loads(done.stdout.split("FACTS ", 1)[1])
    # One epoch of the 4,000 offline digits: 15 whole batches of 256.
    assert facts == {"backend": "jax", "steps": 15}
    assert list((tmp_path / "runs/x/samples").glob("epoch_*.png"))


@pytest.mark.tensorflow_only  # its TensorBoard callback needs TensorFlow
def test_the_keras_callbacks_example_runs(tmp_path, classifier_dir, capsys):
    """Slow (about 20-25 s): the example trains for three epochs with every
    callback, TensorBoard included (run as written, epochs too)."""
    (code,) = _python_blocks("guides/callbacks.md")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        scope = {}
        exec(compile(code, "guides/callbacks.md", "exec"), scope)
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
    """The models guide's extension point for a new objective, as written."""
    text = (GUIDES / "models-and-recipe.md").read_text()
    start = text.index("- Extension points:")
    code = re.search(r"```python\n(.*?)```", text[start:], re.S).group(1)
    ds = batches(random_images(8), 8, repeat=1)

    def trained(loss=None):
        keras.utils.set_random_seed(3)
        gan = tiny_gan(compile_kwargs={"jit_compile": True})
        scope = {"keras": keras, "ktg": ktg, "gan": gan}
        if loss is None:  # the guide's block: the class, then gan.compile
            exec(compile(textwrap.dedent(code), "models-and-recipe.md", "exec"), scope)
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


def _commands():
    """Every `keras-tpugan ...` line of the README's and the docs' shell
    blocks, continuation lines joined: (page, argv)."""
    pages = [README, *sorted(DOCS.rglob("*.md"))]
    for path in pages:
        for block in re.findall(r"```bash\n(.*?)```", path.read_text(), re.S):
            for line in block.replace("\\\n", " ").splitlines():
                words = shlex.split(line, comments=True)
                while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
                    words = words[1:]  # KERAS_BACKEND=jax keras-tpugan ...
                if words[:1] == ["keras-tpugan"]:
                    yield path.relative_to(ROOT).as_posix(), words[1:]


COMMANDS = list(_commands())


def test_the_docs_show_every_command():
    shown = {argv[0] for _, argv in COMMANDS if argv}
    assert shown >= {"train", "settings", "sample", "sweep", "tune", "bench", "launch"}


@pytest.mark.parametrize(
    "page, argv", COMMANDS, ids=[" ".join(argv)[:60] for _, argv in COMMANDS]
)
def test_the_docs_commands_parse(page, argv):
    """The command's flags exist, and each `--set KEY=VALUE` names a setting."""
    args = cli._parser().parse_args(argv)
    fields = set(TrainConfig.__dataclass_fields__)
    for setting in getattr(args, "set", None) or []:
        key = setting.split("=", 1)[0]
        assert key in fields, f"{page}: --set {key} is not a setting"


def test_the_readme_is_short_and_starts_with_your_own_folder():
    lines = README.read_text().splitlines()
    assert len(lines) <= 200
    quickstart = lines.index("```python")
    assert quickstart < 80
    assert "my_images/" in lines[quickstart + 5]


def test_every_public_module_has_a_reference_page():
    """`docs/gen_pages.py` writes a page for each module it lists; every
    module of the package's public API is among them."""
    tree = ast.parse((DOCS / "gen_pages.py").read_text())
    (listed,) = [
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and node.targets[0].id == "PUBLIC_MODULES"
    ]
    modules = {module for section in listed.values() for module in section}
    public = {module or f"keras_tpugan.{name}" for name, module in ktg._API.items()}
    assert public <= modules


@pytest.mark.tensorflow_only  # once is enough: the wheel holds no backend code
def test_make_wheel_builds_a_wheel_with_the_assets_and_the_licence(tmp_path):
    """The wheel the install page points Colab users to (`make wheel` runs
    `python -m build --wheel`) holds every module, the offline MNIST subset,
    the shipped classifier and the licence."""
    import subprocess
    import sys
    import zipfile

    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path), ROOT],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("keras_tpugan-*-py3-none-any.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    sources = {
        str(path.relative_to(ROOT)) for path in (ROOT / "keras_tpugan").rglob("*.py")
    }
    assert sources <= names
    assert {
        "keras_tpugan/assets/mnist_5k.csv.gz",
        "keras_tpugan/assets/mnist_classifier_v1.keras",
    } <= names
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
