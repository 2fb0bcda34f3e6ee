"""The C loops (``_speedups.c``) give the same graph and the same bytes as the Python loops.

Each comparison draws a graph twice in one process: once as installed (with the C
loops when they were built) and once with ``ACCELERATED`` set to None in every
module that reads it, which is what ``GRAPHVIZ_AUTOGRAD_PURE_PYTHON=1`` or a build
without a C compiler gives.
"""

from __future__ import annotations

import collections
import collections.abc
import contextlib
import gc
import importlib
import importlib.util
import inspect
import os
import sys
import tracemalloc
import weakref

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from graphviz_autograd import make_dot, speedups, to_dot
from graphviz_autograd.dot import forget_written_attrs
from graphviz_autograd.walk import walk

from .graph_cases import CASES
from .test_columns import _walk_as_make_dot_would

# The modules, not the package's functions of the same names.
walk_module, dot, layout = (importlib.import_module(f"graphviz_autograd.{name}") for name in ("walk", "dot", "layout"))
_ACCELERATED_BY = (walk_module, dot, layout)

needs_c = pytest.mark.skipif(
    speedups.ACCELERATED is None, reason="the C loops are not in use here (not built, or GRAPHVIZ_AUTOGRAD_PURE_PYTHON is set)"
)


@contextlib.contextmanager
def pure_python():
    """Every module runs its Python loops, as without the C ones."""
    kept = [module.ACCELERATED for module in _ACCELERATED_BY]
    for module in _ACCELERATED_BY:
        module.ACCELERATED = None
    forget_written_attrs()
    try:
        yield
    finally:
        for module, accelerated in zip(_ACCELERATED_BY, kept):
            module.ACCELERATED = accelerated
        forget_written_attrs()


def test_the_c_loops_are_built_where_ci_asks_for_them():
    """CI sets GRAPHVIZ_AUTOGRAD_REQUIRE_SPEEDUPS=1: there, a build that fell back to Python fails."""
    if os.environ.get("GRAPHVIZ_AUTOGRAD_REQUIRE_SPEEDUPS") != "1":
        pytest.skip("GRAPHVIZ_AUTOGRAD_REQUIRE_SPEEDUPS is not set")
    assert importlib.util.find_spec("graphviz_autograd._speedups") is not None
    if os.environ.get(speedups.PURE_PYTHON_VARIABLE, "") in ("", "0"):
        assert speedups.ACCELERATED is not None


def test_the_variable_turns_the_c_loops_off(monkeypatch):
    monkeypatch.setenv(speedups.PURE_PYTHON_VARIABLE, "1")
    assert speedups._load() is None
    monkeypatch.setenv(speedups.PURE_PYTHON_VARIABLE, "0")
    built = importlib.util.find_spec("graphviz_autograd._speedups") is not None
    assert (speedups._load() is not None) == built


@needs_c
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_hard_case_walks_and_draws_alike_in_c_and_python(name):
    case = CASES[name]()
    walked = _walk_as_make_dot_would(case)
    drawn = make_dot(case.outputs, case.params, **case.options).source
    dot_options = {k: v for k, v in case.options.items() if k in inspect.signature(dot.body_lines).parameters}
    joined = to_dot(walked, **dot_options)
    with pure_python():
        walked_in_python = _walk_as_make_dot_would(case)
        assert walked_in_python.columns() == walked.columns()
        assert make_dot(case.outputs, case.params, **case.options).source == drawn
        assert to_dot(walked_in_python, **dot_options) == joined


@needs_c
def test_a_chain_longer_than_a_run_of_joined_lines(monkeypatch):
    monkeypatch.setattr(dot, "_JOIN_EVERY", 7)
    x = torch.ones(2, requires_grad=True)
    y = x
    for i in range(40):
        y = y * 2 if i % 3 else torch.cat([y, y])[:2]
    graph = walk(y.sum(), {"x": x})
    in_c = to_dot(graph)
    with pure_python():
        assert to_dot(walk(y.sum(), {"x": x})) == in_c


# --- random graphs -------------------------------------------------------------------

