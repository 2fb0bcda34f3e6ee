"""The ``graphviz-autograd`` command: parse arguments, call the public API, report errors.

Every error this package raises on purpose becomes one line on stderr and exit
status 1 (click's usage errors exit with 2); any other error, a bug of ours, is
one line too that says so. ``--debug`` shows the traceback instead.
Nothing here loads models, walks graphs or writes files by itself. Every text it
writes to a terminal goes through one escape (``views.shown.terminal_text``: a
model's names may hold control characters and lone surrogates); JSON and drawings
go out as the data they are.

``--help`` and ``--version`` import neither torch nor graphviz: the modules that do
are imported inside the commands, when a command runs. Each command's body runs in
a child process where it can (see command_process), so that a model that ends the
process or crashes it is reported, and Ctrl-C exits with status 130.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Sequence, Union

import click

from .. import __version__
from .command_process import run_command
from ..errors import GraphvizAutogradError, GraphvizNotFoundError, NoGraphError
from ..options import DEFAULT_EXPAND_LIMIT, DEFAULT_LAYOUT_BUDGET, FIT, FULL, LAYOUTS, DepthOption, DrawOptions
from ..drawing.rendering import DEFAULT_TIMEOUT, FORMATS, SUFFIX_FORMATS, check_writable, find_dot, write_atomic
from ..graph.style import DIRECTIONS, ERROR, SEVERITIES
from ..views.shown import terminal_text

if TYPE_CHECKING:
    from ..checks.nonfinite_origin import NonfiniteFindings
    from ..graph.autograd_graph import AutogradGraph
    from ..checks.diagnosis import Finding, Findings
    from ..checks.profiling import StepProfile
    from .model_file import LoadedModel, ModelSpec, Shape
    from ..capture.recording import Recorder

PROG_NAME = "graphviz-autograd"
# The options' defaults, read from the one place that holds them.
_DEFAULTS = DrawOptions()
JSON = "json"
HTML = "html"
OUTPUT_FORMATS = FORMATS + (JSON,)
OUTPUT_SUFFIXES = {**SUFFIX_FORMATS, ".json": JSON}
STDOUT = "-"
STDOUT_FORMATS = ("dot", "svg", JSON)  # text formats; PDF and PNG would garble a terminal
DEFAULT_FORMAT = "pdf"

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class _DepthType(click.ParamType):
    """--depth: a whole number of 0 or more, 'fit' or 'full'."""

    name = "depth"

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> DepthOption:
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif str(value).strip().lower() in (FIT, FULL):
            return str(value).strip().lower()  # type: ignore[return-value]
        elif str(value).strip().isdigit():
            number = int(str(value).strip())
        else:
            self.fail(
                f"{value!r} is not a depth; give a whole number of 0 or more (0: one box per top-level "
                f"module), 'fit' (the default) or 'full' (every node).",
                param,
                ctx,
            )
        return number


def _model_run_options(command: Callable) -> Callable:
    """The options both commands take to run a model: --input-shape and --train/--eval."""
    command = click.option(
        "--train/--eval",
        "training",
        default=None,
        help="Run the model in train or eval mode (on a copy). Default: the mode the model file leaves it in.",
    )(command)
    return click.option(
        "--input-shape",
        "input_shapes",
        multiple=True,
        metavar="N,N,...",
        callback=lambda ctx, param, value: _parse_input_shapes(value),
        help="Run on a random float input of this shape instead of the model's example inputs; "
        "repeat for several positional inputs.",
    )(command)


def _drawing_switch(field: str, help: str) -> Callable[[Callable], Callable]:
    """The on/off option of a DrawOptions ``field``, spelled as its keyword (``--split-shared``
    and ``--no-split-shared``), with its default."""
    flag = field.replace("_", "-")
    return click.option(f"--{flag}/--no-{flag}", default=getattr(_DEFAULTS, field), show_default=True, help=help)


def _seconds_option(flag: str, default: Optional[float], help: str) -> Callable[[Callable], Callable]:
    """An option that takes a positive number of seconds."""
    return click.option(
        flag, type=click.FloatRange(min=0, min_open=True), default=default, show_default=True, metavar="SECONDS", help=help
    )


def _progress_options(command: Callable) -> Callable:
    """The options every command takes on what it prints: --quiet and --debug."""
    command = click.option("--debug", is_flag=True, help="Show the full traceback of an error.")(command)
    return click.option("-q", "--quiet", is_flag=True, help="Print no progress on stderr.")(command)


def _in_own_process(command: Callable[..., None]) -> Callable[..., None]:
    """Run the command's body apart, where a process exit or a crash in the model's
    code is seen and said, and Ctrl-C ends it with status 130 (see command_process)."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> None:
        # The model files the command reads: MODEL, or diff's A and B.
        models = [kwargs[key] for key in ("model", "old", "new") if isinstance(kwargs.get(key), str)]
        inputs = tuple(path for model in models for path in _input_paths(model))
        run_command(functools.partial(command, *args, **kwargs), inputs=inputs)

    return run


@click.group(context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "--version", prog_name=PROG_NAME, message="%(prog)s %(version)s")
def main() -> None:
    """Draw the autograd graph of a PyTorch model with Graphviz.

    \b
    Example:
      graphviz-autograd render samples/mnist_cnn.py -o mnist.pdf

    Run 'graphviz-autograd render --help' for the model forms and options.
    """


def _input_paths(model: str) -> tuple[str, ...]:
    """The files MODEL may name, as given (``file.py:factory`` names ``file.py``), read
    without importing torch: before a command's process forks."""
    left, colon, _ = model.rpartition(":")
    return (model, left) if colon and left else (model,)


def _model_command(name: str, short_help: str) -> Callable[[Callable], click.Command]:
    """A command of ``main`` that takes a model file, MODEL."""

    def make(function: Callable) -> click.Command:
        return main.command(name=name, context_settings=CONTEXT_SETTINGS, short_help=short_help)(
            click.argument("model", metavar="MODEL")(function)
        )

    return make


