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
