"""The shortcuts of dot._Writer write the same bytes as its general path.

``_Writer.node_attrs`` writes most nodes from a per-kind template and, for tensor
nodes, from parts cached per shape and module (``named_tensor_attrs`` puts a named
tensor's text together from such parts); ``_Writer.overlaid_attrs`` builds,
sorts and quotes the whole attribute dict (it is what a node with a finding's
style goes through). With an empty overlay both must give the same text, for any
node, theme and option.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from graphviz_autograd.drawing.dot_writer import _Writer, to_dot
from graphviz_autograd.graph.autograd_graph import NODE_KINDS, AutogradGraph, Edge, Node
from graphviz_autograd.graph.style import resolve_theme

# Plain names take the tensor shortcut; the others (quotes, line breaks, '\r' at the
# end, '&') must fall back to the general path.
text = st.one_of(
    st.sampled_from(["", "w", "fc.weight", "h.0.attn", "x" * 60, "node", "a b", "a\r", 'q"', "&", "\\N", "\n"]),
    st.text(max_size=6),
)
shapes = st.one_of(st.none(), st.tuples(), st.tuples(st.integers(0, 9)), st.tuples(st.integers(0, 9), st.integers(0, 9)))
dtypes = st.sampled_from([None, "float32", "float16", "int64", 'we"ird'])
attrs = st.sampled_from([(), (("alpha", "1"),), (("tensor", "fc.weight"),)])
notes = st.sampled_from(["", "freed", "modified in place"])
nodes = st.builds(
    Node,
    id=st.just("n0"),
    kind=st.sampled_from(NODE_KINDS),
    label=text,
    shape=shapes,
    dtype=dtypes,
    device=st.sampled_from([None, "cpu", "cuda:0"]),
    attrs=attrs,
    note=notes,
    module=st.sampled_from(["", "fc", "h.0", 'm"x']),
)
themes = st.sampled_from(
    [None, {"op": "white"}, {"parameter": {"tooltip": "a tip", "zzz": "1", "aaa": "2"}}, {"output": {"label": "x"}}]
)


@settings(max_examples=300, deadline=None)
@given(
    node=nodes,
    other=nodes,
    theme=themes,
    params_given=st.booleans(),
    show_attrs=st.booleans(),
    show_device=st.booleans(),
    max_chars=st.sampled_from([4, 10, 50]),
    shaped=st.booleans(),
)
def test_cached_attributes_equal_the_general_path(node, other, theme, params_given, show_attrs, show_device, max_chars, shaped):
    other = other._replace(id="n1")
    edges = (Edge("n1", "n0", shape=(2, 3) if shaped else None, dtype="float16"),)
    graph = AutogradGraph((node, other), edges, params_given=params_given)
    writer = _Writer(graph, resolve_theme(theme), max_chars, show_attrs, show_device)
    # Twice each: the second call reads what the first cached.
    for n in (node, other, node, other):
        assert writer.node_attrs(n) == writer.overlaid_attrs(n, {})
        # A named tensor's attributes put together from parts, where that path takes the node.
        assert writer.named_tensor_attrs(n[1:]) in (None, writer.overlaid_attrs(n, {}))


def test_a_cached_tensor_tooltip_keeps_each_name():
    nodes = tuple(Node(f"n{i}", "parameter", f"layer{i}.weight", shape=(4, 4), module=f"layer{i}") for i in range(3))
    source = to_dot(AutogradGraph(nodes, ()))
    for i in range(3):
        assert f'label="layer{i}.weight\\n(4, 4)" tooltip="parameter layer{i}.weight\\nshape (4, 4)\\nmodule: layer{i}"' in source


def test_named_tensor_shortcut_takes_plain_parameters():
    node = Node("n0", "parameter", "fc.weight", shape=(2, 3), dtype="float16", module="fc")
    writer = _Writer(AutogradGraph((node,), ()), resolve_theme(None), 50, False, False)
    assert writer.named_tensor_attrs(node[1:]) == writer.overlaid_attrs(node, {})
