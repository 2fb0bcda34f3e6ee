"""Any name or attribute text reaches the picture as written, and never changes the graph.

Property tests: hostile text goes in as parameter names, output keys, op names and
custom Function attributes (real walks), and as theme attribute names and values.
Each example is one DOT, drawn once by ``dot -Tsvg``; the SVG must parse, hold as
many nodes as the graph, and show each text exactly, after the transformations
``dot.escape`` documents: line breaks start a new line, a tab is a space, control
characters read ``\\xNN`` and lone surrogates, U+FFFE and U+FFFF read ``\\uNNNN``.
"""

from __future__ import annotations

import re

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.autograd.function import BackwardCFunction

from graphviz_autograd.views.shown import split_shared_leaves
from graphviz_autograd import make_dot, walk
from graphviz_autograd.drawing.dot_writer import attr_value, escape, label, quote, shape_text
from graphviz_autograd.graph.autograd_graph import OP, OUTPUT, PARAMETER

# Pieces that break naive quoting: DOT syntax, Graphviz's own escapes (\N is the node
# name, \l a left-justified line end), entities, HTML-like label syntax, line breaks,
# controls, characters XML cannot hold, and astral characters.
HOSTILE = [
    '"', "\\", '\\"', "\\N", "\\G", "\\E", "\\T", "\\H", "\\L", "\\l", "\\r", "\\n", "\\x41",
    "&", "&amp;", "&#38;", "&#x26;", "&lt;", "&nbsp;", "&bogus", "<", ">", "<b>x</b>", "<<B>>",
    "\n", "\r", "\r\n", "\t", "\x00", "\x01", "\x1b[31m", "\x7f", "\x85", "\x9f", "\xa0",
    "\u2028", "\u202e", "\ufeff", "\ud800", "\udfff", "\ufffe", "\uffff", "\U0001f600", "\U0010fffd",
    "]", "[", "{", "}", ";", ",", "=", " -> ", "n0", "node", "label=x", "  ", "'",
]
hostile_text = st.lists(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=4)), max_size=8).map("".join)

