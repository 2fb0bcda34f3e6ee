"""Loading models to draw: model files, factories, torch.export archives, pickles."""

from __future__ import annotations

import doctest
import os
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from graphviz_autograd.cli import model_file
from graphviz_autograd.graph import autograd_graph as graph
from graphviz_autograd.cli.model_file import (
    EXPORT_ARCHIVE,
    FILE_FACTORY,
    MODEL_FILE,
    MODULE_FACTORY,
    LoadedModel,
    ModelFileError,
    load_model,
    load_model_file,
    parse_model_spec,
    random_inputs,
)

SAMPLES = Path(__file__).parent.parent / "samples"


def write(path: Path, source: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


LINEAR_FACTORY = """
    import torch

    def build():
        torch.manual_seed(0)
        return torch.nn.Linear(4, 2), (torch.randn(3, 4),)
"""


@pytest.mark.parametrize("module", [model_file, graph], ids=lambda m: m.__name__)
def test_docstring_examples_run(module):
    failed, attempted = doctest.testmod(module)
    assert attempted and not failed


# --- specs -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, kind, path, module, factory",
    [
        ("samples/lenet.py", MODEL_FILE, "samples/lenet.py", None, None),
        ("models/net.py:build", FILE_FACTORY, "models/net.py", None, "build"),
        ("net.py:Net.build", FILE_FACTORY, "net.py", None, "Net.build"),
        ("mypackage.models:build", MODULE_FACTORY, None, "mypackage.models", "build"),
        ("models:build", MODULE_FACTORY, None, "models", "build"),
        ("exported.pt2", EXPORT_ARCHIVE, "exported.pt2", None, None),
        ("C:model.py", MODEL_FILE, "C:model.py", None, None),
    ],
)
def test_parse_model_spec(text, kind, path, module, factory):
    spec = parse_model_spec(text)
    assert (spec.kind, spec.module, spec.factory) == (kind, module, factory)
    assert spec.path == (Path(path) if path else None)


def test_an_existing_file_with_a_colon_in_its_name_is_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "a:b", "")
    assert parse_model_spec("a:b").kind == MODEL_FILE


@pytest.mark.parametrize(
    "text, stem",
    [("samples/lenet.py", "lenet"), ("net.py:build", "net"), ("pkg.models:build", "models"), ("m.pt2", "m")],
)
def test_spec_stem_names_default_outputs(text, stem):
    assert parse_model_spec(text).stem == stem


# --- model files -------------------------------------------------------------------


def test_plain_model_file_loads_and_runs():
    loaded = load_model_file(SAMPLES / "matmul_sum.py")
    assert loaded.source == str(SAMPLES / "matmul_sum.py")
    assert loaded.run().shape == ()  # loss(output) is applied


def test_model_file_may_define_dataclasses_with_postponed_annotations(tmp_path):
    # dataclasses look the class's module up in sys.modules
    file = write(
        tmp_path / "config_model.py",
        """
        from __future__ import annotations
        from dataclasses import dataclass
        import torch

        @dataclass
        class Config:
            width: int = 3

        model = torch.nn.Linear(Config().width, 1)
        example_inputs = (torch.randn(2, 3),)
        """,
    )
    assert load_model_file(file).run().shape == (2, 1)


def test_model_file_folder_is_importable_while_factories_run(tmp_path):
    write(tmp_path / "layers.py", "import torch\ndef make():\n    return torch.nn.Linear(2, 2)\n")
    file = write(
        tmp_path / "net.py",
        """
        import torch

        def model():
            import layers  # imported lazily, inside the factory
            return layers.make()

        example_inputs = (torch.randn(1, 2),)
        """,
    )
    assert load_model_file(file).run().shape == (1, 2)
    assert str(tmp_path) not in sys.path


def test_oserror_raised_by_model_code_names_the_line_not_the_file_as_unreadable(tmp_path):
    file = write(tmp_path / "reads_data.py", "import torch\nopen('missing-data.csv')\n")
    with pytest.raises(ModelFileError) as raised:
        load_model_file(file)
    message = str(raised.value)
    assert f"{file}:2" in message and "FileNotFoundError" in message
    assert "cannot be read" not in message


def test_input_shapes_replace_missing_example_inputs(tmp_path):
    file = write(tmp_path / "net.py", "import torch\nmodel = torch.nn.Linear(4, 2)\n")
    with pytest.raises(ModelFileError, match="defines no example_inputs.*It defines: model, torch"):
        load_model_file(file)
    loaded = load_model_file(file, input_shapes=[(3, 4)])
    assert loaded.run().shape == (3, 2)


