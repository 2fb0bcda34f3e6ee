"""Colours and shapes: one table, looked up by node and edge kind.

The defaults follow the tutorials this project grew from (and torchviz): leaves
and parameters light blue, outputs green, ops grey, saved tensors orange, and
inputs that carry no gradient as small dashed boxes.

>>> resolve_theme({"output": "palegreen"})["output"]["fillcolor"]
'palegreen'
"""

from __future__ import annotations

from typing import Literal, Mapping, Optional, Union

from ..errors import OptionError
from .autograd_graph import (
    ACCUMULATE_GRAD, CUT, DATA, LEAF, MODULE, NO_GRAD, NODE_KINDS, OP, OUTPUT, PARAMETER, SAVED, SAVED_BY,
)
from .autograd_graph import NodeKind

# nslimit=3 stops the network simplex that places nodes across the page after 3
# iterations per node. Long edges make that step slow: dot puts a virtual node on
# every rank an edge crosses, and the step takes time quadratic in all its nodes.
# DenseNet-121 (1,282 nodes; each feature map feeds every later torch.cat of its
# block) gets 26,852 virtual nodes; the step ran 58,000 iterations in 120 to 210 s,
# the whole layout 220 to 300 s. Capped: 3,846 iterations, the layout 8 to 10 s,
# every edge still drawn and ranks unchanged, only nodes sit less centred over
# their inputs. An LSTM unrolled 30 steps, its weights not split, goes from 38 s to
# 1.4 s. Graphs without many long edges finish inside the cap (GPT-2 with 12 or 48
# layers after 1.8 iterations per node, BERT 0.8, ResNet-50 0.3, every golden graph
# at most 1.6) and are laid out exactly as without it.
GRAPH_ATTRS = {"nslimit": "3", "rankdir": "TB"}
NODE_DEFAULTS = {
    "fontname": "monospace",
    "fontsize": "10",
    "height": "0.2",
    "shape": "box",
    "style": "filled",
}

NODE_STYLES: dict[str, dict[str, str]] = {
    OUTPUT: {"fillcolor": "darkolivegreen1"},
    OP: {"fillcolor": "lightgrey"},
    ACCUMULATE_GRAD: {"fillcolor": "lightgrey"},
    PARAMETER: {"fillcolor": "lightblue"},
    LEAF: {"fillcolor": "lightblue"},
    NO_GRAD: {
        "color": "gray40",
        "fillcolor": "white",
        "fontcolor": "gray40",
        "fontsize": "8",
        "style": "dashed,filled",
    },
    SAVED: {"fillcolor": "orange"},
    MODULE: {"fillcolor": "lemonchiffon", "style": "filled,rounded"},
}

# The call a forward pass stopped at (an op node with note "failed"): red, whatever its kind's style.
FAILED_STYLE = {"color": "red", "fillcolor": "mistyrose", "fontcolor": "red3", "penwidth": "3"}

# Kinds of edge that only a drawing has (see graphviz_autograd.junctions): an
# output joining the trunk that carries it to the ops reading it, and the trunk
# from one junction to the next. Drawn as the edge they stand for, without an
# arrowhead: the arrows are at the ops that read the output. A trunk's weight
# keeps it straight, so that it reads as one line; a joining edge weighs nothing,
# so that each junction sits just above the ops it feeds (a weight pulling it up
# towards the outputs joining it would leave long branches).
DATA_JOIN = "data_join"
CUT_JOIN = "no_grad_join"
DATA_TRUNK = "data_trunk"
CUT_TRUNK = "no_grad_trunk"
JOIN_OF = {DATA: DATA_JOIN, CUT: CUT_JOIN}
TRUNK_OF = {DATA: DATA_TRUNK, CUT: CUT_TRUNK}

EDGE_STYLES: dict[str, dict[str, str]] = {
    DATA: {},
    CUT: {"color": "gray40", "style": "dashed"},
    SAVED_BY: {"dir": "none", "style": "dotted"},
    DATA_JOIN: {"arrowhead": "none", "weight": "0"},
    CUT_JOIN: {"arrowhead": "none", "color": "gray40", "style": "dashed", "weight": "0"},
    DATA_TRUNK: {"arrowhead": "none", "weight": "4"},
    CUT_TRUNK: {"arrowhead": "none", "color": "gray40", "style": "dashed", "weight": "4"},
}

# A junction: a dot where one output branches to the ops that read it, coloured as
# the edges through it (graphviz_autograd.junctions).
JUNCTION_ATTRS: dict[str, dict[str, str]] = {
    DATA: {"height": "0.04", "shape": "point", "width": "0.04"},
    CUT: {"color": "gray40", "height": "0.04", "shape": "point", "width": "0.04"},
}

# What the legend says of each node kind.
LEGEND_TEXT = {
    OUTPUT: "output",
    OP: "backward op",
    ACCUMULATE_GRAD: "stores a leaf's .grad",
    PARAMETER: "parameter",
    LEAF: "leaf tensor",
    NO_GRAD: "input without gradient",
    SAVED: "saved for backward",
    MODULE: "module, collapsed",
}