_OPS = ("mul", "add", "cat", "mm", "reuse", "detach", "const", "split")


def _build(program: list[tuple[str, int, int]]):
    """A graph from a program of (op, a, b): each op reads earlier values a and b (mod count)."""
    torch.manual_seed(0)
    weight = torch.randn(3, 3, requires_grad=True)
    bias = torch.randn(3, requires_grad=True)
    values = [torch.randn(3, requires_grad=True), weight.sum(0)]
    for op, a, b in program:
        left, right = values[a % len(values)], values[b % len(values)]
        if op == "mul":
            values.append(left * right)
        elif op == "add":
            values.append(left + bias)
        elif op == "cat":
            values.append(torch.cat([left, right, left])[:3])
        elif op == "mm":
            values.append(weight @ left)
        elif op == "reuse":
            values.append(left * weight[0] + weight[1])
        elif op == "detach":
            values.append(left.detach() * right)
        elif op == "const":
            values.append(left * torch.ones(3))
        else:
            first, second, third = (left * 1.5).split(1)
            values.extend([torch.cat([third, first, second]), torch.cat([second, second, first])])
    outputs = {"last": values[-1], "pair": (values[-2], values[len(values) // 2])}
    return outputs, {"weight": weight, "bias": bias}


@needs_c
@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(_OPS), st.integers(0, 50), st.integers(0, 50)), max_size=25),
    st.booleans(),
    st.booleans(),
)
def test_random_graphs_walk_and_draw_alike_in_c_and_python(program, with_params, show_no_grad):
    outputs, params = _build(program)
    params = params if with_params else None
    graph = walk(outputs, params)
    joined = to_dot(graph, show_no_grad=show_no_grad)
    lines = make_dot(outputs, params, show_no_grad=show_no_grad).source
    with pure_python():
        graph_in_python = walk(outputs, params)
        assert graph_in_python.columns() == graph.columns()
        assert to_dot(graph_in_python, show_no_grad=show_no_grad) == joined
        assert make_dot(outputs, params, show_no_grad=show_no_grad).source == lines


# --- what the C loops do with what they do not expect ------------------------------------


class _FakeFn:
    """A grad_fn-like object: a name and next_functions, as the walk reads them."""

    def __init__(self, inputs):
        self.next_functions = inputs

    def name(self):
        return type(self).__name__


class FakeBackward(_FakeFn):
    pass


class BrokenBackward(_FakeFn):
    @property
    def next_functions(self):
        raise RuntimeError("next_functions cannot be read")

    @next_functions.setter
    def next_functions(self, value):
        pass


def _walk_fake(root):
    walker = walk_module._Walker({}, False, False)
    index = walker.new_index()
    walker.fn_index[root] = index
    walker.drain_any([root])
    return walker.contents, walker.links


@needs_c
def test_next_functions_as_a_list_walks_as_in_python():
    shared = FakeBackward(())
    root = FakeBackward([(shared, 0), (None, 0), (FakeBackward([(shared, 0)]), 0)])
    in_c = _walk_fake(root)
    with pure_python():
        assert _walk_fake(root) == in_c


@needs_c
@pytest.mark.parametrize(
    "inputs, error",
    [
        ([(None,)], TypeError),
        ([None], TypeError),
        (5, TypeError),
    ],
)
def test_malformed_next_functions_raise_instead_of_crashing(inputs, error):
    with pytest.raises(error):
        _walk_fake(FakeBackward(inputs))


@needs_c
def test_an_error_reading_next_functions_reaches_the_caller():
    with pytest.raises(RuntimeError, match="cannot be read"):
        _walk_fake(FakeBackward([(BrokenBackward(()), 0)]))


@needs_c
def test_a_stack_changed_while_the_walk_runs_raises_instead_of_crashing():
    """The C loop keeps each stacked grad_fn's index beside the stack; code that
    next_functions runs could push onto the stack behind its back."""
    stack = []

    class MeddlingBackward(_FakeFn):
        @property
        def next_functions(self):
            stack.append(FakeBackward(()))  # a node the walk never numbered
            return ()

        @next_functions.setter
        def next_functions(self, value):
            pass

    root = FakeBackward([(MeddlingBackward(()), 0)])
    walker = walk_module._Walker({}, False, False)
    walker.fn_index[root] = walker.new_index()
    stack.append(root)
    with pytest.raises(RuntimeError, match="stack was changed"):
        walker.drain_any(stack)