def test_random_inputs_are_repeatable_and_leave_the_global_rng_alone():
    state = torch.random.get_rng_state()
    first, second = random_inputs([(2, 3)]), random_inputs([(2, 3)])
    assert torch.equal(first[0], second[0])
    assert torch.equal(state, torch.random.get_rng_state())


def test_forward_failure_names_the_line_and_the_input_shapes(tmp_path):
    file = write(
        tmp_path / "bad_forward.py",
        """
        import torch

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(4, 2)

            def forward(self, x):
                return self.fc(x)

        model = Net()
        example_inputs = (torch.randn(3, 5),)
        """,
    )
    with pytest.raises(ModelFileError) as raised:
        load_model_file(file).run()
    message = str(raised.value)
    assert message.startswith(f"{file}:10: the forward pass of Net on input of shape (3, 5) failed: RuntimeError:")
    assert "mat1 and mat2 shapes cannot be multiplied" in message


# --- naming ------------------------------------------------------------------------


def test_tensor_names_cover_parameters_buffers_and_forward_arguments():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(2, 2)
            self.register_buffer("scale", torch.ones(2))

        def forward(self, image, extras, *rest):
            return self.fc(image) * self.scale

    image, mask, first, second = (torch.ones(1, 2) for _ in range(4))
    loaded = LoadedModel(Path("net.py"), Net(), (image, {"mask": mask, "0": mask}, first, second))
    names = loaded.tensor_names()
    assert list(names) == ["fc.weight", "fc.bias", "scale", "image", "extras.mask", "rest[0]", "rest[1]"]
    assert names["image"] is image and names["rest[1]"] is second


def test_inputs_without_a_signature_are_numbered_and_keyword_inputs_keep_their_keys():
    class Anything(torch.nn.Module):
        def forward(self, *args, **kwargs):
            return args

    a, b = torch.ones(1), torch.ones(1)
    assert list(LoadedModel(Path("m.py"), Anything(), (a, b)).input_names()) == ["args[0]", "args[1]"]
    assert list(LoadedModel(Path("m.py"), Anything(), {"ids": a}).input_names()) == ["ids"]
    assert list(LoadedModel(Path("m.py"), torch.nn.Identity(), a).input_names()) == ["input"]


def test_a_parameter_passed_as_input_keeps_its_parameter_name():
    net = torch.nn.Linear(2, 2)
    loaded = LoadedModel(Path("m.py"), net, (net.weight,))
    names = loaded.tensor_names()
    assert [name for name, t in names.items() if t is net.weight] == ["weight"]


# --- train / eval ------------------------------------------------------------------


def test_with_mode_switches_a_copy_and_leaves_the_model_alone():
    net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout())
    net[1].eval()  # a mixed mode, as a file may leave it
    loaded = LoadedModel(Path("m.py"), net, (torch.ones(1, 2),))
    weight = net[0].weight.detach().clone()

    evaluated = loaded.with_mode(False)
    trained = loaded.with_mode(True)

    assert [m.training for m in net.modules()] == [True, True, False]
    assert not any(m.training for m in evaluated.model.modules())
    assert all(m.training for m in trained.model.modules())
    assert evaluated.model is not net and trained.model is not net
    assert torch.equal(net[0].weight, weight) and net[0].weight.requires_grad
    assert loaded.with_mode(None) is loaded


def test_with_mode_does_not_copy_a_model_already_in_that_mode():
    loaded = LoadedModel(Path("m.py"), torch.nn.Linear(2, 2).eval(), torch.ones(2))
    assert loaded.with_mode(False) is loaded


# --- factories ---------------------------------------------------------------------


def test_file_factory(tmp_path):
    file = write(tmp_path / "factories.py", LINEAR_FACTORY)
    loaded = load_model(f"{file}:build")
    assert loaded.run().shape == (3, 2)
    assert loaded.source == f"{file}:build"
    assert loaded.path == file


def test_module_factory_imports_from_the_current_folder(tmp_path, monkeypatch):
    write(tmp_path / "zoo_pkg" / "__init__.py", "")
    write(tmp_path / "zoo_pkg" / "linear_zoo.py", LINEAR_FACTORY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "zoo_pkg", raising=False)
    monkeypatch.delitem(sys.modules, "zoo_pkg.linear_zoo", raising=False)
    loaded = load_model("zoo_pkg.linear_zoo:build")
    assert loaded.run().shape == (3, 2)
    assert parse_model_spec("zoo_pkg.linear_zoo:build").stem == "linear_zoo"
    assert str(tmp_path) not in sys.path and os.getcwd() not in sys.path[:1]


