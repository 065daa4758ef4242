import csv
import json

from keras_tpugan import images
from keras_tpugan.runs import results


def test_markdown_table_formats_and_aligns():
    columns = [("name", "run", "s"), ("fcd", "FCD", ".1f"), ("n", "steps", "d")]
    rows = [{"name": "a", "fcd": 12.345, "n": 3}, {"name": "b", "fcd": None, "n": 4}]
    assert results.markdown_table(rows, columns) == [
        "| run | FCD | steps |",
        "|---|---:|---:|",
        "| a | 12.3 | 3 |",
        "| b | - | 4 |",
    ]
    assert results.fmt(float("nan")) == "-" and results.fmt(True) == "True"


def test_write_results_writes_csv_json_and_markdown(tmp_path):
    columns = [("batch", "batch", "d"), ("fcd", "FCD", lambda r: f"~{r['fcd']}")]
    rows = [{"batch": 64, "fcd": 10.0, "extra": [1, 2]}]
    path = results.write_results(tmp_path, rows, columns, footer=["Best: 64"])
    assert path.endswith("results.md")
    text = (tmp_path / "results.md").read_text()
    assert "| 64 | ~10.0 |" in text and text.endswith("Best: 64\n")
    with open(tmp_path / "results.csv") as f:
        assert list(csv.DictReader(f)) == [{"batch": "64", "fcd": "10.0"}]
    assert json.loads((tmp_path / "results.json").read_text()) == rows


def test_one_grid_layout_for_grids_and_samples():
    assert images.grid_layout(9)[:2] == (3, 3)
    assert images.grid_layout(10)[:2] == (3, 4)
    rows, cols, labels = images.grid_layout(7, num_classes=2)
    assert (rows, cols) == (2, 4) and labels.tolist() == [0] * 4 + [1] * 4


def test_first_line():
    assert results.first_line(ValueError("one\ntwo")) == "one"
    assert results.first_line(KeyError()) == "KeyError"


def test_a_run_file_is_written_whole_or_not_at_all(tmp_path):
    path = tmp_path / "summary.json"
    results.write_json({"epochs": 1}, path)
    assert json.loads(path.read_text()) == {"epochs": 1}

    # A write that fails half-way (a kill, a full disk) leaves the file as
    # it was, and nothing else behind.
    class Full(OSError):
        pass

    try:
        with results.replaced_whole(path) as partial, open(partial, "w") as f:
            f.write('{"epochs": ')
            f.flush()
            assert partial.endswith(".json") and "/." in partial
            raise Full("No space left on device")
    except Full:
        pass
    assert json.loads(path.read_text()) == {"epochs": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]
    results.write_json({"epochs": 2}, path)
    assert json.loads(path.read_text()) == {"epochs": 2}


def test_a_snapshot_that_fails_to_save_leaves_the_last_good_one(tmp_path, monkeypatch):
    import keras
    from conftest import batches, random_images, tiny_gan

    from keras_tpugan.runs.sample import latest_model
    from keras_tpugan.runs.snapshots import Snapshots

    gan = tiny_gan()
    data = batches(random_images(8), 4, repeat=1)
    gan.fit(data, epochs=1, verbose=0, callbacks=[Snapshots(tmp_path / "snapshots", 1)])
    first = tmp_path / "snapshots" / "gan_epoch_0001.keras"
    assert first.exists()

    def torn_save(self, filepath, **kwargs):
        with open(filepath, "wb") as f:
            f.write(b"PK\x03\x04 half a zip")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(type(gan), "save", torn_save)
    try:
        gan.fit(
            data,
            epochs=2,
            initial_epoch=1,
            verbose=0,
            callbacks=[Snapshots(tmp_path / "snapshots", 1)],
        )
    except OSError as e:
        assert e.errno == 28
    else:
        raise AssertionError("the torn save did not fail the fit")
    # The epoch-2 snapshot was never put in place; the first still loads.
    assert sorted(p.name for p in (tmp_path / "snapshots").iterdir()) == [first.name]
    assert latest_model(str(tmp_path)) == str(first)
    monkeypatch.undo()
    assert keras.saving.load_model(first).latent_dim == gan.latent_dim


def test_the_latest_snapshot_is_the_one_of_the_most_epochs(tmp_path):
    from keras_tpugan.runs.sample import latest_model
    from keras_tpugan.runs.snapshots import latest_snapshot, snapshot_path

    folder = tmp_path / "snapshots"
    assert latest_snapshot(str(folder)) is None
    assert latest_model(str(tmp_path)) == str(tmp_path / "generator.keras")
    folder.mkdir()
    for epoch in (10, 9999, 10000):
        open(snapshot_path(str(folder), epoch), "w").close()
    (folder / ".gan_epoch_20000.123.partial.keras").write_text("")  # a torn write
    newest = str(folder / "gan_epoch_10000.keras")
    assert latest_snapshot(str(folder)) == (newest, 10000)  # not by name
    assert latest_model(str(tmp_path)) == newest