@needs_c
@pytest.mark.parametrize(
    "links, error",
    [
        ([(0, 1)], TypeError),
        ([(0, 5, ("data", None, None))], IndexError),
        ([("a", 0, ("data", None, None))], TypeError),
        ([(0, 0, ("no such kind", None, None))], KeyError),
    ],
)
def test_malformed_links_raise_instead_of_crashing(links, error):
    with pytest.raises(error):
        speedups.ACCELERATED.edge_text(["n0", "n1"], links, 0, len(links), {"data": "\n"})
    with pytest.raises(error):
        speedups.ACCELERATED.dot_text([], ["n0", "n1"], [], links, _lookup(None), {"data": "\n"}, [])


def _links_of(links):
    """A C ``Links`` holding ``links`` (tuples)."""
    kept = speedups.ACCELERATED.Links()
    for link in links:
        kept.append(link)
    return kept


def _walked_links():
    """The links of a small model walked in C, and the same walked in Python (a list)."""
    model, loss = _model_output()
    in_c = walk(loss, dict(model.named_parameters())).columns(fill_ids=False).links
    with pure_python():
        in_python = walk(loss, dict(model.named_parameters())).columns(fill_ids=False).links
    return in_c, in_python


@needs_c
def test_a_c_walks_links_read_as_the_list_a_python_walk_makes():
    links, as_list = _walked_links()
    assert type(links) is speedups.ACCELERATED.Links and type(as_list) is list
    assert links == as_list and as_list == links and not links != as_list
    assert len(links) == len(as_list) == 15
    assert list(links) == as_list and [tuple(link) for link in iter(links)] == as_list
    for k in (0, 7, 14, -1, -15):
        assert links[k] == as_list[k]
    for cut in (slice(1, 4), slice(None, None, -1), slice(2, None, 3), slice(20, 30), slice(-3, None)):
        assert links[cut] == as_list[cut]
    for k in (15, -16, 2**70):
        with pytest.raises(IndexError):
            links[k]
    with pytest.raises(TypeError):
        links["0"]
    with pytest.raises(TypeError):
        hash(links)
    assert isinstance(links, collections.abc.Sequence)
    assert repr(links) == f"Links({as_list!r})"
    assert links != as_list[:-1] and links != _links_of(as_list[:-1]) and links == _links_of(as_list)


@needs_c
def test_a_c_walks_links_pickle_and_copy_as_a_list():
    import copy
    import pickle

    links, as_list = _walked_links()
    for copied in (pickle.loads(pickle.dumps(links)), copy.copy(links), copy.deepcopy(links)):
        assert type(copied) is list and copied == as_list


@needs_c
def test_links_take_only_link_tuples_and_let_their_rests_go():
    links = speedups.ACCELERATED.Links()
    for bad, error in [((0, 1), TypeError), ((0, 1, ["data"]), TypeError), (("0", 1, ("data",)), TypeError),
                       ((-1, 0, ("data",)), ValueError), ([0, 1, ("data",)], TypeError)]:
        with pytest.raises(error):
            links.append(bad)
    assert len(links) == 0
    with pytest.raises(TypeError):
        speedups.ACCELERATED.Links([(0, 1, ("data",))])
    rest = ("data", None, "a dtype of its own")
    held = sys.getrefcount(rest)
    links.append((0, 1, rest))
    assert links[0] == (0, 1, rest)  # reading makes the ints 0 and 1 ...
    links.append((900, 1000, rest))  # ... and a later, bigger index still reads right
    assert links[1] == (900, 1000, rest) and links[1][0] == 900
    del links
    assert sys.getrefcount(rest) == held