# How severe a finding is, worst first (diagnose.Finding.severity, check's --fail-on).
ERROR = "error"
WARNING = "warning"
INFO = "info"
SEVERITIES = (ERROR, WARNING, INFO)

# How diagnostics mark a node (diagnose.finding_styles): a thick border by severity.
# Info findings are not drawn.
SEVERITY_STYLES: dict[str, dict[str, str]] = {
    ERROR: {"color": "red", "penwidth": "3"},
    WARNING: {"color": "orange", "penwidth": "3"},
}

# A diff's states (views.diffing): added green, removed dashed red, changed orange;
# unchanged nodes keep their own colours. Each adds its state to the tooltip.
DIFF_STATE_STYLES: dict[str, dict[str, str]] = {
    "added": {"color": "forestgreen", "fillcolor": "#d9f2d9", "penwidth": "2.5"},
    "removed": {"color": "firebrick", "fillcolor": "#fbe3e3", "fontcolor": "gray35", "penwidth": "2", "style": "filled,dashed"},
    "changed": {"color": "darkorange", "fillcolor": "#ffe9c7", "penwidth": "2.5"},
}
DIFF_STATE_WORDS = {"added": "added (in the new graph only)", "removed": "removed (in the old graph only)",
                    "changed": "changed (tooltip: old -> new)"}

# Gradient norm, low to high on a log scale (diagnose.gradient_styles): ColorBrewer
# blues, white text where the fill is dark.
GRADIENT_NORM_SCALE: tuple[dict[str, str], ...] = tuple(
    {"fillcolor": f"/blues9/{step}", **({"fontcolor": "white"} if step >= 7 else {})} for step in range(1, 10)
)
GRADIENT_SPECIAL_STYLES: dict[str, dict[str, str]] = {
    "zero": {"fillcolor": "white", "style": "filled,dashed"},
    "nonfinite": {"fillcolor": "red", "fontcolor": "white"},
}

# A module's cluster (the box around the nodes its forward made); the label is added per module.
# A margin of 4 points, not Graphviz's 8: a transformer layer opens four boxes at once and
# closes as many, and BERT's 12 layers drawn whole came out 1,164 points taller with 8.
CLUSTER_ATTRS = {
    "color": "gray60", "fontcolor": "gray30", "fontsize": "9", "labeljust": "l", "margin": "4", "style": "rounded",
}
# Graph attributes of a drawing with module boxes. One ranking of the whole graph
# (newrank), so that the invisible edges of graphviz_autograd.stacking stack the boxes.
# Ranks 0.4 inch apart instead of 0.5: stacked boxes take a few more ranks than the same
# graph without them (a block's parameters start below the block before), and each box
# edge and title takes room between ranks; closer ranks keep a model drawn whole as
# long as Graphviz can draw it as a bitmap (32,767 px a side).
CLUSTERED_GRAPH_ATTRS = {"newrank": "true", "ranksep": "0.4"}
# The invisible edges that stack module boxes (graphviz_autograd.stacking). Weight 0:
# they only keep a box below the one before, they do not pull its parameters up to the
# top of the box, where a Linear's weight and bias sat side by side and widened it.
STACKING_EDGE_ATTRS = {"style": "invis", "weight": "0"}

# The shape label of a data edge (show_shapes).
EDGE_LABEL_ATTRS = {"fontcolor": "gray30", "fontsize": "8"}

DIRECTIONS = ("TB", "LR", "BT", "RL")
Direction = Literal["TB", "LR", "BT", "RL"]

# A node kind to a fill colour, or to Graphviz node attributes.
Theme = Mapping[NodeKind, Union[str, Mapping[str, str]]]


def resolve_theme(theme: Optional[Theme] = None) -> dict[str, dict[str, str]]:
    """The node styles with ``theme`` laid over them.

    ``theme`` maps a node kind to a fill colour or to a dict of Graphviz node
    attributes, e.g. ``{"output": "palegreen", "op": {"fillcolor": "white"}}``.
    """
    styles = {kind: dict(attrs) for kind, attrs in NODE_STYLES.items()}
    if theme is None:
        return styles
    if not isinstance(theme, Mapping):
        raise OptionError(f"theme must be a dict of node kind to colour or attributes; got {type(theme).__name__}.")
    for kind, override in theme.items():
        if kind not in styles:
            raise OptionError(f"theme names an unknown node kind {kind!r}; use one of: {', '.join(NODE_KINDS)}.")
        if isinstance(override, str):
            styles[kind]["fillcolor"] = override
        elif isinstance(override, Mapping):
            styles[kind].update({str(k): str(v) for k, v in override.items()})
        else:
            raise OptionError(
                f"theme[{kind!r}] must be a colour name or a dict of Graphviz attributes; "
                f"got {type(override).__name__}."
            )
    return styles
