"""Inside torch.compile: each compiled region opens into its backward ops by module, with the
tensors it saved and their bytes, graph breaks between regions, and saved bytes against eager.

Compiled with the aot_eager backend (no C++ compiler), each model once per module."""

from __future__ import annotations

import math
import re
import shutil
import warnings

import pytest
import torch
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func
from torch._functorch.partitioners import min_cut_rematerialization_partition

from graphviz_autograd import explore, make_dot, record, walk
from graphviz_autograd.capture.compiled_regions import (
    GRAPH_BREAK, RECOMPUTED_ATTR, _missing_capability, region_name, regions_text,
)
from graphviz_autograd.graph.autograd_graph import OP, SAVED, SAVED_BY, SAVED_TENSOR_OF, dtype_itemsize
from graphviz_autograd.views.compiled_saving import compare_saved

from .compiled_models import breaking, gpt2, loss_of, resnet

# Opening a region watches a step of AOTAutograd that older torch (2.11) does not have: there the
# region stays one node with a note, which tests/test_record_compile.py checks.
_MISSING = _missing_capability()
pytestmark = pytest.mark.skipif(bool(_MISSING), reason=_MISSING or "-")


class Compiled:
    """A model run eagerly and compiled, each recorded and walked with saved tensors; the
    backward graphs the user's own backend compiled, as it saw them."""

    def __init__(self, make):
        torch._dynamo.reset()
        self.model, x = make()
        with record(self.model) as rec:
            self.eager_loss = loss_of(self.model(x))
        self.eager = walk(self.eager_loss, self.model, collect_saved=True, recorder=rec)
        self.backward_graphs = []

        def keep_backward(graph, example_inputs):
            self.backward_graphs.append(graph)
            return make_boxed_func(graph.forward)

        # The partition inductor uses, which recomputes cheap ops in the backward.
        backend = aot_autograd(fw_compiler=lambda graph, example_inputs: make_boxed_func(graph.forward),
                               bw_compiler=keep_backward, partition_fn=min_cut_rematerialization_partition)
        compiled = torch.compile(self.model, backend=backend)
        with record(self.model) as self.recorder:
            self.loss = loss_of(compiled(x))
        self.graph = walk(self.loss, self.model, collect_saved=True, recorder=self.recorder)
        self.loss.backward()  # the backward graphs compile on the first backward
        self.regions = self.recorder.compiled.regions


@pytest.fixture(scope="module")
def compiled_gpt2():
    pytest.importorskip("transformers")
    return Compiled(gpt2)


@pytest.fixture(scope="module")
def compiled_resnet():
    return Compiled(resnet)


@pytest.fixture(scope="module")
def compiled_breaking():
    return Compiled(breaking)


def region_modules(graph, index=0):
    prefix = region_name(index)
    return {node.module[len(prefix) + 1:] for node in graph.nodes if node.module.startswith(prefix + ".")}


def saved_in_region(graph, index=0):
    return [node for node in graph.nodes if node.kind == SAVED and node.module == region_name(index)]


def test_compiled_gpt2_shows_its_modules_inside_the_region_with_saved_tensors(compiled_gpt2):
    graph = compiled_gpt2.graph
    assert len(compiled_gpt2.regions) == 1
    assert not [n for n in graph.nodes if n.label == "CompiledFunctionBackward"]
    modules = region_modules(graph)
    for layer in (0, 1):
        assert {f"transformer.h.{layer}.attn.c_attn", f"transformer.h.{layer}.mlp.c_fc", f"transformer.h.{layer}.ln_1"} <= modules
    assert "lm_head" in modules and "transformer.wte" in modules
    # The region's modules are boxes with the model's class names.
    types = {m.path: m.type_name for m in graph.modules}
    assert types[region_name(0) + ".transformer.h.0.attn"] == "GPT2Attention"
    saved = saved_in_region(graph)
    assert saved and all(re.search(r"\(\d+(\.\d)? (B|KiB|MiB)\)$", node.label) for node in saved)
    # The weights it saved are named as the parameters they are; activations are not.
    named = {value for node in saved for key, value in node.attrs if key == SAVED_TENSOR_OF}
    assert "transformer.h.0.attn.c_attn.weight" in named and len(named) < len(saved)


def test_compiled_resnet_shows_its_blocks_inside_the_region(compiled_resnet):
    graph = compiled_resnet.graph
    modules = region_modules(graph)
    assert {"conv1", "bn1", "layer1.0.conv1", "layer1.0.bn2", "layer2.0.conv2", "layer2.0.downsample.0", "fc"} <= modules
    ops = {node.label for node in graph.nodes if node.module.startswith(region_name(0))}
    assert "aten.convolution_backward" in ops and "aten.native_batch_norm_backward" in ops
    assert saved_in_region(graph)


def test_recomputed_ops_are_marked(compiled_gpt2):
    region = compiled_gpt2.regions[0]
    marked = [n for n in compiled_gpt2.graph.nodes if any(key == RECOMPUTED_ATTR for key, _ in n.attrs)]
    assert region.recomputed == len(marked) > 0
    assert all(n.label.endswith("(recomputed)") for n in marked)


