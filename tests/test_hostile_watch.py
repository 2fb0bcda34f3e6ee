"""Hostile and unlucky inputs to ``watch()``: every save names its failure with the
package's errors and leaves nothing half-written, a module's name that UTF-8 cannot
carry reaches the page escaped, and a page that cannot be written never stops training."""

from __future__ import annotations

import json
import os
import warnings

import pytest
import torch
from torch import nn

from graphviz_autograd import OutputPathError, watch

from .test_watch import Net, train


class Hostile(nn.Module):
    """A layer named with a lone surrogate, and one with control characters."""

    def __init__(self) -> None:
        super().__init__()
        self.add_module("a\ud800b", nn.Linear(4, 4))
        self.add_module("u\x1b]0;t\x07", nn.Linear(4, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return getattr(self, "u\x1b]0;t\x07")(getattr(self, "a\ud800b")(x))


def test_a_module_named_with_a_lone_surrogate_is_saved_escaped(tmp_path):
    w = train(Hostile(), 4, {"every": 1})
    written = w.save(tmp_path / "run.html")
    html = written.read_text(encoding="utf-8")
    assert "a\\\\ud800b" in html  # the name as the page shows it, in its JSON
    timeline = w.page().data["timeline"]
    assert "a\\ud800b.weight" in timeline["statistics"]["grad_norm"]
    assert "u\\x1b]0;t\\x07" in timeline["statistics"]["activation_std"]
    data = json.loads(w.save_json(tmp_path / "run.json").read_text(encoding="utf-8"))
    assert "a\ud800b.weight" in data["statistics"]["grad_norm"]  # JSON carries the name itself, as \ud800
    assert sorted(os.listdir(tmp_path)) == ["run.html", "run.json"]


def test_a_page_written_while_training_with_a_hostile_name_does_not_stop_it(tmp_path):
    target = tmp_path / "run.html"
    model = Hostile()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with watch(model, optimizer=opt, every=1, page=target) as w:
        for _ in range(3):
            model(torch.randn(2, 4)).pow(2).mean().backward()
            opt.step()
            opt.zero_grad()
    assert w.steps == [0, 1, 2]
    assert '"steps"' in target.read_text(encoding="utf-8")


def test_a_page_that_cannot_be_written_is_warned_of_once_and_training_goes_on(tmp_path):
    folder = tmp_path / "pages"
    folder.mkdir()
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with watch(model, optimizer=opt, every=1, page=folder / "run.html") as w:
            folder.rmdir()  # the folder is gone before the first page
            for _ in range(4):
                model(torch.randn(2, 4)).pow(2).mean().backward()
                opt.step()
                opt.zero_grad()
    assert w.steps == [0, 1, 2, 3]
    said = [str(warning.message) for warning in caught if "watch(page=...)" in str(warning.message)]
    assert len(said) == 1, said
    assert said[0].startswith(
        f"watch(page=...) could not write the page at step 0: Cannot write {str(folder / 'run.html')!r}: "
        f"the directory {str(folder)!r} does not exist. Create it first. Training goes on"
    ), said[0]


@pytest.mark.parametrize("save", ["save_json", "save"])
def test_a_save_into_a_read_only_folder_is_an_output_path_error(tmp_path, monkeypatch, save):
    w = train(Net(), 2, {"every": 1})
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o500)
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # root writes anyway: the folder says no as it would to a user
        access = os.access
        monkeypatch.setattr(os, "access", lambda path, mode: False if os.fspath(path) == str(folder) else access(path, mode))
    try:
        with pytest.raises(OutputPathError, match=r"Cannot write .*locked/run': the directory .*locked' is not writable\."):
            getattr(w, save)(folder / "run")
        assert os.listdir(folder) == []
    finally:
        folder.chmod(0o700)


@pytest.mark.parametrize("save", ["save_json", "save"])
def test_a_save_onto_a_folder_is_an_output_path_error(tmp_path, monkeypatch, save):
    monkeypatch.chdir(tmp_path)
    w = train(Net(), 2, {"every": 1})
    os.mkdir("some_folder")
    with pytest.raises(OutputPathError, match=r"^Cannot write 'some_folder': it is a directory\. Give a file name\.$"):
        getattr(w, save)("some_folder")
    assert os.listdir("some_folder") == [] and sorted(os.listdir(".")) == ["some_folder"]


def test_a_save_that_fails_while_writing_leaves_no_temporary_file(tmp_path, monkeypatch):
    w = train(Net(), 2, {"every": 1})
    target = tmp_path / "run.json"
    target.write_text("old")

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OutputPathError, match=r"Cannot write .*run\.json': No space left on device\."):
        w.save_json(target)
    assert sorted(os.listdir(tmp_path)) == ["run.json"] and target.read_text() == "old"