@_model_command("render", "Draw a model's backward graph (PDF, SVG, PNG, DOT, JSON or an HTML explorer).")
@click.option(
    "-o",
    "--output",
    metavar="FILE",
    help="File to write; its suffix (.pdf .svg .png .dot .gv .json .html) picks the format. "
    "'-' writes DOT, SVG or JSON to stdout. Default: <model-stem>.pdf in the current folder.",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(OUTPUT_FORMATS, case_sensitive=False),
    help="Output format, for -o - or a name whose suffix names none; one that contradicts the suffix "
    "is an error. json is the walked graph as plain data.",
)
@_model_run_options
@click.option(
    "--params/--no-params",
    "name_leaves",
    default=True,
    show_default=True,
    help="Name leaves after the model's parameters, buffers and forward arguments.",
)
@click.option("--show-attrs", is_flag=True, help="List what each op saved for backward in its box.")
@click.option("--show-saved", is_flag=True, help="Draw the tensors each op saved for backward.")
@click.option(
    "--direction",
    type=click.Choice(DIRECTIONS),
    default="TB",
    show_default=True,
    help="Layout direction: TB top to bottom, LR left to right.",
)
@_drawing_switch("show_no_grad", "Draw the dashed boxes of inputs that carry no gradient.")
@click.option("--hide-no-grad", is_flag=True, hidden=True)  # the spelling of 0.1: --no-show-no-grad
@click.option("--show-device", is_flag=True, default=_DEFAULTS.show_device, help="Add each tensor's device to its box.")
@click.option(
    "--max-attr-chars",
    type=click.IntRange(min=1),
    default=_DEFAULTS.max_attr_chars,
    show_default=True,
    metavar="N",
    help="Cut labels longer than this many characters.",
)
@click.option("--legend", is_flag=True, help="Add a key of the node colours.")
@click.option(
    "--diagnose",
    is_flag=True,
    help="Mark what 'graphviz-autograd check' finds: errors with a red border, warnings orange.",
)
@click.option(
    "--profile",
    is_flag=True,
    help="Measure a training step (the median of 3 after 1 warm-up, on the model's device) and colour "
    "each op and module box by its backward time; see 'graphviz-autograd profile'.",
)
@click.option(
    "--nonfinite",
    is_flag=True,
    help="Run a training step watching every value, and mark where NaN or Inf is born (red) and which ops "
    "only carried it on (orange); see 'graphviz-autograd check --nonfinite'.",
)
@click.option(
    "--layout",
    type=click.Choice(LAYOUTS),
    default="auto",
    show_default=True,
    help="dot: Graphviz lays the graph out. fixed: our layered layout, fast at any size, drawn by "
    "'neato -n2'. auto: dot, unless it would take too long for the graph's size.",
)
@_seconds_option(
    "--layout-budget",
    DEFAULT_LAYOUT_BUDGET,
    "With --layout auto: the most seconds dot may lay the graph out; past them it is stopped "
    "and the fixed layout is drawn, with a note.",
)
@click.option(
    "--depth",
    type=_DepthType(),
    default=FIT,
    show_default=True,
    metavar="N|fit|full",
    help="N: draw each module N levels below the model as one box (0: one per top-level module). "
    "full: every node. fit: every node when the graph fits a page, else the deepest module summary "
    "that does, with a note.",
)
@_drawing_switch("fold_repeated", "Draw a run of repeated blocks (h.0 ... h.11) once, not as separate copies.")
@click.option("--no-fold", is_flag=True, hidden=True)  # the spelling of 0.1: --no-fold-repeated
@_drawing_switch("clusters", "Draw modules as boxes around their nodes.")
@click.option("--show-shapes", is_flag=True, default=_DEFAULTS.show_shapes, help="Write the tensor shape on each edge.")
@click.option("--shapes", is_flag=True, hidden=True)  # the spelling of 0.1: --show-shapes
@_drawing_switch("split_shared", "Draw a parameter used many times (an RNN's weights, once per step) once per use.")
@_drawing_switch(
    "junctions",
    "Draw an output read by many ops far below it as one trunk with a branch to each; "
    "--no-junctions draws each read as its own edge.",
)
@click.option(
    "--expand-limit",
    type=click.IntRange(min=0),
    metavar="NODES",
    help=f"With an .html explorer page: the most nodes an 'Expand all' view may draw (default "
    f"{DEFAULT_EXPAND_LIMIT:,}); a level whose view would draw more offers only level by level. "
    "0: no expanded views.",
)
@_seconds_option("--timeout", DEFAULT_TIMEOUT, "Give up on Graphviz's layout after this long.")
@click.option(
    "--no-record",
    "no_record",
    is_flag=True,
    help="Run the forward pass without recording it: no module clusters, no named reasons for cut gradients.",
)
@_progress_options
@_in_own_process
def render(
    model: str,
    output: Optional[str],
    output_format: Optional[str],
    input_shapes: Optional[tuple[Shape, ...]],
    training: Optional[bool],
    name_leaves: bool,
    hide_no_grad: bool,
    diagnose: bool,
    profile: bool,
    nonfinite: bool,
    no_fold: bool,
    shapes: bool,
    expand_limit: Optional[int],
    timeout: float,
    no_record: bool,
    quiet: bool,
    debug: bool,
    **drawing: Any,
) -> None:
    """Draw the backward graph of MODEL's output, or of the loss its file defines.

    \b
    MODEL is one of:
      path/to/model.py          a model file, as described below
      path/to/file.py:factory   a function returning (model, example_inputs)
      package.module:factory    the same, imported as 'python -m' would
      model.pt2                 a torch.export archive, run on its stored inputs

    \b
    A model file defines, at module level:
      model            an nn.Module, or a function returning one
      example_inputs   the forward's inputs: a tuple, a dict or a tensor,
                       or a function returning them (or pass --input-shape)
      loss(output)     optional: turns the output into the tensor to draw
    The model runs as 'python model.py' would run it (its folder importable),
    in the mode the file leaves it in, and is never changed.

    \b
    Examples:
      graphviz-autograd render samples/mnist_cnn.py -o mnist.pdf
      graphviz-autograd render net.py --input-shape 1,3,224,224 --eval -o net.svg
      graphviz-autograd render models.py:build --format json -o - > graph.json
      graphviz-autograd render exported.pt2 -o exported.dot
    """
    from .model_file import parse_model_spec
    from ..capture.recording import record

    progress = _Progress(quiet)
    with _errors_as_messages(debug):
        # Every other drawing flag is spelled as the DrawOptions field it sets; the hidden
        # spellings of 0.1 are folded in. Checked before any model code runs.
        drawing["show_no_grad"] = drawing["show_no_grad"] and not hide_no_grad
        drawing["fold_repeated"] = drawing["fold_repeated"] and not no_fold
        drawing["show_shapes"] = drawing["show_shapes"] or shapes
        options = DrawOptions(**drawing, expand_limit=_DEFAULTS.expand_limit if expand_limit is None else expand_limit)
        spec = parse_model_spec(model)
        target, fmt = _output_and_format(spec, output, output_format)
        if expand_limit is not None and fmt != HTML:
            raise click.UsageError(
                f"--expand-limit shapes the .html explorer page only, and this writes {fmt.upper()}; "
                f"drop the option, or write the page with -o {spec.stem}.html."
            )
        if profile and nonfinite:
            raise click.UsageError(
                "--profile and --nonfinite each run a step of their own and colour its graph; give one of them."
            )
        reads = [spec.path] if spec.path is not None else []  # never written over, however -o spells it
        if target is not None:
            check_writable(target, inputs=reads)
        if fmt not in ("dot", JSON) and not (fmt == HTML and options.layout == "fixed"):
            _require_graphviz(spec, model, fmt)
        with _stdout_to_stderr(target is None):
            loaded = _load(spec, model, input_shapes, training, progress, debug)
            reads.append(loaded.path)  # a module factory's file is known once imported
            progress("running the forward pass..." if no_record else "running and recording the forward pass...")
            measured: Optional[Union[StepProfile, NonfiniteFindings]] = None
            if profile:
                measured = _measured_step(loaded, progress)
            elif nonfinite:
                measured = _nonfinite_step(loaded, progress)
            recorder = None if no_record else record(loaded.model)
            outputs = _run_or_draw_failure(
                loaded, recorder, _failure_path(spec, target, fmt), fmt, progress, options, timeout, name_leaves
            )
            if fmt == HTML:
                page = _explore(loaded, outputs, progress, name_leaves=name_leaves, recorder=recorder,
                                diagnose=diagnose, options=options, timeout=timeout, measured=measured)
                assert target is not None  # an HTML page is never written to stdout
                written = write_atomic(target, page.html().encode("utf-8"), inputs=reads)
                progress(f"wrote {written} ({_size_text(written.stat().st_size)})")
                return
            text, engine, fixed_source = _draw(
                loaded, outputs, fmt, progress, options, name_leaves=name_leaves, recorder=recorder, diagnose=diagnose,
                measured=measured,
            )
        _write(text, target, fmt, timeout, progress, engine, fixed_source, options.layout_budget, inputs=reads)