@needs_c
def test_the_c_readers_read_links_of_either_kind_alike():
    links, as_list = _walked_links()
    ids = [f"n{i}" for i in range(20)]
    contents = [("op", "X") if i % 3 else ("accumulate_grad", "A") for i in range(20)]
    ends = {"data": "\n", "no_grad": " [style=dashed]\n"}
    c = speedups.ACCELERATED
    for one, other in [(links, as_list), (_links_of([(0, 1, ("data", None, None))] * 3), [(0, 1, ("data", None, None))] * 3)]:
        assert c.edge_text(ids, one, 0, 99, ends) == c.edge_text(ids, other, 0, 99, ends)
        assert c.edge_text(ids, one, 2, 5, ends) == c.edge_text(ids, other, 2, 5, ends)
        assert c.shared_sources(one, contents, "accumulate_grad", 1) == c.shared_sources(other, contents, "accumulate_grad", 1)
        assert c.any_edge_shape(one) is c.any_edge_shape(other) is False
        lookup = _lookup(lambda i: "[x]")
        assert c.dot_text([], ids, contents, one, lookup, ends, []) == c.dot_text([], ids, contents, other, lookup, ends, [])
    assert c.any_edge_shape(_links_of([(0, 1, ("data", (2, 3), None))])) is True
    assert c.shared_sources(_links_of([(0, 1, ("data",))] * 3), [("accumulate_grad",), ("op",)], "accumulate_grad", 2) == {0: 3}
    with pytest.raises(IndexError):  # an index past the ids
        c.edge_text(["n0"], _links_of([(0, 1, ("data",))]), 0, 1, {"data": "\n"})
    with pytest.raises(TypeError):
        c.edge_text(["n0"], (), 0, 1, {"data": "\n"})


def _lookup(miss):
    """A lookup for node_text and dot_text with nothing kept: every node's attributes from ``miss``."""
    return ({}, miss, {}, 50, 100)


@needs_c
def test_node_attributes_that_are_not_text_raise():
    with pytest.raises(TypeError):
        speedups.ACCELERATED.node_text(["n0"], [("op",)], 0, 1, _lookup(lambda i: 5))
    with pytest.raises(TypeError):
        speedups.ACCELERATED.dot_text([], None, [("op",)], [], _lookup(lambda i: 5), {}, [])
    with pytest.raises(ZeroDivisionError):  # an error in Python code called back reaches the caller
        speedups.ACCELERATED.dot_text([], None, [("op",)], [], _lookup(lambda i: 1 / 0), {}, [])


@needs_c
def test_text_of_any_width_is_written_whole():
    """Latin-1, two-byte and four-byte characters in ids, attributes and the pieces around."""
    ids = ["n\u00e9", "n\u4e00", "n\U0001f600"]
    contents = [("a",), ("b",), ("c",)]
    attrs = {0: "[label=\"\u00e9\"]", 1: "[label=x]", 2: "[label=\"\U0001f600\"]"}
    links = [(0, 1, ("data",)), (2, 0, ("cut",))]
    ends = {"data": "\n", "cut": " [style=dashed]\n"}
    text = speedups.ACCELERATED.dot_text(["\u4e8c{\n"], ids, contents, links, _lookup(attrs.__getitem__), ends, ["}\n"])
    lines = speedups.ACCELERATED.node_text(ids, contents, 0, 3, _lookup(attrs.__getitem__))
    lines += speedups.ACCELERATED.edge_text(ids, links, 0, 2, ends)
    assert text == "".join(["\u4e8c{\n", *lines, "}\n"])
    assert lines[2] == "\tn\U0001f600 [label=\"\U0001f600\"]\n"
    assert lines[4] == "\tn\U0001f600 -> n\u00e9 [style=dashed]\n"


# --- references ---------------------------------------------------------------------


def _model_output():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    return model, model(torch.randn(3, 4)).sum()


@needs_c
def test_a_walk_keeps_no_tensor_or_grad_fn_alive():
    model, loss = _model_output()
    graph = walk(loss, dict(model.named_parameters()))
    to_dot(graph)
    weight = weakref.ref(model[0].weight)
    output = weakref.ref(loss)
    del model, loss
    gc.collect()
    assert weight() is None and output() is None
    assert len(graph.nodes) > 5  # the graph itself lives on, as plain data


