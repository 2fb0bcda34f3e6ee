"""Big real models drawn from output tensor to SVG, ours against torchviz; prints a table.

Run by hand from the repository root, so that this checkout's package is the one
imported::

    PYTHONPATH=. python -m benchmarks.big_models            # every model (about 10 minutes)
    PYTHONPATH=. python -m benchmarks.big_models --quick    # no full graphs, torchviz given one budget
    PYTHONPATH=. python -m benchmarks.big_models --models bert --models llama

Each model's forward pass is recorded (:func:`graphviz_autograd.capture.recording`) and then
drawn, one run each, the clock running from the output tensor to the SVG file:

- ``ours``: ``render(out, "x.svg", recorder=rec)`` with its defaults
  (``layout="auto"``, a layout budget of 10 s; repeated blocks folded into one).
- ``ours, full``: the same with ``fold_repeated=False``, every block drawn
  (skipped with ``--quick``).
- ``torchviz``: ``torchviz.make_dot(out, params=dict(model.named_parameters()))``
  and Graphviz ``dot -Tsvg`` on its source, run here with a timeout
  (``--torchviz-timeout``, three layout budgets by default; ``> N s`` when it runs
  past), as ``.pipe(format="svg")`` would run it without one.

The picture's size is the SVG root's width and height: Graphviz writes them in
points, and at 72 dpi a point is a pixel. Flags: ``over budget`` when our drawing
took longer than the layout budget; ``≥ 32,767 px`` when a side reaches the largest
side Graphviz draws a bitmap to (a PNG of it is scaled down to fit); ``fixed layout``
when ``dot`` would take (or took) longer than the budget and the fixed layout was
drawn instead; ``slower than torchviz``. ``torchviz/ours`` is torchviz's time over
ours (above 1: ours is faster). torchviz asks Graphviz for a square ``size`` of 0.15
inch per line of its DOT (12 inches at least), so a wide graph can be shrunk to fit:
the size then says the scale it was drawn at (``at 0.40``: its labels 40 % of their
size).

Models, all with random weights and nothing downloaded: BERT-12 (``BertConfig()``),
ResNet-50, DenseNet-121 and MobileNetV3-small (:mod:`benchmarks.models`), GPT-2
with 12 layers (``GPT2Config()``), T5-small (``T5Config(d_model=512, d_ff=2048,
num_layers=6, num_heads=8)``), and Llama with 80 layers (``LlamaConfig(
num_hidden_layers=80)``) built and run on the meta device, so no memory is taken
by its weights. Text models get 16 token ids; vision models one 224x224 image.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence

import torch

from graphviz_autograd import record, render, walk
from graphviz_autograd.options import DEFAULT_LAYOUT_BUDGET

from . import models
from .run import machine

# The largest side, in pixels, that Graphviz draws a picture to.
SIDE_CAP_PX = 32_767
TOKENS = 16
# torchviz's dot is given this many layout budgets before it is stopped.
TORCHVIZ_BUDGETS = 3.0


@dataclass
class Recorded:
    """A model run once under :func:`graphviz_autograd.capture.recording`: what every drawing starts from."""

    outputs: Any
    model: torch.nn.Module
    recorder: Any


@dataclass
class BigModel:
    """A model to draw: ``build()`` runs it under the recorder and returns a :class:`Recorded`."""

    name: str
    build: Callable[[], Recorded]


@dataclass
class Drawing:
    """One drawing: seconds from tensor to SVG (None when stopped), size in px, or what went wrong."""

    seconds: Optional[float] = None
    width: float = 0.0
    height: float = 0.0
    scale: float = 1.0
    fixed: bool = False
    error: str = ""
    timeout: float = 0.0

    def time_text(self) -> str:
        if self.error:
            return self.error
        if self.seconds is None:
            return f"> {self.timeout:g} s"
        return f"{self.seconds:.2f} s"

    def size_text(self) -> str:
        if self.error or self.seconds is None:
            return "-"
        size = f"{self.width:,.0f} × {self.height:,.0f}"
        return size if self.scale > 0.995 else f"{size} at {self.scale:.2f}"

    @property
    def at_cap(self) -> bool:
        return self.seconds is not None and max(self.width, self.height) >= SIDE_CAP_PX - 1


@dataclass
class Row:
    name: str
    nodes: Optional[int] = None
    ours: Drawing = field(default_factory=Drawing)
    full: Optional[Drawing] = None
    torchviz: Drawing = field(default_factory=Drawing)
    error: str = ""


# --- the models --------------------------------------------------------------------


def _quiet_transformers() -> None:
    from transformers.utils import logging

    logging.set_verbosity_error()


def _recorded(model: torch.nn.Module, run: Callable[[torch.nn.Module], Any]) -> Recorded:
    with record(model) as recorder:
        outputs = run(model)
    return Recorded(outputs, model, recorder)


def _tokens(vocab_size: int, device: Optional[str] = None) -> torch.Tensor:
    if device == "meta":
        return torch.zeros(1, TOKENS, dtype=torch.long, device="meta")
    return torch.randint(0, vocab_size, (1, TOKENS))


def bert12() -> Recorded:
    from transformers import BertConfig, BertModel

    _quiet_transformers()
    torch.manual_seed(0)
    model = BertModel(BertConfig())
    ids = _tokens(model.config.vocab_size)
    return _recorded(model, lambda m: m(ids).last_hidden_state)


def gpt2_12() -> Recorded:
    from transformers import GPT2Config, GPT2LMHeadModel

    _quiet_transformers()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config())
    ids = _tokens(model.config.vocab_size)
    return _recorded(model, lambda m: m(ids).logits)


def t5_small() -> Recorded:
    from transformers import T5Config, T5Model

    _quiet_transformers()
    torch.manual_seed(0)
    model = T5Model(T5Config(d_model=512, d_ff=2048, num_layers=6, num_heads=8))
    ids = _tokens(model.config.vocab_size)
    return _recorded(model, lambda m: m(input_ids=ids, decoder_input_ids=ids).last_hidden_state)


def llama80_meta() -> Recorded:
    from transformers import LlamaConfig, LlamaForCausalLM

    _quiet_transformers()
    with torch.device("meta"):
        model = LlamaForCausalLM(LlamaConfig(num_hidden_layers=80))
        ids = _tokens(model.config.vocab_size, "meta")
        return _recorded(model, lambda m: m(ids).logits)


def resnet50() -> Recorded:
    model, image, output_field = models.resnet50_model()
    return _recorded(model, lambda m: getattr(m(image), output_field) if output_field else m(image))


def densenet121() -> Recorded:
    model, image = models.densenet121_model()
    return _recorded(model, lambda m: m(image))


def mobilenet_v3_small() -> Recorded:
    model, image = models.mobilenet_v3_small_model()
    return _recorded(model, lambda m: m(image))


MODELS = [
    BigModel("BERT-12", bert12),
    BigModel("ResNet-50", resnet50),
    BigModel("DenseNet-121", densenet121),
    BigModel("MobileNetV3-small", mobilenet_v3_small),
    BigModel("GPT-2, 12 layers", gpt2_12),
    BigModel("T5-small", t5_small),
    BigModel("Llama, 80 layers (meta)", llama80_meta),
]


# --- what is timed -----------------------------------------------------------------


def svg_size(path: Path) -> tuple[float, float, float]:
    """Width and height of the SVG root, in pt (a pixel at 72 dpi), and the scale
    Graphviz drew at (below 1 when a ``size`` attribute shrank the picture)."""
    with open(path, encoding="utf-8", errors="replace") as file:
        head = file.read(4096)
    root = re.search(r"<svg\b[^>]*>", head)
    if root is None:
        raise ValueError(f"{path} has no <svg> element in its first 4 kB")
    sides = []
    for name in ("width", "height"):
        found = re.search(rf'\b{name}="([\d.]+)(pt|px)?"', root.group(0))
        if found is None:
            raise ValueError(f"the <svg> element of {path} has no {name}")
        sides.append(float(found.group(1)))
    scale = re.search(r'class="graph" transform="scale\(([\d.]+)', head)
    return sides[0], sides[1], float(scale.group(1)) if scale else 1.0


def _error_text(error: BaseException) -> str:
    first = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {first[0]}" if first else type(error).__name__
    return text if len(text) <= 80 else text[:77] + "..."


def draw_ours(recorded: Recorded, path: Path, **options: Any) -> Drawing:
    """Time ``render(out, path, recorder=rec, **options)`` from the tensor to the file."""
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            started = time.perf_counter()
            render(recorded.outputs, path, recorder=recorded.recorder, **options)
            seconds = time.perf_counter() - started
        width, height, scale = svg_size(path)
    except Exception as error:
        return Drawing(error=_error_text(error))
    # render says one line on stderr when it draws the fixed layout instead of dot's
    return Drawing(seconds, width, height, scale, fixed="fixed" in said.getvalue())


def draw_torchviz(recorded: Recorded, path: Path, timeout: float) -> Drawing:
    """Time ``torchviz.make_dot(...)`` and ``dot -Tsvg`` on its source, stopping ``dot`` after ``timeout``."""
    try:
        import torchviz
    except Exception as error:
        return Drawing(error=f"torchviz does not import ({type(error).__name__})")
    executable = shutil.which("dot")
    if executable is None:
        return Drawing(error="no dot")
    started = time.perf_counter()
    try:
        source = torchviz.make_dot(recorded.outputs, params=dict(recorded.model.named_parameters())).source
    except Exception as error:
        return Drawing(error=_error_text(error))
    left = max(timeout - (time.perf_counter() - started), 0.1)
    try:
        subprocess.run([executable, "-Tsvg", "-o", str(path)], input=source.encode(), capture_output=True,
                       timeout=left, check=True)
    except subprocess.TimeoutExpired:
        return Drawing(None, timeout=timeout)
    except subprocess.CalledProcessError as error:
        return Drawing(error=f"dot failed: {error.stderr.decode(errors='replace').strip()[:60]}")
    seconds = time.perf_counter() - started
    return Drawing(seconds, *svg_size(path))


def measure(model: BigModel, *, full: bool, torchviz_timeout: float, folder: Path,
            budget: float = DEFAULT_LAYOUT_BUDGET) -> Row:
    """Build and record ``model``, then draw it each way; an error goes into the row, not out."""
    row = Row(model.name)
    try:
        recorded = model.build()
        row.nodes = len(walk(recorded.outputs, recorder=recorded.recorder).nodes)
    except Exception as error:
        row.error = _error_text(error)
        return row
    gc.collect()
    row.ours = draw_ours(recorded, folder / "ours.svg", layout_budget=budget)
    if full:
        row.full = draw_ours(recorded, folder / "full.svg", layout_budget=budget, fold_repeated=False)
    row.torchviz = draw_torchviz(recorded, folder / "torchviz.svg", torchviz_timeout)
    return row


# --- the table ---------------------------------------------------------------------


def flags(row: Row, budget: float) -> str:
    found = []
    for label, drawing in (("ours", row.ours), ("full", row.full)):
        if drawing is None or drawing.seconds is None:
            continue
        if drawing.seconds > budget:
            found.append(f"{label} over budget")
        if drawing.at_cap:
            found.append(f"{label} ≥ {SIDE_CAP_PX:,} px")
        if drawing.fixed:
            found.append(f"{label} fixed layout")
    ours, theirs = row.ours, row.torchviz
    if ours.seconds is not None and theirs.seconds is not None and ours.seconds > theirs.seconds:
        found.append("slower than torchviz")
    return ", ".join(found)


def ratio(row: Row) -> str:
    ours, theirs = row.ours, row.torchviz
    if ours.seconds is None or ours.error:
        return "-"
    if theirs.error:
        return "-"
    if theirs.seconds is None:
        return f"> {theirs.timeout / ours.seconds:.1f}"
    return f"{theirs.seconds / ours.seconds:.1f}"


def table(rows: Sequence[Row], budget: float = DEFAULT_LAYOUT_BUDGET) -> str:
    """The rows as a markdown table (the full-graph columns only when some row has them)."""
    with_full = any(row.full is not None for row in rows)
    header = ["model", "nodes", "ours", "ours px"]
    if with_full:
        header += ["full graph", "full px"]
    header += ["torchviz", "torchviz px", "torchviz/ours", "flags"]
    lines = []
    for row in rows:
        if row.error:
            cells = [row.name, "-", row.error] + ["-"] * (len(header) - 3)
        else:
            cells = [row.name, f"{row.nodes:,}", row.ours.time_text(), row.ours.size_text()]
            if with_full:
                full = row.full if row.full is not None else Drawing(error="-")
                cells += [full.time_text(), full.size_text()]
            cells += [row.torchviz.time_text(), row.torchviz.size_text(), ratio(row), flags(row, budget)]
        lines.append(cells)
    right = {"nodes", "ours", "ours px", "full graph", "full px", "torchviz", "torchviz px", "torchviz/ours"}
    rule = ["--:" if name in right else ":--" for name in header]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in [header, rule, *lines])


# --- command line ------------------------------------------------------------------


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.big_models", description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", action="append", metavar="TEXT",
                        help="only the models whose name contains TEXT, any case (repeatable); "
                             f"the models: {', '.join(m.name for m in MODELS)}")
    parser.add_argument("--quick", action="store_true",
                        help="skip the full graphs and give torchviz's dot one layout budget")
    parser.add_argument("--budget", type=float, default=DEFAULT_LAYOUT_BUDGET, metavar="S",
                        help=f"layout budget of our drawings in seconds (default {DEFAULT_LAYOUT_BUDGET:g})")
    parser.add_argument("--torchviz-timeout", type=float, metavar="S",
                        help=f"seconds before torchviz's dot is stopped (default {TORCHVIZ_BUDGETS:g} budgets; one with --quick)")
    parser.add_argument("--keep", metavar="DIR", help="keep the SVGs in DIR (one folder per model)")
    return parser.parse_args(argv)


def chosen(filters: Optional[List[str]]) -> List[BigModel]:
    if not filters:
        return list(MODELS)
    wanted = [text.lower() for text in filters]
    return [m for m in MODELS if any(text in m.name.lower() for text in wanted)]


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    selected = chosen(args.models)
    if not selected:
        print(f"no model matches {args.models}; the models: {', '.join(m.name for m in MODELS)}", file=sys.stderr)
        return 2
    timeout = args.torchviz_timeout or args.budget * (1.0 if args.quick else TORCHVIZ_BUDGETS)
    print(machine())
    started = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory(prefix="big-models-") as scratch:
        for model in selected:
            folder = Path(args.keep or scratch) / re.sub(r"[^A-Za-z0-9]+", "-", model.name).strip("-").lower()
            folder.mkdir(parents=True, exist_ok=True)
            print(f"drawing {model.name} ...", file=sys.stderr, flush=True)
            rows.append(measure(model, full=not args.quick, torchviz_timeout=timeout, folder=folder, budget=args.budget))
            gc.collect()
    print(table(rows, args.budget))
    print(f"One run each, tensor -> SVG. Layout budget {args.budget:g} s; torchviz's dot stopped after "
          f"{timeout:g} s. Total {time.perf_counter() - started:.0f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