@pytest.mark.parametrize("name", ["compiled_gpt2", "compiled_resnet", "compiled_breaking"])
def test_saved_bytes_of_a_region_are_its_backward_graphs_saved_inputs(name, request):
    case = request.getfixturevalue(name)
    # The backward graphs compile lazily, in the order the backward runs them (the last region first).
    expected = []
    for backward in case.backward_graphs:
        inputs = [node.meta["val"] for node in backward.graph.nodes
                  if node.op == "placeholder" and not node.name.startswith("tangents")
                  and isinstance(node.meta.get("val"), torch.Tensor)]
        expected.append((sum(math.prod(v.shape) * v.element_size() for v in inputs), len(inputs)))
    drawn = [sum(math.prod(n.shape) * dtype_itemsize(n.dtype) for n in saved_in_region(case.graph, index))
             for index in range(len(case.regions))]
    assert drawn == [region.saved_bytes for region in case.regions] and all(drawn)
    assert sorted(expected) == sorted((region.saved_bytes, len(region.saved)) for region in case.regions)


def test_a_graph_break_splits_two_regions_and_names_its_reason_and_line(compiled_breaking):
    graph, capture = compiled_breaking.graph, compiled_breaking.recorder.compiled
    assert len(capture.regions) == 2
    assert region_modules(graph, 0) == {"first.0", "first.1"} and region_modules(graph, 1) == {"second"}
    # Each parameter sits in its region's box of its module, beside the ops that use it.
    homes = {n.label: n.module for n in graph.nodes if n.kind == "parameter"}
    assert homes == {"first.0.weight": region_name(0) + ".first.0", "first.0.bias": region_name(0) + ".first.0",
                     "second.weight": region_name(1) + ".second", "second.bias": region_name(1) + ".second"}
    (found,) = capture.distinct_breaks()
    assert "print" in found.reason and found.filename.endswith("compiled_models.py")
    assert found.source == 'print("between the regions")  # a graph break'
    (node,) = [n for n in graph.nodes if n.label.startswith(GRAPH_BREAK)]
    assert node.label.endswith(f"compiled_models.py:{found.line}") and dict(node.attrs)["reason"] == found.reason
    assert dict(node.attrs)["where"] == f"compiled_models.py:{found.line}: {found.source}"  # no path of this machine
    # The break is the border, drawn as the forward ran: from region 0's last ops into region 1's first.
    module_of = {n.id: n.module for n in graph.nodes}
    assert {module_of[e.source].split(".")[0] for e in graph.edges if e.target == node.id} == {region_name(0)}
    assert {module_of[e.target].split(".")[0] for e in graph.edges if e.source == node.id} == {region_name(1)}
    text = regions_text(capture)
    assert text.count("compiled region") == 2 and "graph break: " in text and "compiled_models.py" in text


def test_the_drawing_and_the_page_open_the_region(compiled_breaking):
    case = compiled_breaking
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no note that compiled code went unseen
        dot = make_dot(case.graph, show_saved=True).source
    assert 'label="compiled region 0 (torch.compile, saves' in dot and "graph break: " in dot
    assert "primals_" in dot and "CompiledFunctionBackward" not in dot
    if shutil.which("dot") is None:
        return
    data = explore(case.graph).data
    paths = [lv["path"] for lv in data["levels"]]
    assert region_name(0) in paths and region_name(1) + ".second" in paths


@pytest.mark.parametrize("name", ["compiled_gpt2", "compiled_resnet"])
def test_saved_bytes_per_module_eager_against_compiled(name, request):
    case = request.getfixturevalue(name)
    comparison = compare_saved(case.eager, case.graph)
    rows = {m.module: m for m in comparison.modules}
    # A convolution or a linear layer saves its input and weight either way.
    same = "layer1.0.conv1" if name == "compiled_resnet" else "transformer.h.0.attn.c_proj"
    assert rows[same].eager == rows[same].compiled > 0 and rows[same].change == "+0%"
    assert comparison.compiled_total > 0 and comparison.eager_total > 0
    text = comparison.text()
    assert text.splitlines()[0].split() == ["module", "eager", "compiled", "change"]
    assert text.splitlines()[-1].startswith("total") and same in text
    overlay = comparison.overlay()
    assert sum(overlay.values.values()) == comparison.compiled_total
    assert all(case.graph.node(op).kind == OP for op in overlay.values)
    dot = make_dot(case.graph, overlays=[overlay]).source
    assert "eager" in dot


def test_compare_saved_says_what_each_graph_lacks(compiled_breaking):
    from graphviz_autograd.errors import CompiledCaptureError, InputTypeError

    case = compiled_breaking
    with pytest.raises(CompiledCaptureError, match="record\\(model\\)"):
        compare_saved(case.eager, case.eager)
    bare = case.eager.replace(nodes=tuple(n for n in case.eager.nodes if n.kind != SAVED),
                              edges=tuple(e for e in case.eager.edges if e.kind != SAVED_BY))
    with pytest.raises(InputTypeError, match="collect_saved=True"):
        compare_saved(bare, case.graph)