@needs_c
def test_walking_again_and_again_does_not_grow_memory():
    model, loss = _model_output()
    params = dict(model.named_parameters())
    for _ in range(20):  # the first drawings fill the kept attributes
        to_dot(walk(loss, params))
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(300):
            to_dot(walk(loss, params))
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # A leaked int or tuple per node would be some 300 * 20 * 28 bytes.
    assert grown < 20_000, grown


@needs_c
def test_the_c_loop_writes_a_walked_graphs_ids_without_building_them():
    x = torch.ones(2, requires_grad=True)
    y = x
    for _ in range(120):  # ids of one, two and three digits
        y = y * 2
    graph = walk(y, {"x": x})
    source = to_dot(graph)
    assert graph.__dict__["_columns"].ids is None
    assert "\tn10 -> n8\n" in source and "\tn100 -> n98\n" in source and "\tn242 [" in source
    with pure_python():
        assert to_dot(walk(y, {"x": x})) == source


@needs_c
def test_links_and_leaves_of_a_c_walk_are_left_out_of_the_cyclic_collector():
    """The links are kept in a Links, and parameters' contents hold only ints, strings
    and such tuples: the first collection after the walk would go over each of them
    only to stop tracking it."""
    model, loss = _model_output()
    walk_module._PLAIN_OPS.clear()  # as in a new process: no node type met yet
    for tracked_parameters in (1, 0):
        graph = walk(loss, dict(model.named_parameters()))
        columns = graph.columns(fill_ids=False)
        assert type(columns.links) is speedups.ACCELERATED.Links and len(columns.links) == 15
        assert not gc.is_tracked(columns.links)
        # The first walk makes the first parameter's content in Python (the first
        # node of a type met goes through _Walker.content_of; later walks know the type).
        parameters = [c for c in columns.contents if c[0] == "parameter"]
        assert len(parameters) == 4 and sum(map(gc.is_tracked, parameters)) == tracked_parameters


def _parameters_for_names():
    shared, other = torch.ones(2), torch.zeros(3)
    return [
        {"first": shared, "second": shared, "other": other},  # tied: the first name is kept
        {"a": shared, 7: other},  # a name that is not a str
        {"a": shared, "b": 3.0},  # not a tensor: the Python loop says so
        collections.OrderedDict(b=other, a=shared),
        {},
    ]


@needs_c
@pytest.mark.parametrize("case", range(len(_parameters_for_names())))
def test_parameter_names_in_c_are_those_of_the_python_loop(case):
    params = _parameters_for_names()[case]  # built anew: ids must stay those of these tensors

    def names():
        try:
            return walk_module._parameter_names(params)
        except Exception as error:  # noqa: BLE001 - the same error either way
            return f"{type(error).__name__}: {error}"

    in_c = names()
    with pure_python():
        assert names() == in_c
    if case == 0:
        assert in_c == {id(params["first"]): "first", id(params["other"]): "other"}


def test_node_types_are_kept_between_walks_but_not_for_good(monkeypatch):
    monkeypatch.setattr(walk_module, "_PLAIN_OPS", {})
    monkeypatch.setattr(walk_module, "_PLAIN_OPS_KEPT", 3)
    first_type = None
    for i in range(8):  # a custom Function made anew each time round, as in a loop
        function = type(
            f"Step{i}",
            (torch.autograd.Function,),
            {"forward": staticmethod(lambda ctx, x: x * 2), "backward": staticmethod(lambda ctx, grad: grad * 2)},
        )
        y = function.apply(torch.ones(2, requires_grad=True)).sum()
        graph = walk(y)
        assert f"Step{i}Backward" in {n.label for n in graph.nodes}
        assert len(walk_module._PLAIN_OPS) <= 3
        if first_type is None:
            first_type = weakref.ref(type(y.grad_fn.next_functions[0][0]))
            assert first_type() in walk_module._PLAIN_OPS
        del function, y, graph
    gc.collect()
    assert first_type() is None  # dropped from the kept types, and freed


