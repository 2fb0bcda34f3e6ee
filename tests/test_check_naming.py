"""Leaves kept outside registered parameters are found and named by the attribute path that holds them."""

from __future__ import annotations

import textwrap

import torch
from click.testing import CliRunner
from torch import nn

from graphviz_autograd import check, make_dot, record, walk
from graphviz_autograd.capture.attribute_names import unregistered_tensors
from graphviz_autograd.cli.commands import main


class PlainList(nn.Module):
    """The beginner's form: a layer in a plain list, with or without a registered one beside it."""

    def __init__(self, registered: bool):
        super().__init__()
        torch.manual_seed(0)
        if registered:
            self.body = nn.Linear(4, 4)
        self.layers = [nn.Linear(4, 4)]

    def forward(self, x):
        if hasattr(self, "body"):
            x = self.body(x)
        return self.layers[0](x).sum()


def errors(findings):
    return sorted((f.code, f.subject) for f in findings if f.severity == "error")


def test_a_layer_in_a_plain_list_is_found_with_or_without_registered_parameters():
    expected = [("unregistered_leaf", "layers[0].bias"), ("unregistered_leaf", "layers[0].weight")]
    for registered in (True, False):
        model = PlainList(registered)
        assert errors(check(model(torch.randn(2, 4)), model, backward=True)) == expected, registered


def test_the_message_says_which_container_to_use():
    model = PlainList(False)
    finding = check(model(torch.randn(2, 4)), model)[0]
    assert finding.message.startswith("layers[0].")
    assert "nn.ModuleList / nn.ModuleDict" in finding.message


class Nested(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Sequential(nn.Linear(2, 2))
        self.block.extra = {"gate": [nn.Linear(2, 2)]}  # inside a registered submodule
        self.heads = {"a": nn.Linear(2, 1)}
        self.scales = (torch.ones(1, requires_grad=True),)
        self.itself = [self]  # a cycle back to the model

    def forward(self, x):
        h = self.block(x) + self.block.extra["gate"][0](x)
        return (self.heads["a"](h) * self.scales[0]).sum()


def test_every_leaf_reachable_from_the_attributes_is_named_by_its_path():
    model = Nested()
    assert list(unregistered_tensors(model)) == [
        "block.extra['gate'][0].weight",
        "block.extra['gate'][0].bias",
        "heads['a'].weight",
        "heads['a'].bias",
        "scales[0]",
    ]
    loss = model(torch.randn(3, 2))
    leaves = {n.label for n in walk(loss, model).nodes if n.kind in ("parameter", "leaf")}
    assert {"heads['a'].weight", "block.extra['gate'][0].bias", "scales[0]"} <= leaves
    assert "(unnamed)" not in make_dot(loss, model).source
    assert len(errors(check(loss, model))) == 5


def test_a_recorder_names_the_forward_inputs_by_argument():
    model = nn.Linear(3, 1)
    features = torch.randn(2, 3, requires_grad=True)
    with record(model) as rec:
        out = model(features).sum()
    source = make_dot(out, recorder=rec).source
    assert "label=\"input\\n(2, 3)\"" in source and "(unnamed)" not in source
    # an input that requires grad is no stray weight once the recorder knows it
    assert check(out, model, recorder=rec, top_memory=0) == []


def test_cli_check_fails_on_a_model_with_only_a_plain_list(tmp_path):
    path = tmp_path / "net.py"
    path.write_text(textwrap.dedent("""
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = [nn.Linear(4, 4)]

            def forward(self, x):
                return self.layers[0](x).sum()

        model = Net()
        example_inputs = (torch.randn(2, 4),)
    """))
    result = CliRunner().invoke(main, ["check", str(path), "-q"])
    assert result.exit_code == 1, result.output
    assert "layers[0].weight" in result.output
    drawn = CliRunner().invoke(main, ["render", str(path), "-q", "-o", "-"])
    assert "layers[0].weight" in drawn.output