@_model_command("check", "Report why parameters may not learn: unused, stray, frozen, cut, bad gradients.")
@_model_run_options
@click.option("--json", "as_json", is_flag=True, help="Write the findings as JSON instead of a table.")
@click.option(
    "--top-memory",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    metavar="N",
    help="List the N modules whose ops save the most memory for backward (0: none).",
)
@click.option(
    "--nonfinite",
    is_flag=True,
    help="Also run a training step watching every value, and name where NaN or Inf is born: the op in the "
    "forward pass, the node in the backward pass, or the input that brought it.",
)
@click.option(
    "--fail-on",
    type=click.Choice(SEVERITIES),
    default=ERROR,
    show_default=True,
    help="Exit with 1 when any finding is this severe or more: 'warning' fails a CI run on unused "
    "parameters and cut gradients too.",
)
@_progress_options
@_in_own_process
def check_command(
    model: str,
    input_shapes: Optional[tuple[Shape, ...]],
    training: Optional[bool],
    as_json: bool,
    top_memory: int,
    nonfinite: bool,
    fail_on: str,
    quiet: bool,
    debug: bool,
) -> None:
    """Check MODEL for what keeps it from learning; exit with 1 on an error (see --fail-on).

    \b
    It runs the forward pass, walks the graph and reports:
      error    leaves that require grad but are not parameters (the optimizer
               never sees them), gradients that are NaN or Inf
      warning  parameters the outputs never reach, detach()/no_grad() cuts,
               gradients that are all zero or far from the others' norms
      info     frozen parameters, inputs without gradient, memory saved for backward
    When the model file defines loss(output), gradients come from a backward
    pass (torch.autograd.grad: the model's .grad stays untouched).

    MODEL takes the same forms as in 'graphviz-autograd render'.

    \b
    Examples:
      graphviz-autograd check samples/mnist_cnn.py
      graphviz-autograd check net.py --input-shape 1,3,224,224 --json > findings.json
      graphviz-autograd check net.py --fail-on warning    # in CI: every parameter must learn
    """
    import torch

    from ..checks.diagnosis import GRAD_NONFINITE, Findings, failing
    from .model_file import parse_model_spec
    from ..capture.recording import record

    progress = _Progress(quiet)
    with _errors_as_messages(debug):
        spec = parse_model_spec(model)
        with contextlib.redirect_stdout(sys.stderr):  # stdout carries only the report
            loaded = _load(spec, model, input_shapes, training, progress, debug)
            progress("running and recording the forward pass...")
            recorder = record(loaded.model)
            picture_format = "svg" if _has_graphviz() else "dot"
            outputs = _run_or_draw_failure(
                loaded, recorder, Path(f"{spec.stem}.failed.{picture_format}"), picture_format, progress, _DEFAULTS,
                DEFAULT_TIMEOUT,
            )
            backward = loaded.loss is not None and isinstance(outputs, torch.Tensor) and outputs.numel() == 1
            if loaded.loss is not None and not backward:
                _say("note: loss(output) is not one scalar, so gradients are not checked")
            progress("walking the graph" + (" and running backward..." if backward else "..."))
            with _model_named_in_errors(loaded):
                findings = _findings_of(loaded, outputs, backward=backward, recorder=recorder, top_memory=top_memory)
            del outputs
            if nonfinite:
                found = _nonfinite_step(loaded, progress)
                if found:  # one cause, one finding: the gradients it made NaN are named in its message
                    findings = Findings([f for f in findings if f.code != GRAD_NONFINITE], findings.graph)
                findings = Findings(sorted([*found, *findings], key=lambda f: SEVERITIES.index(f.severity)), findings.graph)
            elif any(f.code == GRAD_NONFINITE for f in findings):
                progress("gradients hold NaN or Inf: run again with --nonfinite to find where they are born")
    if as_json:
        click.echo(findings_json(findings), nl=False)
    else:
        color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        click.echo(findings_table(findings, color=color), nl=False, color=color)
    if failing(findings, fail_on):
        sys.exit(1)