def test_module_factory_import_error_points_at_the_users_line(tmp_path, monkeypatch):
    write(tmp_path / "broken_zoo.py", "import torch\n\nraise RuntimeError('no weights here')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "broken_zoo", raising=False)
    with pytest.raises(ModelFileError, match=r"broken_zoo\.py:3: importing broken_zoo raised RuntimeError: no weights here"):
        load_model("broken_zoo:build")


def test_missing_module(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelFileError, match="no module named 'no_such_zoo'.*PYTHONPATH"):
        load_model("no_such_zoo:build")


@pytest.mark.parametrize(
    "body, message",
    [
        ("def build():\n    return 3\n", r"build\(\) must return \(model, example_inputs\).*got a int"),
        ("def build():\n    return (1, 2, 3)\n", r"got a tuple of 3 \(int, int, int\)"),
        ("build = 3\n", "'build' is a int, not a function"),
        ("def other():\n    pass\n", "defines no 'build'.*It defines: other"),
        ("def build():\n    raise KeyError('depth')\n", r"factories\.py:2: build\(\) raised KeyError"),
    ],
)
def test_factory_mistakes(tmp_path, body, message):
    file = write(tmp_path / "factories.py", body)
    with pytest.raises(ModelFileError, match=message):
        load_model(f"{file}:build")


def test_factory_or_model_without_inputs_needs_input_shapes(tmp_path):
    file = write(tmp_path / "factories.py", "import torch\nnet = torch.nn.Linear(4, 2)\n")
    with pytest.raises(ModelFileError, match="gives a model but no example inputs.*--input-shape"):
        load_model(f"{file}:net")
    assert load_model(f"{file}:net", input_shapes=[(5, 4)]).run().shape == (5, 2)


# --- torch.export archives and pickles ---------------------------------------------


@pytest.fixture(scope="module")
def exported_program():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh())
    return torch.export.export(net, (torch.randn(4, 3),))


def test_export_archive_runs_on_its_stored_inputs(tmp_path, exported_program):
    archive = tmp_path / "seq.pt2"
    torch.export.save(exported_program, archive)
    loaded = load_model(archive)
    output = loaded.run()
    assert output.shape == (4, 2) and output.grad_fn is not None
    assert {"0.weight", "0.bias"} <= set(loaded.tensor_names())
    assert loaded.notes == ()


def test_export_archive_is_recognised_by_content_whatever_its_suffix(tmp_path, exported_program):
    archive = tmp_path / "seq.pt"
    torch.export.save(exported_program, archive)
    assert load_model(archive).run().shape == (4, 2)


def test_all_frozen_export_archive_is_drawn_trainable_with_a_note(tmp_path):
    net = torch.nn.Linear(3, 2).requires_grad_(False)
    archive = tmp_path / "frozen.pt2"
    torch.export.save(torch.export.export(net, (torch.randn(1, 3),)), archive)
    loaded = load_model(archive)
    assert loaded.run().grad_fn is not None
    assert len(loaded.notes) == 1 and "frozen" in loaded.notes[0]


def test_export_archive_mode_is_fixed(tmp_path, exported_program):
    archive = tmp_path / "seq.pt2"
    torch.export.save(exported_program, archive)
    with pytest.raises(ModelFileError, match="fixed when it is exported"):
        load_model(archive).with_mode(False)


def test_pickled_module_is_refused_without_running_it(tmp_path):
    path = tmp_path / "net.pt"
    torch.save(torch.nn.Linear(2, 2), path)
    with pytest.raises(ModelFileError) as raised:
        load_model(path)
    message = str(raised.value)
    assert "pickled torch.save() file" in message and "weights_only=True" in message
    assert "torch.nn.modules.linear.Linear" in message
    for form in ("model.py", "file.py:factory", "package.module:factory", ".pt2"):
        assert form in message


def test_state_dict_is_refused_with_a_pointer_to_load_state_dict(tmp_path):
    path = tmp_path / "weights.pth"
    torch.save(torch.nn.Linear(2, 2).state_dict(), path)
    with pytest.raises(ModelFileError, match="holds only tensors.*load_state_dict"):
        load_model(path)
