"""The big-model benchmark measures a model and prints its table. A smoke test: no time is asserted."""

import importlib.util

import pytest
import torch

from benchmarks import big_models

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torchviz compares versions with distutils


def tiny_mlp() -> big_models.Recorded:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    return big_models._recorded(model, lambda m: m(torch.randn(1, 4)))


def broken() -> big_models.Recorded:
    raise RuntimeError("no such model\nsecond line")


def cells(line: str) -> list:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def test_table_of_a_tiny_model_and_a_broken_one(tmp_path):
    rows = [
        big_models.measure(big_models.BigModel("tiny", tiny_mlp), full=True, torchviz_timeout=30, folder=tmp_path),
        big_models.measure(big_models.BigModel("broken", broken), full=True, torchviz_timeout=30, folder=tmp_path),
    ]
    header, rule, tiny, failed = big_models.table(rows).splitlines()
    assert cells(header) == ["model", "nodes", "ours", "ours px", "full graph", "full px", "torchviz", "torchviz px",
                             "torchviz/ours", "flags"]
    row = dict(zip(cells(header), cells(tiny)))
    assert row["model"] == "tiny" and int(row["nodes"]) > 5
    for column in ("ours", "full graph"):
        assert row[column].endswith(" s"), row
    if importlib.util.find_spec("torchviz") is None:
        assert row["torchviz"].startswith("torchviz does not import")
        return
    assert row["torchviz"].endswith(" s"), row
    width, height = row["ours px"].split(" × ")
    assert float(width.replace(",", "")) > 0 and float(height.replace(",", "")) > 0
    float(row["torchviz/ours"])
    assert cells(failed)[:3] == ["broken", "-", "RuntimeError: no such model"]


def test_models_filter_and_svg_size(tmp_path):
    assert [m.name for m in big_models.chosen(["bert", "LLAMA"])] == ["BERT-12", "Llama, 80 layers (meta)"]
    svg = tmp_path / "x.svg"
    svg.write_text('<?xml version="1.0"?>\n<svg width="864pt" height="40000pt" viewBox="0 0 10 10">'
                   '<g id="graph0" class="graph" transform="scale(0.5 0.5) rotate(0)">')
    assert big_models.svg_size(svg) == (864.0, 40000.0, 0.5)
    assert big_models.Drawing(1.0, 864.0, 32_767.0).at_cap