@_model_command("profile", "Time a training step: the forward and backward time and backward memory of each module and op.")
@_model_run_options
@click.option("--steps", type=click.IntRange(min=1), default=3, show_default=True, metavar="N",
              help="Measure N steps (and N without the profiler, to state its overhead); the tables show medians.")
@click.option("--warmup", type=click.IntRange(min=0), default=1, show_default=True, metavar="N",
              help="Run N steps first that are not measured (the first one is recorded to walk the graph).")
@click.option("--device", default="cpu", show_default=True, metavar="DEVICE",
              help="Run on cpu, cuda or cuda:N; on CUDA the times are those of the kernels each op launched.")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, metavar="N",
              help="List the N modules and the N ops with the most of each measure.")
@click.option("--json", "as_json", is_flag=True, help="Write every node's measurements as JSON instead of the tables.")
@click.option("--memory/--no-memory", default=True, show_default=True,
              help="Measure the step's memory too (three more steps): the peak, what is alive at it, what to checkpoint.")
@click.option("--memory-target", default="0.75", show_default=True, metavar="TARGET",
              help="The peak the checkpoint advice aims under: a fraction of the measured peak (0.75) or bytes (300MiB).")
@_progress_options
def profile_command(
    model: str,
    input_shapes: Optional[tuple[Shape, ...]],
    training: Optional[bool],
    steps: int,
    warmup: int,
    device: str,
    top: int,
    as_json: bool,
    memory: bool,
    memory_target: str,
    quiet: bool,
    debug: bool,
) -> None:
    """Time training steps of MODEL and show where the time and memory go.

    \b
    Each step runs the forward pass, loss(output) when the model file defines
    it (else backward starts from every output with a gradient of ones) and
    backward(). The first warm-up step is recorded and its graph walked; the
    profiler's events of each measured step are matched to its nodes by their
    autograd sequence numbers, and rolled up by module (a run of alike blocks,
    h.0 ... h.11, is one row h.* with the spread over its blocks). With
    --memory (the default), one more step measures the bytes alive over time:
    the peak, what is alive at it (parameters, gradients, optimizer state,
    tensors saved for backward by module, temporaries), and the modules to
    wrap in torch.utils.checkpoint to bring the peak under --memory-target.

    MODEL takes the same forms as in 'graphviz-autograd render'.

    \b
    Examples:
      graphviz-autograd profile samples/mnist_cnn.py
      graphviz-autograd profile net.py --device cuda --steps 10 --json > profile.json
      graphviz-autograd profile gpt2.py --memory-target 2GiB
    """
    from .model_file import parse_model_spec
    from ..checks.memory import parse_target
    from ..checks.profiling import check_device, profile_step

    progress = _Progress(quiet)
    with _errors_as_messages(debug):
        target_peak = parse_target(memory_target)
        spec = parse_model_spec(model)
        target = check_device(device)
        with contextlib.redirect_stdout(sys.stderr):  # stdout carries only the report
            loaded = _load(spec, model, input_shapes, training, progress, debug)
            if target.type != "cpu":
                loaded = _moved_to(loaded, target)
            progress(
                f"running {warmup} warm-up step{'s' if warmup != 1 else ''}, then {steps} step{'s' if steps != 1 else ''} "
                f"with the profiler and {steps} without it, on {device}..."
            )
            with _model_named_in_errors(loaded, said=True):
                profile = profile_step(loaded.model, loaded.example_inputs, loss=loaded.loss, steps=steps, warmup=warmup,
                                       memory=memory)
    if as_json:
        click.echo(profile.to_json(memory_target=target_peak), nl=False)
    else:
        _say(profile.table(top=top, memory_target=target_peak), err=False, nl=False)


def _moved_to(loaded: LoadedModel, device: Any) -> LoadedModel:
    """The model file's model and inputs on ``device`` (the command's own copy: nothing else holds them)."""
    import dataclasses

    from torch.utils._pytree import tree_map

    moved = tree_map(lambda v: v.to(device) if hasattr(v, "to") and hasattr(v, "device") else v, loaded.example_inputs)
    return dataclasses.replace(loaded, model=loaded.model.to(device), example_inputs=moved)


def findings_json(findings: list[Finding]) -> str:
    """``{"findings": [...], "summary": {"error": n, "warning": n, "info": n}}``, keys sorted.

    >>> print(findings_json([]), end="")
    {
      "findings": [],
      "summary": {
        "error": 0,
        "info": 0,
        "warning": 0
      }
    }
    """
    summary = {severity: sum(f.severity == severity for f in findings) for severity in SEVERITIES}
    return json.dumps({"findings": [f.to_dict() for f in findings], "summary": summary}, sort_keys=True, indent=2) + "\n"


SEVERITY_COLORS = {"error": "red", "warning": "yellow", "info": "cyan"}


