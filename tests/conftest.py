"""Test set-up: four CPU devices, float32 by default, tiny models.

The suite runs on the backend named by KERAS_BACKEND (default: tensorflow).
On JAX (`KERAS_BACKEND=jax pytest`) it runs the tests marked
`both_backends`, on four host devices, and deselects the others (they test
TensorFlow-only features, or run both backends in subprocesses), with
TensorFlow made unimportable (`tests/tensorflow_blocked` first on the path),
as on a JAX machine without it. Tests
marked `full` run only with KERAS_TPUGAN_TEST_FULL=1 (`make test-full`).
"""

import os
import shutil
import sys
import tempfile

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# One classifier cache for the whole run, away from the user's own cache.
# `make test` shares one between its TensorFlow and JAX passes, so the JAX
# pass loads the classifier the TensorFlow pass trained (and saved), and
# removes it at the end. Otherwise the pytest process makes one, which
# pytest-xdist's workers inherit through the environment, and removes it
# when the session ends (`pytest_sessionfinish`).
_OWN_CACHE = None
if not os.environ.get("KERAS_TPUGAN_TEST_CACHE"):
    _OWN_CACHE = tempfile.mkdtemp(prefix="keras_tpugan_cache_")
    os.environ["KERAS_TPUGAN_TEST_CACHE"] = _OWN_CACHE
os.environ["KERAS_TPUGAN_CACHE"] = os.environ["KERAS_TPUGAN_TEST_CACHE"]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# TensorFlow's CPU kernels without oneDNN, here and in every process a test
# starts. TensorFlow's oneDNN thread pool splits a kernel over its threads
# only when the calling thread is not one of them, so a kernel's summation
# order can depend on which thread the executor picks; Eigen's kernels sum
# in one order for a given thread pool, and the suite compares runs to
# 1e-6. On its tiny networks they are also faster (three test files:
# 121 s -> 87 s).
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
# XLA's CPU code generation at its lowest optimization level, with its
# older emitters for fused loops (not the MLIR fusion emitters), in this
# process and in every process a test starts: on the suite's tiny networks
# compiling is most of a test's time, and every check compares programs
# compiled alike. The level: three JAX parity cases 107 s -> 67 s. The
# emitters, measured on test_gan.py alone (user + sys CPU seconds): JAX
# 169.7 -> 94.2, TensorFlow 166.9 -> 139.5. `make test-full` runs the suite
# with XLA's defaults (KERAS_TPUGAN_TEST_XLA_FLAGS="").
TEST_XLA_FLAGS = os.environ.get(
    "KERAS_TPUGAN_TEST_XLA_FLAGS",
    "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false",
)
os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {TEST_XLA_FLAGS}".strip()
# Compiled XLA programs are kept on disk for the whole run, by TensorFlow and
# by JAX, in this process and in every process a test starts: many tests
# compile the same tiny programs again (each GAN a new step function, each
# replica and each launched process its own copy, both passes the same
# cases), and on these networks compiling is about half a test's time (one
# parity case here: 29 s -> 15 s with the programs on disk). A program
# loaded from the cache is the one XLA would compile again.
_XLA_CACHE = os.path.join(os.environ["KERAS_TPUGAN_CACHE"], "xla")
os.environ["TF_XLA_FLAGS"] = (
    f"{os.environ.get('TF_XLA_FLAGS', '')} "
    f"--tf_xla_persistent_cache_directory={_XLA_CACHE}/tensorflow"
).strip()
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", f"{_XLA_CACHE}/jax")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
# The JAX pass runs as on a JAX machine without TensorFlow: these stand-ins
# for `tensorflow` and `tensorflow_datasets` fail on import, here and in
# every process a test starts (they come first on PYTHONPATH).
TENSORFLOW_BLOCKED = os.path.join(os.path.dirname(__file__), "tensorflow_blocked")
if os.environ["KERAS_BACKEND"] == "jax":
    sys.path.insert(0, TENSORFLOW_BLOCKED)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (TENSORFLOW_BLOCKED, os.environ.get("PYTHONPATH")) if p
    )

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import keras_tpugan as ktg  # noqa: E402

# Four replicas on one CPU (TensorFlow logical devices, JAX host devices):
# must happen before anything touches the devices.
ktg.distribute.split_host_devices(4)

LATENT = 8
BACKEND = keras.backend.backend()