WIDE = 10**6  # max_attr_chars that cuts nothing, so every text is shown whole

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def shown_text(text: str) -> str:
    """What Graphviz shows of ``text``, as escape() documents it (written independently)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\t", " ").replace("\xa0", " ")
    out = []
    for char in text:
        code = ord(char)
        if char != "\n" and (code < 0x20 or 0x7F <= code <= 0x9F):
            out.append("\\x%02x" % code)
        elif 0xD800 <= code <= 0xDFFF or code in (0xFFFE, 0xFFFF):
            out.append("\\u%04x" % code)
        else:
            out.append(char)
    return "".join(out)


def shown_lines(*texts: str) -> list[str]:
    """The SVG text lines of a label made of ``texts``; Graphviz draws no empty line."""
    return [line for text in texts for line in shown_text(text).split("\n") if line]


def check_drawn(graphviz_svg, source: str, graph) -> dict:
    nodes = graphviz_svg(source)
    drawn = split_shared_leaves(graph)  # a leaf used more than a few times is drawn once per use
    assert sorted(nodes) == sorted(n.id for n in drawn.nodes)  # nothing injected, nothing lost
    return nodes


# --- through real walks ----------------------------------------------------------


@SETTINGS
@given(names=st.lists(hostile_text, min_size=1, max_size=12))
def test_parameter_names_are_shown_exactly(graphviz_svg, names):
    params = {name: torch.ones(i + 1, requires_grad=True) for i, name in enumerate(names)}
    loss = sum(t.sum() for t in params.values())
    graph = walk(loss, params)
    nodes = check_drawn(graphviz_svg, make_dot(graph, max_attr_chars=WIDE).source, graph)
    drawn = [n for n in graph.nodes if n.kind == PARAMETER]
    assert len(drawn) == len(params)
    for node in drawn:
        assert nodes[node.id].lines == shown_lines(node.label, shape_text(node.shape))
    assert sorted(n.label for n in drawn) == sorted(params)


@SETTINGS
@given(keys=st.lists(hostile_text, min_size=1, max_size=12, unique=True))
def test_output_keys_are_shown_exactly(graphviz_svg, keys):
    w = torch.ones(2, requires_grad=True)
    outputs = {key: w * (i + 2) for i, key in enumerate(keys)}
    graph = walk(outputs, {"w": w})
    nodes = check_drawn(graphviz_svg, make_dot(graph, max_attr_chars=WIDE).source, graph)
    drawn = [n for n in graph.nodes if n.kind == OUTPUT]
    expected_names = [key if key.isidentifier() else f"[{key!r}]" for key in keys]
    assert [n.label for n in drawn] == expected_names
    for node in drawn:
        assert nodes[node.id].lines == shown_lines(node.label, "(2)")


_CTX_ATTRIBUTES = set(dir(BackwardCFunction))
ctx_key = hostile_text.filter(lambda k: not k.startswith("_") and k not in _CTX_ATTRIBUTES)
# Python refuses class names with NUL or lone surrogates; anything else goes.
class_name = hostile_text.filter(lambda n: "\x00" not in n and not re.search("[\ud800-\udfff]", n))
# How an op's table lays out whitespace inside a value (line breaks, runs of spaces)
# is the table's business, not escaping's: values here hold none.
ctx_value = hostile_text.map(lambda v: "".join(c for c in v if not c.isspace()))


def _function_named(name: str) -> type:
    """A custom autograd.Function class with any name, storing given ctx attributes."""

    def forward(ctx, x, extra):
        for key, value in extra.items():
            setattr(ctx, key, value)
        return x * 2

    def backward(ctx, grad):
        return grad * 2, None

    return type(name, (torch.autograd.Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward)})


def test_ctx_attributes_named_as_the_packages_own_attrs_are_shown_as_any_other():
    # Found by the property below: a ctx attribute named "port" was taken for the port names a
    # recorder notes on an op, and left out of the drawing; one named "constant" would have been
    # drawn as a number operand of the op.
    from graphviz_autograd.graph.autograd_graph import op_constants

    x = torch.ones(2, requires_grad=True)
    extra = {"port": "p", "constant": "c", "also": "a"}
    graph = walk(_function_named("Fn").apply(x, extra), collect_saved=True)
    node = next(n for n in graph.nodes if n.kind == OP)
    assert node.attrs == tuple(sorted(extra.items())) and op_constants(node) == []
    source = make_dot(graph, show_attrs=True).source
    assert all(re.search(rf"\\l{key} *: {value}\\l", source) for key, value in extra.items()), source


@SETTINGS
@given(ops=st.lists(st.tuples(class_name, ctx_key, ctx_value), min_size=1, max_size=8))
def test_op_names_and_custom_function_attributes_are_shown_exactly(graphviz_svg, ops):
    x = torch.ones(2, requires_grad=True)
    y = x
    for name, key, value in ops:
        y = _function_named(name).apply(y, {key: value})
    graph = walk(y, collect_saved=True)
    source = make_dot(graph, show_attrs=True, max_attr_chars=WIDE).source
    nodes = check_drawn(graphviz_svg, source, graph)
    drawn = [n for n in graph.nodes if n.kind == OP]
    assert len(drawn) == len(ops)
    for node, (name, key, value) in zip(drawn, reversed(ops)):  # the walk starts at the output
        assert node.label == name + "Backward"
        assert node.attrs == ((key, value),)
        lines = nodes[node.id].lines
        title = shown_lines(node.label)
        assert lines[: len(title)] == title
        assert re.fullmatch("-+", lines[len(title)])
        assert lines[len(title) + 1 :] == shown_lines(f"{key}: {value}")


# --- attribute values and names (themes) -----------------------------------------

@SETTINGS
@given(values=st.lists(st.tuples(hostile_text, hostile_text), min_size=1, max_size=8))
def test_theme_attribute_names_and_values_cannot_inject(graphviz_svg, values):
    w = torch.ones(2, requires_grad=True)
    graph = walk((w * torch.ones(2)).sum(), {"w": w})
    # "zz_" keeps clear of real Graphviz attribute names, whose values Graphviz would check.
    op_style = {"zz_" + key: value for key, value in values}
    tooltip = values[0][1]
    op_style["tooltip"] = tooltip
    source = make_dot(graph, theme={"op": op_style}, max_attr_chars=WIDE).source
    nodes = check_drawn(graphviz_svg, source, graph)
    ops = [n for n in graph.nodes if n.kind == OP]
    for node in ops:
        assert nodes[node.id].lines == [node.label]
        # Graphviz unescapes a tooltip's backslashes twice (an escaped \N still becomes
        # the node's name, an escaped pair one backslash): only backslash-free text is exact.
        if "\\" not in tooltip:
            assert (nodes[node.id].tooltip or "") == shown_text(tooltip)


@SETTINGS
@given(texts=st.lists(hostile_text, min_size=1, max_size=12))
def test_attr_value_quote_and_label_parse_as_one_value(graphviz_svg, texts):
    statements = []
    for i, text in enumerate(texts):
        statements.append(f"\tv{i} [label={attr_value(text)}]\n")
        statements.append(f"\tq{i} [label={quote(text)} tooltip={attr_value(text)}]\n")
        statements.append(f"\tl{i} [label={label([text, text], left=True)}]\n")
    nodes = graphviz_svg("digraph {\n" + "".join(statements) + "}\n")
    assert len(nodes) == 3 * len(texts)
    for i, text in enumerate(texts):
        assert nodes[f"v{i}"].lines == shown_lines(text)
        assert nodes[f"q{i}"].lines == shown_lines(text)
        assert nodes[f"l{i}"].lines == shown_lines(text, text)


# --- escape() itself -------------------------------------------------------------


@pytest.mark.parametrize(
    "text, escaped",
    [
        ('say "hi"', 'say \\"hi\\"'),
        ("ends with \\", "ends with \\\\"),
        ("\\N", "\\\\N"),
        ("a & b", "a &amp; b"),
        ("&amp;", "&amp;amp;"),
        ("<b>bold</b>", "<b>bold</b>"),
        ("one\ntwo\r\nthree\rfour", "one\\ntwo\\nthree\\nfour"),
        ("tab\there", "tab here"),
        ("nul\x00 esc\x1b del\x7f c1\x85", "nul\\\\x00 esc\\\\x1b del\\\\x7f c1\\\\x85"),
        ("lone \ud800 and \ufffe", "lone \\\\ud800 and \\\\ufffe"),
        ("\U0001f600 é", "\U0001f600 é"),
    ],
)
def test_escape(text, escaped):
    assert escape(text) == escaped


def test_left_justified_label_breaks_lines_to_the_left():
    assert label(["op", "key: a\nb"], left=True) == '"op\\lkey: a\\lb\\l"'
    assert label(["name", "a\nb"]) == '"name\\na\\nb"'


@pytest.mark.parametrize("value", ["lightblue", "_x1", "-1.5", ".5", "10"])
def test_attr_value_leaves_plain_ids_bare(value):
    assert attr_value(value) == value


@pytest.mark.parametrize("value", ["", "node", "Graph", "light blue", "1a", "a-b", "é", "#ff0000", "dashed,filled"])
def test_attr_value_quotes_everything_else(value):
    assert attr_value(value) == quote(value)


@SETTINGS
@given(text=st.text())
def test_escaped_text_is_always_utf8_and_one_line(text):
    escaped = escape(text)
    escaped.encode("utf-8")  # no lone surrogate left to break the pipe to dot
    assert "\n" not in escaped and "\r" not in escaped
    assert re.search(r'(?<!\\)(\\\\)*"', escaped) is None  # every quote is escaped


def _read_terminal_text(shown: str) -> str:
    """The text :func:`terminal_text` showed as ``shown``: its escapes read back."""
    return re.sub(r"\\(\\|x[0-9a-f]{2}|u[0-9a-f]{4})", lambda m: "\\" if m.group(1) == "\\" else chr(int(m.group(1)[1:], 16)), shown)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.characters(codec=None) | st.sampled_from("\\xu01\x01\x1b\x07\ud800\udcff")))
def test_terminal_text_is_safe_and_one_to_one(text):
    from graphviz_autograd.views.shown import terminal_text

    shown = terminal_text(text)
    shown.encode("utf-8")  # no lone surrogate left to fail the write
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", shown)
    assert _read_terminal_text(shown) == text  # two names never look the same
    assert "\n" not in terminal_text(text, one_line=True)


def test_terminal_text_tells_a_control_character_from_its_escape():
    from graphviz_autograd.views.shown import terminal_text

    assert terminal_text("\x01") == "\\x01"
    assert terminal_text("\\x01") == "\\\\x01"