def test_a_tensorboard_folder_that_is_a_file_is_an_output_path_error(tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    from graphviz_autograd.integrations.tensorboard import log_to_tensorboard

    monkeypatch.chdir(tmp_path)
    with open("runs", "w") as handle:
        handle.write("a file\n")
    w = train(Net(), 2, {"every": 1})
    with pytest.raises(OutputPathError, match=r"^Cannot write into 'runs': it is a file, not a folder\. Give a folder's path\.$"):
        log_to_tensorboard(w, "runs")
    with pytest.raises(OutputPathError, match=r"^Cannot write into 'runs/inner': 'runs' is a file, not a folder\."):
        log_to_tensorboard(w, os.path.join("runs", "inner"))
    assert sorted(os.listdir(".")) == ["runs"]


def test_modules_put_into_the_model_after_watch_started_are_named_once_in_a_finding():
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not taken for torch.compile'd code
        with watch(model, optimizer=opt, every=1) as w:
            for step in range(5):
                if step == 2:
                    model.fc2 = nn.Linear(8, 8)  # in place of a watched one
                    model.extra = nn.Tanh()  # a new one
                    opt.add_param_group({"params": model.fc2.parameters()})
                model(torch.randn(2, 4)).pow(2).mean().backward()
                opt.step()
                opt.zero_grad()
    found = [f for f in w.findings() if f.code == "unwatched_module"]
    assert [(f.severity, f.subject) for f in found] == [("info", "fc2")]
    assert found[0].message == (
        "2 modules were put into the model after watch() started, so their calls have no statistics: "
        "fc2 (Linear, seen from step 2), extra (Tanh, seen from step 2). "
        "Build the whole model, or replace its modules, before entering watch()."
    )
    assert "fc2" not in w.latest("activation_std")  # its calls were indeed not measured
    quiet = train(Net(), 3, {"every": 1})
    assert not [f for f in quiet.findings() if f.code == "unwatched_module"]


def test_a_parameter_set_after_watch_started_is_the_one_measured_from_then_on():
    # The watcher walks the model's parameters again only when a module or parameter is set:
    # a layer's weight replaced mid-run must be the weight whose norm is logged after it.
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.0)  # no change: the norm logged is the weight's own
    with watch(model, optimizer=opt, every=1) as w:
        for step in range(4):
            if step == 2:
                model.fc1.weight = nn.Parameter(torch.full_like(model.fc1.weight, 3.0))
                opt.add_param_group({"params": [model.fc1.weight]})
            model(torch.randn(2, 4)).pow(2).mean().backward()
            opt.step()
            opt.zero_grad()
    norms = w.series("param_norm")["fc1.weight"]
    assert norms[-1] == pytest.approx(model.fc1.weight.norm().item())
    assert norms[1] != pytest.approx(norms[-1])


def test_a_page_that_fails_to_be_made_does_not_stop_training(tmp_path, monkeypatch):
    from graphviz_autograd.training.watching import Watcher

    def broken(self, graph=None, title=None):
        raise UnicodeEncodeError("utf-8", "a\ud800b", 1, 2, "surrogates not allowed")

    monkeypatch.setattr(Watcher, "page", broken)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with pytest.warns(RuntimeWarning, match=r"could not write the page at step 0: UnicodeEncodeError: .*Training goes on"):
        with watch(model, optimizer=opt, every=1, page=tmp_path / "run.html") as w:
            for _ in range(3):
                model(torch.randn(2, 4)).pow(2).mean().backward()
                opt.step()
                opt.zero_grad()
    assert w.steps == [0, 1, 2] and os.listdir(tmp_path) == []