# `make test-full` (KERAS_TPUGAN_TEST_FULL=1) also runs the tests marked
# `full`: full-size end-to-end cases, each with a small version in `make test`;
# a test may also read FULL to run its full size (test_multiprocess's weak
# scaling on JAX).
FULL = os.environ.get("KERAS_TPUGAN_TEST_FULL") == "1"


def pytest_sessionfinish(session, exitstatus):
    if _OWN_CACHE:  # made by this process, not inherited
        shutil.rmtree(_OWN_CACHE, ignore_errors=True)


@pytest.hookimpl(wrapper=True)
def pytest_xdist_auto_num_workers(config):
    """`-n auto`: on TensorFlow one pytest-xdist worker more than its own
    count (one per core), since many TensorFlow tests wait on processes they
    start; the figures are in docs/contributing.md. A count set outright in
    `PYTEST_XDIST_AUTO_NUM_WORKERS` is kept as it is."""
    count = yield
    if BACKEND == "jax" or os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return count
    return count + 1


def pytest_ignore_collect(collection_path, config):
    # The JAX pass runs without TensorFlow: a test module with no test for
    # both backends is not even imported there (it may import TensorFlow).
    if BACKEND == "jax" and collection_path.name.startswith("test_"):
        if collection_path.suffix == ".py":
            return "both_backends" not in collection_path.read_text()
    return None