def findings_table(findings: list[Finding], *, color: bool = False) -> str:
    """An aligned table of findings and a summary line; ``color`` styles the severities with ANSI codes.

    >>> from graphviz_autograd.checks.diagnosis import Finding
    >>> print(findings_table([Finding("warning", "grad_zero", "w: zero gradient", ("n1",), "w")]), end="")
    severity  code       subject  message
    warning   grad_zero  w        w: zero gradient
    1 finding: 0 errors, 1 warning, 0 info
    """
    counts = {severity: sum(f.severity == severity for f in findings) for severity in SEVERITIES}
    summary = (
        f"{len(findings)} finding{'s' if len(findings) != 1 else ''}: "
        f"{counts['error']} error{'s' if counts['error'] != 1 else ''}, "
        f"{counts['warning']} warning{'s' if counts['warning'] != 1 else ''}, {counts['info']} info\n"
    )
    if not findings:
        return "no findings\n"
    rows = [("severity", "code", "subject", "message")] + [
        (f.severity, terminal_text(f.code, one_line=True), terminal_text(f.subject, one_line=True) or "-", _one_line(f.message))
        for f in findings
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = []
    for number, row in enumerate(rows):
        cells = [row[i].ljust(widths[i]) for i in range(3)]
        if color and number:
            cells[0] = click.style(cells[0], fg=SEVERITY_COLORS.get(row[0]), bold=row[0] == ERROR)
        elif color:
            cells = [click.style(cell, bold=True) for cell in cells]
        lines.append("  ".join(cells) + "  " + row[3] + "\n")
    return "".join(lines) + summary


# --- steps -------------------------------------------------------------------------


def _output_and_format(spec: ModelSpec, output: Optional[str], output_format: Optional[str]) -> tuple[Optional[Path], str]:
    """The file to write (None for stdout) and its format; usage errors for what cannot work."""
    fmt = output_format.lower() if output_format else None
    if output == STDOUT:
        fmt = fmt or "dot"
        if fmt not in STDOUT_FORMATS:
            raise click.UsageError(
                f"-o - writes text to stdout, and {fmt.upper()} is binary; give a file name "
                f"(-o {spec.stem}.{fmt}) or use --format {', '.join(STDOUT_FORMATS)}."
            )
        return None, fmt
    if output is None:
        fmt = fmt or DEFAULT_FORMAT
        return Path(f"{spec.stem}.{fmt}"), fmt
    suffix = Path(output).suffix.lower()
    named = OUTPUT_SUFFIXES.get(suffix)
    if fmt is not None and named is not None and named != fmt:
        raise click.UsageError(
            f"--format {fmt} contradicts the suffix of -o {output!r} ({suffix} is {named}); "
            f"drop one of them, or end the name in .{fmt}."
        )
    if fmt is None:
        if suffix not in OUTPUT_SUFFIXES:
            raise click.BadParameter(
                f"cannot tell the format of {output!r} from its suffix ({suffix or 'none'}); end the name "
                f"in one of {', '.join(OUTPUT_SUFFIXES)} or pass --format {'|'.join(OUTPUT_FORMATS)}.",
                param_hint="'-o' / '--output'",
            )
        fmt = OUTPUT_SUFFIXES[suffix]
    return Path(output), fmt


def _require_graphviz(spec: ModelSpec, model: str, fmt: str) -> None:
    """Fail before any model code runs when the format needs Graphviz and it is missing,
    saying what works without it."""
    try:
        find_dot()
    except GraphvizNotFoundError as error:
        if fmt == HTML:
            instead = ("an .html page laid out by the fixed layout works without it: "
                       f"graphviz-autograd render {model} -o {spec.stem}.html --layout fixed")
        else:
            instead = f"DOT output works without it: graphviz-autograd render {model} -o {spec.stem}.dot"
        raise GraphvizNotFoundError(f"{error} {instead[0].upper()}{instead[1:]}") from error


def _draw(
    loaded: LoadedModel,
    outputs: Any,
    fmt: str,
    progress: "_Progress",
    options: DrawOptions,
    *,
    name_leaves: bool,
    recorder: Optional[Recorder],
    diagnose: bool = False,
    measured: Optional[Union[StepProfile, NonfiniteFindings]] = None,
) -> tuple[str, str, Optional[Callable[[], str]]]:
    """Walk the outputs; return JSON or DOT text (folded and collapsed as
    ``options.depth`` says, see ``views.prepared.prepare``), the Graphviz program to draw it, and for ``layout="auto"`` the
    same graph in the fixed layout, to draw when ``dot`` runs past its budget (else None). With a ``measured`` step, the
    graph its profile walked is drawn, coloured by backward time."""
    from ..checks.diagnosis import finding_overlay
    from ..drawing.dot_writer import digraph
    from ..drawing.layout import fixed_layout_source, lay_out
    from ..views.prepared import prepare
    from ..capture.walking import walk

    progress("walking the autograd graph...")
    started = time.perf_counter()
    overlays = []
    with _model_named_in_errors(loaded):
        if measured is not None and measured.graph is not None:
            graph: AutogradGraph = measured.graph  # the ids its measurements are for
            overlays.append(measured.overlay())
            if diagnose:
                overlays.insert(0, finding_overlay(_findings_of(loaded, graph, name_leaves=name_leaves, recorder=recorder)))
        elif diagnose:
            findings = _findings_of(
                loaded, outputs, name_leaves=name_leaves, collect_saved=options.collect_saved, recorder=recorder
            )
            assert findings.graph is not None
            graph = findings.graph
            overlays.append(finding_overlay(findings))
        else:
            names = loaded.tensor_names() if name_leaves else None
            graph = walk(
                outputs, names, collect_saved=options.collect_saved, collect_shapes=options.show_shapes, recorder=recorder
            )
    progress(f"walked {len(graph.nodes)} nodes, {len(graph.edges)} edges in {time.perf_counter() - started:.1f} s")
    if fmt == JSON:
        return graph.to_json(), "dot", None
    if fmt == "dot" and options.layout == "auto":
        options = options.replace(layout="dot")  # a DOT file is not laid out here: nothing to decide
    view = prepare(graph, options, overlays=overlays)
    if view.note:  # a decision made for the user: shown even with --quiet
        _say(f"note: {view.note}")
    elif view.depth is not None:
        progress(f"collapsed to depth {view.depth}: {len(view.graph.nodes)} nodes")
    laid_out = lay_out(view)
    if laid_out.note:  # a decision made for the user: shown even with --quiet
        _say(f"note: {laid_out.note}")
    source = digraph(laid_out.lines)
    if fmt != "dot":
        how = "with dot" if laid_out.engine == "dot" else "fixed layout, drawn with neato -n2"
        progress(f"laying out {how} ({len(view.graph.nodes)} nodes)...")
    fixed_source = None
    if options.layout == "auto" and laid_out.engine == "dot" and fmt != "dot":
        fixed_source = functools.partial(fixed_layout_source, view)
    return source, laid_out.engine, fixed_source


def _nonfinite_step(loaded: LoadedModel, progress: "_Progress") -> NonfiniteFindings:
    """Where NaN or Inf is born in a step of the model file (``find_nonfinite``), said as progress."""
    from ..checks.nonfinite_origin import find_nonfinite

    progress("running a training step, watching every value for NaN and Inf...")
    with _model_named_in_errors(loaded):
        found = find_nonfinite(loaded.model, loaded.example_inputs, loss=loaded.loss)
    progress("every value of the step is finite" if not found else f"NaN/Inf found: {found[0].subject} is where it is born")
    return found


def _failure_path(spec: ModelSpec, target: Optional[Path], fmt: str) -> Path:
    """Where ``render`` draws the graph of a forward pass that failed: beside the file asked
    for, ``out.failed.svg`` for ``out.svg`` (the file asked for is left as it was), or
    ``<model>.failed.<format>`` in the current folder when the output goes to stdout."""
    if target is None:
        return Path(f"{spec.stem}.failed.{fmt}")
    return target.with_name(f"{target.stem}.failed{target.suffix or '.' + fmt}")


def _has_graphviz() -> bool:
    try:
        find_dot()
    except GraphvizNotFoundError:
        return False
    return True


def _run_or_draw_failure(
    loaded: LoadedModel,
    recorder: Optional[Recorder],
    picture: Path,
    fmt: str,
    progress: "_Progress",
    options: DrawOptions,
    timeout: float,
    name_leaves: bool = True,
) -> Any:
    """Run the model file's forward pass (and loss). When it raises inside ``recorder``, the
    graph up to the failing call is drawn to ``picture`` (in ``fmt``) and the error says where;
    the command still fails with it."""
    from .model_file import ModelFileError

    try:
        return loaded.run(recorder)
    except ModelFileError as error:
        failure = recorder.failure if recorder is not None else None
        if failure is None or not failure.has_graph:  # nothing ran that a picture could show
            raise
        progress(f"the forward pass failed at {failure.call}; drawing the graph up to it...")
        try:
            if fmt == HTML:
                page = _explore(loaded, failure, progress, name_leaves=name_leaves, recorder=recorder, diagnose=False,
                                options=options, timeout=timeout)
                written = write_atomic(picture, page.html().encode("utf-8"), inputs=[loaded.path])
            else:
                text, engine, fixed_source = _draw(loaded, failure, fmt, progress, options, name_leaves=name_leaves,
                                                   recorder=recorder)
                _write(text, picture, fmt, timeout, progress, engine, fixed_source, options.layout_budget,
                       inputs=[loaded.path])
                written = picture
        except GraphvizAutogradError as drawing_error:
            raise ModelFileError(
                f"{error} (The graph up to the failing call could not be drawn: {drawing_error})"
            ) from error
        finally:
            failure.release()
        where = f"{failure.module} ({failure.module_type})" if failure.module else "the top level"
        said = str(error).rstrip()
        raise ModelFileError(
            f"{said}{'' if said.endswith('.') else '.'} The graph up to the failing call ({failure.call} in {where}, "
            f"in red) is drawn in {written}."
        ) from error


def _measured_step(loaded: LoadedModel, progress: "_Progress") -> StepProfile:
    """A profile of the model file's training step, for ``render --profile``."""
    from ..checks.profiling import profile_step

    progress("measuring a training step (3 steps after 1 warm-up)...")
    with _model_named_in_errors(loaded, said=True):
        measured = profile_step(loaded.model, loaded.example_inputs, loss=loaded.loss)
    progress(f"measured on {measured.device}: a step takes {measured.step_time * 1e3:.1f} ms")
    return measured


def _load(
    spec: ModelSpec,
    model: str,
    input_shapes: Optional[tuple[Shape, ...]],
    training: Optional[bool],
    progress: "_Progress",
    debug: bool = False,
) -> LoadedModel:
    """The model file's model and inputs, in the mode asked, its notes said (what libraries
    warned while it loaded among them; with ``debug`` they print as they come)."""
    from .model_file import load_model

    progress(f"loading {model}...")
    loaded = load_model(spec, input_shapes=input_shapes, library_output=debug).with_mode(training)
    for note in loaded.notes:  # a decision made for the user: shown even with --quiet
        _say(f"note: {note}")
    return loaded


def _explore(
    loaded: LoadedModel,
    outputs: Any,
    progress: "_Progress",
    *,
    name_leaves: bool,
    recorder: Optional[Recorder],
    diagnose: bool,
    options: DrawOptions,
    timeout: float,
    measured: Optional[Union[StepProfile, NonfiniteFindings]] = None,
) -> Any:
    """The explorer page of the outputs: one walk, with what check finds when asked, and with
    a ``measured`` step, the graph its profile walked, coloured by its times and memory."""
    from ..explorer.pages import check_graph_size, explore
    from ..capture.walking import walk

    check_graph_size(outputs)  # before the walk, which would take long on a graph too big
    progress("walking the autograd graph...")
    with _model_named_in_errors(loaded):
        if measured is not None and measured.graph is not None:
            graph: AutogradGraph = measured.graph  # the ids its measurements are for
        else:
            names = loaded.tensor_names() if name_leaves else None
            graph = walk(outputs, names, collect_saved=True, collect_shapes=True, recorder=recorder)
        findings: Any = _findings_of(loaded, graph, name_leaves=name_leaves, recorder=recorder) if diagnose else False
    if isinstance(measured, list):  # the findings of where NaN/Inf is born: badges on the page
        findings = [*(findings or []), *measured]
    progress(f"walked {len(graph.nodes)} nodes; laying out each distinct level with dot...")
    return explore(graph, diagnose=findings, show_attrs=options.show_attrs, timeout=timeout,
                   expand_limit=options.expand_limit, layout=options.layout, layout_budget=options.layout_budget,
                   overlays=measured.overlays() if measured else (),
                   memory=getattr(measured, "memory", None),
                   title=loaded.model.__class__.__name__ if loaded.model is not None else None)


def _findings_of(
    loaded: LoadedModel,
    outputs: Any,
    *,
    name_leaves: bool = True,
    collect_saved: bool = True,
    backward: bool = False,
    recorder: Optional[Recorder] = None,
    top_memory: Optional[int] = None,
) -> Findings:
    """What ``check`` finds on ``outputs`` of the loaded model, its parameters and inputs
    named when ``name_leaves`` (the model file gave the model)."""
    from ..checks.diagnosis import DEFAULT_TOP_MEMORY, check

    if top_memory is None:
        top_memory = DEFAULT_TOP_MEMORY
    if not name_leaves:
        return check(outputs, recorder=recorder, collect_saved=collect_saved, top_memory=top_memory)
    return check(
        outputs,
        loaded.model,
        recorder=recorder,
        inputs=loaded.input_names(),
        collect_saved=collect_saved,
        backward=backward,
        top_memory=top_memory,
    )


@contextlib.contextmanager
def _model_named_in_errors(loaded: LoadedModel, said: bool = False) -> Iterator[None]:
    """A NoGraphError names the model file, and says what to change there (unless ``said``:
    profile_step's own error says it already)."""
    try:
        yield
    except NoGraphError as error:
        if said:
            raise NoGraphError(f"{loaded.source}: {error}") from error
        raise NoGraphError(
            f"{loaded.source}: {error} In the model file, keep a parameter trainable and "
            f"build the output with gradients enabled."
        ) from error


def _write(
    text: str,
    target: Optional[Path],
    fmt: str,
    timeout: float,
    progress: "_Progress",
    engine: str = "dot",
    fixed_source: Optional[Callable[[], str]] = None,
    budget: float = DEFAULT_LAYOUT_BUDGET,
    *,
    inputs: Sequence[Path] = (),
) -> None:
    """Write the text (or what Graphviz draws from it) to ``target``, or to stdout when it is None;
    never over one of ``inputs``, the files the command read.

    With ``fixed_source``, ``dot`` is stopped after the layout budget and that is drawn instead."""
    if fmt in ("dot", JSON):
        data = text.encode("utf-8")
    else:
        from ..drawing.budget import draw_within_budget

        drawn = draw_within_budget(
            text, fmt, engine=engine, budget=budget, fixed_source=fixed_source, timeout=timeout
        )
        if drawn.note:  # a decision made for the user: shown even with --quiet
            _say(f"note: {drawn.note}")
        data = drawn.data
    if target is None:
        click.echo(data, nl=False)  # bytes go out unchanged: no newline translation, no ANSI stripping
        return
    written = write_atomic(target, data, inputs=inputs)
    progress(f"wrote {written} ({_size_text(written.stat().st_size)})")


# --- helpers -----------------------------------------------------------------------


class _Progress:
    """Plain progress lines on stderr, so stdout stays clean for `-o -`."""

    def __init__(self, quiet: bool):
        self.quiet = quiet

    def __call__(self, message: str) -> None:
        if not self.quiet:
            _say(message)


@contextlib.contextmanager
def _stdout_to_stderr(active: bool) -> Iterator[None]:
    """Send what the model's code prints to stderr while stdout carries the graph."""
    if not active:
        yield
        return
    with contextlib.redirect_stdout(sys.stderr):
        yield


def _parse_input_shapes(values: tuple[str, ...]) -> Optional[tuple[Shape, ...]]:
    if not values:
        return None
    return tuple(_parse_shape(value) for value in values)


def _parse_shape(text: str) -> Shape:
    """'1,3,224,224' (or '1x3x224x224', '(1, 3)') -> (1, 3, 224, 224); '' or '()' is a scalar."""
    inner = text.strip().strip("()[]").strip()
    if not inner:
        return ()
    parts = [part.strip() for part in re.split(r"[,x]", inner)]
    if not all(part.isdigit() for part in parts):
        raise click.BadParameter(
            f"{text!r} is not a shape; write the sizes separated by commas, e.g. --input-shape 1,3,224,224.",
            param_hint="'--input-shape'",
        )
    return tuple(int(part) for part in parts)


@contextlib.contextmanager
def _errors_as_messages(debug: bool) -> Iterator[None]:
    """Errors as one line on stderr and exit status 1, or their traceback with ``--debug``.

    This package's errors say what was wrong and what to do. Anything else that
    escapes is a bug of ours, and says so rather than ending in a traceback.
    """
    try:
        yield
    except click.ClickException as error:  # a usage error may name the model as given
        error.message = terminal_text(error.message)  # type: ignore[misc]  # Final in click's stubs only
        raise
    except (click.exceptions.Exit, click.Abort):
        raise
    except SystemExit as error:
        # The loader names a sys.exit() in the model file's import, forward and loss;
        # this is one from anywhere else the model's code runs (a hook, a property).
        if debug:
            raise
        from .model_file import deepest_user_frame

        where = deepest_user_frame(error)
        raise click.ClickException(
            _one_line(
                f"{where + ': ' if where else ''}the model's code called sys.exit({error.code!r}) while "
                "graphviz-autograd was running it; nothing was written. A model file must not exit; keep "
                'script code under `if __name__ == "__main__":`.'
            )
        ) from None
    except GraphvizAutogradError as error:
        if debug:
            raise
        raise click.ClickException(_one_line(str(error))) from None
    except Exception as error:
        if debug:
            raise
        raise click.ClickException(
            _one_line(
                f"internal error: {type(error).__name__}: {error}. This is a bug in graphviz-autograd: "
                "run the command again with --debug for the traceback, and report it."
            )
        ) from None


def _one_line(message: str) -> str:
    """Error text on one line (torch's messages often span several), escaped for the
    terminal: it names the model's modules and files."""
    return terminal_text(re.sub(r"\s*\n\s*", " ", message.strip()), one_line=True)


def _say(message: str, *, err: bool = True, nl: bool = True) -> None:
    """Write ``message`` to the terminal (stderr unless ``err=False``) through its one escape."""
    click.echo(terminal_text(message), err=err, nl=nl)


def _size_text(size: int) -> str:
    if size < 1000:
        return f"{size} bytes"
    if size < 1_000_000:
        return f"{size / 1000:.1f} kB"
    return f"{size / 1_000_000:.1f} MB"


# --- diff -------------------------------------------------------------------------

DIFF_FORMATS = ("svg", "pdf", "png", "dot", HTML, JSON)
DIFF_USAGE_STATUS = 2  # as diff(1): 0 equal, 1 different, 2 trouble


@main.command(name="diff", context_settings=CONTEXT_SETTINGS,
              short_help="Say and draw what changed between the graphs of two models; exit 1 when they differ.")
@click.argument("old", metavar="A")
@click.argument("new", metavar="[B]", required=False)
@click.option(
    "-o",
    "--output",
    metavar="FILE",
    help="Also draw the diff to FILE; its suffix (.svg .pdf .png .dot .gv .html .json) picks the format: "
    "one picture of both graphs, added green, removed dashed red, changed orange (old -> new in the "
    "tooltip), unchanged modules closed.",
)
@click.option("--json", "as_json", is_flag=True, help="Write the diff as JSON on stdout instead of sentences.")
@_model_run_options
@click.option(
    "--b-input-shape",
    "b_input_shapes",
    multiple=True,
    metavar="N,N,...",
    callback=lambda ctx, param, value: _parse_input_shapes(value),
    help="Run B on a random float input of this shape (default: as A); with B left out, A is compared with itself so run.",
)
@click.option("--b-train/--b-eval", "b_training", default=None,
              help="Run B in train or eval mode (default: as A); with B left out, A is compared with itself so run.")
@_seconds_option("--timeout", DEFAULT_TIMEOUT, "Give up on Graphviz's layout after this long.")
@_progress_options
@_in_own_process
def diff_command(
    old: str,
    new: Optional[str],
    output: Optional[str],
    as_json: bool,
    input_shapes: Optional[tuple[Shape, ...]],
    training: Optional[bool],
    b_input_shapes: Optional[tuple[Shape, ...]],
    b_training: Optional[bool],
    timeout: float,
    quiet: bool,
    debug: bool,
) -> None:
    """Compare the backward graphs of models A and B: what was added, removed or changed,
    module by module (op kinds, shapes, dtypes, frozen parameters, cut gradients).

    \b
    Prints one sentence a change, most significant first ('no change' when equal),
    and exits with 0 when the graphs are equal, 1 when they differ and 2 on an error.
    A and B take the forms of 'graphviz-autograd render' and run the same way
    (the same --input-shape and --train/--eval), unless --b-input-shape or
    --b-train/--b-eval say otherwise for B; without B, A is compared with itself
    run as those say.

    \b
    Examples:
      graphviz-autograd diff old_model.py new_model.py
      graphviz-autograd diff models.py:small models.py:large -o change.svg
      graphviz-autograd diff a.py b.py --json > diff.json
      graphviz-autograd diff samples/lenet.py samples/mnist_cnn.py
      graphviz-autograd diff model.py --eval --b-train     # what train mode changes
    """
    from .model_file import parse_model_spec
    from ..capture.recording import record
    from ..capture.walking import walk
    from ..views.diffing import diff
    from ..views.shown import shown_text

    progress = _Progress(quiet)
    try:
        with _errors_as_messages(debug):
            if new is None and not b_input_shapes and b_training is None:
                raise click.UsageError(
                    "diff needs a second model B, or --b-input-shape or --b-train/--b-eval to compare A with "
                    "itself run another way."
                )
            new = old if new is None else new
            specs = [parse_model_spec(old), parse_model_spec(new)]
            target, fmt = _diff_output(output, specs)
            if target is not None and fmt in ("svg", "pdf", "png"):
                _require_graphviz(specs[1], new, fmt)
            graphs = []
            runs = ((input_shapes, training), (b_input_shapes or input_shapes, training if b_training is None else b_training))
            with contextlib.redirect_stdout(sys.stderr):  # stdout carries only the report
                for spec, model, (shapes, mode) in zip(specs, (old, new), runs):
                    loaded = _load(spec, model, shapes, mode, progress)
                    progress(f"running and recording the forward pass of {model}...")
                    recorder = record(loaded.model)
                    outputs = loaded.run(recorder)
                    with _model_named_in_errors(loaded):
                        graphs.append(walk(outputs, loaded.tensor_names(), recorder=recorder))
            found = diff(graphs[0], graphs[1])
            if target is not None:
                _write_diff(found, target, fmt, timeout, progress)
    except click.ClickException as error:
        if error.exit_code == DIFF_USAGE_STATUS:
            raise
        raise _DiffTrouble(error.message) from None
    if as_json:
        click.echo(found.to_json(), nl=False)
    else:
        click.echo("".join(shown_text(line) + "\n" for line in found.text().splitlines()), nl=False)
    if not found.equal:
        sys.exit(1)


class _DiffTrouble(click.ClickException):
    """An error of ``diff``: status 2, as 1 says that the graphs differ."""

    exit_code = DIFF_USAGE_STATUS


def _diff_output(output: Optional[str], specs: list[ModelSpec]) -> tuple[Optional[Path], str]:
    """The file ``-o`` names and its format (None: no file); usage errors for what cannot be written."""
    if output is None:
        return None, ""
    suffix = Path(output).suffix.lower()
    fmt = OUTPUT_SUFFIXES.get(suffix)
    if output == STDOUT or fmt not in DIFF_FORMATS:
        raise click.BadParameter(
            f"cannot tell what to write to {output!r}; end the file name in one of .svg .pdf .png .dot .gv .html .json.",
            param_hint="'-o' / '--output'",
        )
    target = check_writable(output)
    for spec in specs:
        if spec.path is not None and target.resolve() == Path(spec.path).resolve():
            raise click.BadParameter(
                f"{output!r} is the model file {spec.path}; give the picture another name.", param_hint="'-o' / '--output'"
            )
    return target, fmt


def _write_diff(found: Any, target: Path, fmt: str, timeout: float, progress: "_Progress") -> None:
    """Draw a diff to ``target``: the picture of its prepared view, its explorer page or its JSON."""
    from ..drawing.dot_writer import digraph
    from ..drawing.layout import lay_out
    from ..explorer.pages import explore

    if fmt == JSON:
        written = write_atomic(target, found.to_json().encode("utf-8"))
    elif fmt == HTML:
        progress("laying out each level of the diff's explorer page...")
        page = explore(found.merged, overlays=[found.overlay()], timeout=timeout, title="diff")
        written = write_atomic(target, page.html().encode("utf-8"))
    else:
        view = found.view()
        if view.note:  # a decision made for the user: shown even with --quiet
            click.echo(f"note: {view.note}", err=True)
        laid_out = lay_out(view)
        _write(digraph(laid_out.lines), target, fmt, timeout, progress, laid_out.engine)
        return
    progress(f"wrote {written} ({_size_text(written.stat().st_size)})")


if __name__ == "__main__":  # pragma: no cover
    main(prog_name=PROG_NAME)