def test_walks_that_note_more_than_the_type_keep_nothing_between_walks(monkeypatch):
    monkeypatch.setattr(walk_module, "_PLAIN_OPS", {})
    x = torch.ones(2, requires_grad=True)
    graph = walk((x * 2).exp().sum(), collect_saved=True)
    assert walk_module._PLAIN_OPS == {}
    assert any(n.attrs for n in graph.nodes)
    walk((x * 2).exp().sum())
    assert len(walk_module._PLAIN_OPS) == 4  # Sum, Exp, Mul, AccumulateGrad


# Names the C loop puts between a named tensor's parts as they are, and names it leaves
# to Python: to escape, not ASCII, longer than the label shows, empty.
_TENSOR_NAMES = [
    "w", "layer.0.weight", "layer.1.weight", 'say "hi"', "a&b", "back\\slash", "tab\tname",
    "caf\u00e9", "\u6743\u91cd", "del\x7f", "x" * 60, "y" * 12, "",
]


def _named_tensors_alike():
    # Shapes of one to three dimensions: a named tensor's pieces are written once for all.
    tensors = [torch.ones((2,) * (i % 3 + 1), requires_grad=True) for i in range(len(_TENSOR_NAMES))]
    params = {name: t for name, t in zip(_TENSOR_NAMES, tensors) if name}
    outputs = {"loss": sum((t * (i + 1)).sum() for i, t in enumerate(tensors)), 'out "2"': tensors[1] * 3}
    return outputs, params


@needs_c
@pytest.mark.parametrize(
    "options",
    [{}, {"max_attr_chars": 10}, {"show_device": True}, {"theme": {"parameter": {"tooltip": "fixed"}}}],
)
def test_named_tensors_put_together_in_c_are_written_as_python_writes_them(options):
    outputs, params = _named_tensors_alike()
    for named in (params, None):  # without params, leaves are drawn unnamed
        graph = walk(outputs, named)
        in_c, in_python = _drawn_both_ways(
            lambda: [to_dot(graph, **options), to_dot(graph, **options), make_dot(outputs, named, **options).source]
        )
        assert in_python == in_c


def _drawn_both_ways(draw):
    """``draw()`` with the C loops, then with the Python ones, each from no kept node text
    (a first drawing, then what the drawings after it find kept)."""
    forget_written_attrs()
    in_c = draw()
    with pure_python():
        return in_c, draw()


@needs_c
def test_named_tensors_alike_are_put_together_without_python(monkeypatch):
    outputs, params = _named_tensors_alike()
    graph = walk(outputs, params)
    contents = graph.columns(fill_ids=False).contents
    asked = []
    original = dot._Writer.attrs_at

    def attrs_at(writer, index):
        asked.append(contents[index][1])
        return original(writer, index)

    monkeypatch.setattr(dot._Writer, "attrs_at", attrs_at)
    forget_written_attrs()
    to_dot(graph)
    # The first name writes the pieces; the other plain names are put together in C,
    # whatever their shape or length (a long one cut for the label); the rest need
    # escaping or are not ASCII.
    parameters_asked = [name for name in asked if name in params]
    assert parameters_asked == ["w", 'say "hi"', "a&b", "back\\slash", "tab\tname", "caf\u00e9", "\u6743\u91cd", "del\x7f"]
    assert "loss" in asked and "['out \"2\"']" in asked  # outputs: one of its shape each, and a name to escape


@needs_c
def test_shapes_of_every_sort_are_written_as_python_writes_them():
    from graphviz_autograd.graph import AutogradGraph, Node

    shapes = [(), (0,), (7, 1, 3), (2**40, 5), (2**70,), (-1, 2), (True, 2), None, (2.5,), ("a",), [2, 3]]
    nodes = tuple(Node(f"n{i}", "parameter", f"p{i}", shape=shape, dtype="float32") for i, shape in enumerate(shapes))
    graph = AutogradGraph(nodes, (), params_given=True)
    drawn, in_python = _drawn_both_ways(lambda: [to_dot(graph), to_dot(graph)])
    assert in_python == drawn
    assert 'label="p3\\n(1099511627776, 5)"' in drawn[0] and 'label="p0\\n()"' in drawn[0]