def pytest_collection_modifyitems(config, items):
    kept, dropped = [], []
    for item in items:
        if BACKEND == "jax":
            runs_here = item.get_closest_marker("both_backends") is not None
            runs_here &= item.get_closest_marker("tensorflow_only") is None
        else:
            runs_here = item.get_closest_marker("jax_only") is None
        runs_here &= FULL or item.get_closest_marker("full") is None
        (kept if runs_here else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    # The costliest files first (a stable sort: the others keep their order,
    # and each file its tests' order).
    items[:] = sorted(kept, key=lambda item: _COSTLIEST_FIRST.get(item.path.name, 99))


# The test files that cost the most CPU time (measured in `make test`, both
# passes together), costliest first: `make test` gives pytest-xdist's
# workers whole files in this order (`--no-loadscope-reorder`), so that the
# files a pass ends with are short ones and no core waits on one long file
# at the end. (pytest-xdist's own order puts the files with the most tests
# first, and so left files of one or two tests that start processes, such
# as test_multiworker.py, to the end.)
_COSTLIEST_FIRST = {
    name: rank
    for rank, name in enumerate(
        [
            "test_multiprocess.py",
            "test_gan.py",
            "test_cli.py",
            "test_docs.py",
            "test_bench.py",
            "test_notebooks.py",
            "test_callbacks.py",
            "test_metrics.py",
            "test_resume.py",
            "test_tuning.py",
            "test_backends.py",
            "test_launcher.py",
            "test_multiworker.py",
            "test_keras_contract.py",
            "test_migration.py",
            "test_prepared_run.py",
            "test_models.py",
            "test_peers.py",
        ]
    )
}


def one_device_per_process_env(monkeypatch):
    """Sets `monkeypatch`'s environment for launched processes of one device."""
    # The suite splits the CPU into four devices; each process gets one
    # (and the suite's XLA flags, without the split).
    # (This process's JAX reads the flag once, when it first starts: start
    # it now, so that the tests after these still see four devices.)
    if BACKEND == "jax":
        import jax

        jax.devices()
    monkeypatch.setenv("XLA_FLAGS", TEST_XLA_FLAGS)
    monkeypatch.delenv("TF_CONFIG", raising=False)


@pytest.fixture
def one_device_per_process(monkeypatch):
    one_device_per_process_env(monkeypatch)


@pytest.fixture(autouse=True)
def float32_policy():
    keras.mixed_precision.set_global_policy("float32")
    yield
    keras.mixed_precision.set_global_policy("float32")


def tiny_gan(
    num_classes=None,
    norm="layer",
    d_norm="none",
    d_dropout=0.0,
    strategy=None,
    compile_kwargs=None,
    **kwargs,
):
    """A GAN of a few thousand parameters on 28x28x1 images, compiled."""
    with ktg.distribute.scope(strategy):
        gan = ktg.GAN(
            ktg.models.dcgan_generator(
                latent_dim=LATENT, width=8, num_classes=num_classes, norm=norm
            ),
            ktg.models.dcgan_discriminator(
                width=8, num_classes=num_classes, norm=d_norm, dropout=d_dropout
            ),
            latent_dim=LATENT,
            num_classes=num_classes,
            **kwargs,
        )
        gan.compile(**(compile_kwargs or {}))
    return gan


def photo_folder(folder, count, shape=(40, 30, 3), suffix=".jpg", seed=0):
    """A flat folder of `count` random uint8 photos of `shape`, as a user's."""
    from PIL import Image

    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    for i in range(count):
        pixels = rng.integers(0, 256, shape, dtype=np.uint8)
        Image.fromarray(pixels).save(folder / f"photo_{i:03d}{suffix}")
    return folder


def colour_folder(directory, classes=2, per_class=24, flat=False, shape=(30, 36, 3)):
    """RGB PNGs of `shape`, each class its own colour, in a subfolder per
    class (`class_K`) or all in `directory` (`flat`)."""
    from PIL import Image

    rng = np.random.default_rng(0)
    for label in range(classes):
        folder = directory if flat else directory / f"class_{label}"
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            pixels = rng.integers(0, 60, shape).astype("uint8")
            pixels[..., label % 3] += 180
            Image.fromarray(pixels).save(folder / f"{label}_{i}.png")
    return directory


def tiny_quality(classifier_dir, **kwargs):
    """QualityMetrics on 50 generated images against random 'real' ones."""
    return ktg.callbacks.QualityMetrics(
        num_images=50,
        classifier_dir=classifier_dir,
        real_images=random_images(100),
        held_out_images=random_images(100, seed=1),
        **kwargs,
    )


def subprocess_env(**overrides):
    """This process's environment for a new process on one device, as a user's."""
    env = {**os.environ, "XLA_FLAGS": TEST_XLA_FLAGS, **overrides}
    if not env["XLA_FLAGS"]:
        del env["XLA_FLAGS"]
    return env


def assert_same_epoch_means(run, whole):
    """The training means of every epoch in the `history.csv` of the run
    folders `run` and `whole` agree (a resumed epoch's too), to 1e-5."""
    import csv

    rows = []
    for folder in (run, whole):
        with open(os.path.join(folder, "history.csv")) as f:
            rows.append(list(csv.DictReader(f)))
    assert len(rows[0]) == len(rows[1]) > 0
    for key in ("d_loss", "g_loss", "d_real", "d_fake", "loss"):
        np.testing.assert_allclose(
            [float(row[key]) for row in rows[0]],
            [float(row[key]) for row in rows[1]],
            rtol=1e-5,
            atol=1e-6,
            err_msg=key,
        )


def numpy_weights(model):
    return [keras.ops.convert_to_numpy(w) for w in model.weights]


def random_images(n=8, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, (n, 28, 28, 1)).astype("float32")


def batches(images, batch_size, labels=None, repeat=1, drop_remainder=True):
    """The data in order, in batches, `repeat` times per epoch.

    A `tf.data.Dataset` on TensorFlow; on JAX (whose test pass runs without
    TensorFlow) an `ArrayBatches`, which `fit` takes as it would a user's.
    """
    if BACKEND == "tensorflow":
        import tensorflow as tf

        data = images if labels is None else (images, labels)
        ds = tf.data.Dataset.from_tensor_slices(data)
        return ds.batch(batch_size, drop_remainder=drop_remainder).repeat(repeat)
    return ArrayBatches(images, labels, batch_size, repeat, drop_remainder)


class ArrayBatches(keras.utils.PyDataset):
    """A user's `keras.utils.PyDataset`: arrays in order, in batches."""

    def __init__(self, images, labels, batch_size, repeat=1, drop_remainder=True):
        super().__init__()
        self.images, self.labels = np.asarray(images), labels
        self.batch_size = batch_size
        whole, rest = divmod(len(self.images), batch_size)
        self.per_pass = whole + (0 if drop_remainder or not rest else 1)
        self.repeat = repeat

    def __len__(self):
        return self.per_pass * self.repeat

    def __getitem__(self, index):
        start = (index % self.per_pass) * self.batch_size
        rows = slice(start, start + self.batch_size)
        if self.labels is None:
            return self.images[rows]
        return self.images[rows], np.asarray(self.labels)[rows]


@pytest.fixture(scope="session")
def classifier_dir():
    """The suite's cache folder: it holds no rebuilt classifier, so the metric
    classifier is the one shipped with the package."""
    directory = ktg.metrics.cache_dir()
    os.makedirs(directory, exist_ok=True)
    return directory
