"""Watch a model train: statistics per module call and per parameter, every N steps.

``watch(model, optimizer=opt, every=10)`` hooks the model's modules, its parameters
and the optimizer's step. On a logged step (steps 0, N, 2N, ...) it measures:

- per module call (named as :func:`~graphviz_autograd.capture.recording.record` names
  them: a module called twice is ``path`` and ``path#2``), on the first floating-point
  tensor of its output: ``activation_mean``, ``activation_std``, ``activation_abs_max``,
  ``activation_zero_fraction`` (elements exactly zero; counted on an even sample of 65,536
  elements of a larger output), ``activation_dead_fraction``
  (units, along the last dimension, zero for every row of the batch),
  ``activation_saturated_fraction`` (tanh and sigmoid modules only: outputs within 1% of
  their bounds) and ``output_grad_norm`` (a tensor hook on that output, so in-place ops
  after it do no harm, unlike ``register_full_backward_hook``);
- per parameter: ``param_norm`` before the optimizer's step, ``grad_norm`` of the gradient it used, and
  ``update_ratio``, the norm of the step's change over the norm before it (‖Δw‖/‖w‖),
  from a copy of the parameters taken on logged steps only;
- a histogram of each (``activation``, ``output_grad``, ``param``, ``grad``, ``update``)
  over fixed bins of the magnitude: :data:`HISTOGRAM_EDGES` are powers of ten from
  1e-8 to 1e4 in half decades (24 bins); smaller magnitudes, zero included, count in the
  first bin, larger ones in the last, NaN in none. A histogram counts an evenly spaced
  sample of at most ``histogram_sample`` (1024) elements of its tensor (None: every
  element): the statistics above count every element.

Everything is reduced on the tensor's device, and a logged step moves its numbers to
the host once (one vector, one ``tolist()``); no tensor is kept from one step to the
next. On other steps every hook returns at once. At most ``keep`` logged steps are
kept: past that, every second one is dropped (the first stays), and from then on
only every second logged step is kept, so the record spans the whole run at an even
spacing; findings of NaN and Inf look at every logged step all the same.

>>> import torch
>>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
>>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
>>> with watch(model, optimizer=opt, every=2) as w:
...     for _ in range(5):
...         model(torch.randn(16, 4)).pow(2).mean().backward()
...         opt.step(); opt.zero_grad()
>>> w.steps, sorted(w.series("update_ratio"))
([0, 2, 4], ['0.bias', '0.weight', '2.bias', '2.weight'])
>>> [len(values) for values in w.series("activation_zero_fraction").values()]
[3, 3, 3, 3]
"""

from __future__ import annotations

from dataclasses import replace

import math
import os
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence, Union

import torch

from ..capture.naming import named_tensors
from ..capture.recording import ModuleCalls, Recorder, record
from ..capture.walking import walk
from ..checks.diagnosis import ERROR, INFO, NONFINITE_SEEN, UNWATCHED_MODULE, WARNING, Finding, peer_roles, rounding_decades
from ..checks.rules import (
    GRAD_NORM_OUTLIER,
    UPDATE_RATIO,
    UPDATE_RATIO_RANGE,
    DEAD_UNITS,
    GRAD_ZERO,
    MOST_STEPS,
    DEFAULT_DECADES,
    SATURATED,
    Condition,
    Held,
    StepEvidence,
    gradient_trend,
    judge,
    nonfinite_values,
    over_steps,
)
from ..drawing.rendering import check_writable, write_atomic
from ..errors import GraphvizAutogradError, InputTypeError, OptionError
from ..graph.style import SEVERITIES
from ..graph.autograd_graph import DATA, OP, OUTPUT, AutogradGraph, ModuleInfo, calls_around, module_of_call, parameter_nodes
from ..views.overlays import Overlay
from .measures import (
    DEFAULT_HISTOGRAM_SAMPLE,
    HISTOGRAM_BINS,
    HISTOGRAM_EDGES,
    Layout,
    StepMeasures,
)

# Statistics of a module call's output, and of a parameter.
MODULE_STATISTICS = (
    "activation_mean",
    "activation_std",
    "activation_abs_max",
    "activation_zero_fraction",
    "activation_dead_fraction",
    "activation_saturated_fraction",
    "output_grad_norm",
)
PARAMETER_STATISTICS = ("param_norm", "grad_norm", "update_ratio")
STATISTICS = MODULE_STATISTICS + PARAMETER_STATISTICS
HISTOGRAMS = ("activation", "output_grad", "param", "grad", "update")
# Statistics that take the largest over ranks, not the mean.
_LARGEST = frozenset({"activation_abs_max"})
# Histograms of what each rank's own batch makes: their counts add up over ranks.
_BATCH_HISTOGRAMS = frozenset({"activation", "output_grad"})

DEFAULT_EVERY = 10
DEFAULT_KEEP = 1000
# Training steps at least between two logged steps that take histograms: a histogram costs a
# logged step more than its statistics do (GPT-2, every step: 0.15 of a plain step), and one
# every ten steps draws the distribution over a run as well.
DEFAULT_HISTOGRAM_EVERY = 10
# Where each statistic that can hold NaN/Inf is seen (the places of checks/rules.py's nonfinite_values).
_NONFINITE_PLACES = {
    "activation_abs_max": "output",
    "output_grad_norm": "output_gradient",
    "param_norm": "parameter",
    "grad_norm": "gradient",
}
_PLACE_NAMES = {"output": "outputs", "output_gradient": "their gradients", "parameter": "parameters", "gradient": "gradients"}
# torch's hooks on every module's setting of a submodule or parameter (torch 2.0 and later).
_REGISTRATION_HOOKS: tuple[Callable[..., Any], ...] = tuple(
    hook for hook in (
        getattr(torch.nn.modules.module, "register_module_module_registration_hook", None),
        getattr(torch.nn.modules.module, "register_module_parameter_registration_hook", None),
    ) if hook is not None
)
# Module types whose outputs have bounds, and the bounds.
_BOUNDED = {"Tanh": (-1.0, 1.0), "Sigmoid": (0.0, 1.0), "Hardtanh": (-1.0, 1.0), "Softsign": (-1.0, 1.0)}
RANKS = ("reduce", "each")

_compiling = torch.compiler.is_compiling


class LoggedStep(NamedTuple):
    """What one logged step measured: ``values[statistic][module call or parameter]`` and
    ``histograms[kind][module call or parameter]`` (counts per bin of :data:`HISTOGRAM_EDGES`);
    with ``ranks='each'`` under torch.distributed, ``by_rank`` holds every rank's (values,
    histograms), rank by rank, for the page's choice of rank."""

    step: int
    values: dict[str, dict[str, float]]
    histograms: dict[str, dict[str, tuple[int, ...]]]
    by_rank: tuple[tuple[dict[str, dict[str, float]], dict[str, dict[str, tuple[int, ...]]]], ...] = ()


class Watcher:
    """Watch ``model`` train inside ``with watch(model, optimizer=opt, every=10) as w:``
    (``watch`` is this class by a name that says what it does).

    Each ``every``-th training step (0, ``every``, ...) is logged: statistics of each
    module call's output and its gradient, of each parameter, its gradient and its
    update (see :mod:`graphviz_autograd.training.measures`). A step ends at
    ``optimizer.step()`` when the optimizer is given, else at ``w.step()`` (call it after
    the optimizer's step). Then ``w.findings()`` says what went wrong and when,
    ``w.overlay("grad_norm")`` colours :meth:`Watcher.graph` by a statistic, and
    ``w.to_dict()`` / ``w.save_json(path)`` give the record.

    ``keep`` bounds the logged steps kept; ``histograms=False`` skips the histograms,
    ``histogram_every`` is how many training steps at least lie between two logged steps that
    take them (the costliest part of a logged step: with ``every=1`` they come every 10th step,
    with ``every=10`` or more at every logged step), and ``histogram_sample`` is how many
    elements of each tensor they count at most (None: all);
    under torch.distributed, ``ranks='reduce'`` keeps statistics over all ranks and
    ``'each'`` each rank's own; ``graph=False`` records no graph at the first logged step.
    With ``page``, the explorer page (:meth:`Watcher.save`) is written there, atomically,
    every ``page_every`` logged steps while training runs: reloading it shows the latest.
    Leaving the ``with`` (also by an exception) removes every hook: the model is as it was.

    >>> import torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Tanh())
    >>> with watch(model, every=1) as w:
    ...     model(torch.randn(3, 2)).sum().backward()
    ...     w.step()
    >>> sorted(w.latest("activation_saturated_fraction"))
    ['1']
    """

    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: Optional[torch.optim.Optimizer] = None,
        every: int = DEFAULT_EVERY,
        *,
        keep: int = DEFAULT_KEEP,
        histograms: bool = True,
        ranks: str = "reduce",
        graph: bool = True,
        histogram_sample: Optional[int] = DEFAULT_HISTOGRAM_SAMPLE,
        page: Union[str, "os.PathLike[str]", None] = None,
        page_every: int = 1,
        histogram_every: int = DEFAULT_HISTOGRAM_EVERY,
    ):
        if not isinstance(model, torch.nn.Module):
            raise InputTypeError(f"watch() takes an nn.Module; got {type(model).__name__}. Pass the model being trained.")
        if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
            raise InputTypeError(
                f"watch(optimizer=) takes a torch.optim.Optimizer; got {type(optimizer).__name__}. "
                "Pass the optimizer whose step ends a training step, or none and call w.step()."
            )
        for name, value, least in (("every", every, 1), ("keep", keep, 2), ("histogram_every", histogram_every, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise OptionError(f"watch({name}=) must be a whole number of at least {least}; got {value!r}.")
        if histogram_sample is not None and (isinstance(histogram_sample, bool) or not isinstance(histogram_sample, int) or histogram_sample < 1):
            raise OptionError(
                f"watch(histogram_sample=) must be a whole number of at least 1, or None for every element; got {histogram_sample!r}."
            )
        if ranks not in RANKS:
            raise OptionError(f"watch(ranks=) must be 'reduce' (statistics over all ranks) or 'each'; got {ranks!r}.")
        if page is not None:
            if isinstance(page_every, bool) or not isinstance(page_every, int) or page_every < 1:
                raise OptionError(f"watch(page_every=) must be a whole number of logged steps, 1 or more; got {page_every!r}.")
            if not graph:
                raise OptionError("watch(page=...) draws the graph of the first logged step: leave graph=True.")
        # DistributedDataParallel runs the module it wraps: watch that, with its own names.
        inner = getattr(model, "module", None)
        if type(model).__name__ == "DistributedDataParallel" and isinstance(inner, torch.nn.Module):
            model = inner
        self.model = model
        self.optimizer = optimizer
        self.every = every
        self.keep = keep
        self.with_histograms = histograms
        self.histogram_every = histogram_every
        self.histogram_sample = histogram_sample
        self._histogram_step: Optional[int] = None  # the last training step whose histograms were taken
        self.ranks = ranks
        self.record_graph = graph
        self.step_count = 0  # training steps finished while watching
        self._log: list[LoggedStep] = []
        self._stride = 1  # keep every this many logged steps (doubles each time the record is full)
        self._logged = 0  # logged steps so far, kept or not
        self._module_types: dict[str, str] = {name: type(m).__name__ for name, m in model.named_modules()}
        # Modules holding parameters of their own: the layers a gradient crosses.
        self._layers = frozenset(
            name for name, m in model.named_modules() if any(True for _ in m.parameters(recurse=False))
        )
        self._calls = ModuleCalls(tuple(ModuleInfo(path, kind) for path, kind in self._module_types.items()))
        self._call_order: dict[str, int] = {}  # module call path -> place of its first start
        self._output_order: dict[str, int] = {}  # module call path -> place of its first output
        self._hooks: list[Any] = []
        self._inside = False
        self._logging = False  # whether the running step is logged
        self._measures = StepMeasures(histograms, histogram_sample)  # what the running logged step measured
        self._before: dict[str, torch.Tensor] = {}  # parameter name -> its copy before a logged step
        self._step_inputs: Optional[tuple[tuple, dict]] = None  # what the logged step's forward pass was given
        # The gradients the check for NaN/Inf before the optimizer's step read, with their versions, and
        # their norms (one device): the step's grad_norm when the step leaves them as they were.
        self._grads_checked: Optional[tuple[list[torch.Tensor], list[int], torch.Tensor]] = None
        # Where the first NaN/Inf is born: (step, what find_nonfinite said of it run again, or None and why not).
        self._origin: Optional[tuple[int, Any, str]] = None
        self._nonfinite: dict[str, tuple[int, list[str]]] = {}  # statistic -> (first step, keys then)
        self._listeners: list[Callable[["Watcher", LoggedStep], None]] = []
        if page is not None:
            self.listen(_PageWriter(page, page_every))
        self._graph: Optional[AutogradGraph] = None
        self._recorder: Optional[Recorder] = None
        self._started = False  # whether the running logged step ran its first forward call
        self._warned_compiled = False
        self._hooked: dict[str, int] = {}  # module path -> id of the module its hooks are on
        # The model's parameters by name, and whether the model may have changed since they and
        # the check for modules put in after watch() started were last taken: torch's global
        # registration hooks say when a module or parameter is set anywhere, so a logged step
        # walks the model only then, not three times a step.
        self._named_parameters: list[tuple[str, torch.nn.Parameter]] = []
        self._model_changed = True
        self._unwatched: dict[str, tuple[int, str]] = {}  # module path -> (step first seen, its type)

    # --- the context manager ---

    def __enter__(self) -> "Watcher":
        if self._inside:
            raise RuntimeError("This watcher is already watching; use one watch() per training loop.")
        self._inside = True
        try:
            self._attach()
        except BaseException:
            self._detach()
            raise
        self._start_step()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._detach()

    def _attach(self) -> None:
        self._hooked = {name: id(module) for name, module in self.model.named_modules()}
        self._model_changed = True
        for register in _REGISTRATION_HOOKS:
            self._hooks.append(register(self._registered))
        for name, module in self.model.named_modules():
            self._hooks.append(module.register_forward_pre_hook(self._entering(name)))
            self._hooks.append(module.register_forward_hook(self._leaving(name, _BOUNDED.get(type(module).__name__))))
        # The inputs of a logged step's forward pass, kept to the step's end: the step is run again
        # on them, every value watched, if its numbers are the first to hold NaN/Inf.
        self._hooks.append(self.model.register_forward_pre_hook(self._keep_inputs, with_kwargs=True))
        if self.optimizer is not None:
            self._hooks.append(self.optimizer.register_step_pre_hook(self._before_optimizer_step))
            self._hooks.append(self.optimizer.register_step_post_hook(self._after_optimizer_step))
        else:
            for name, param in self.model.named_parameters():
                if param.requires_grad:
                    self._hooks.append(param.register_post_accumulate_grad_hook(self._accumulated(name)))

    def _detach(self) -> None:
        for handle in self._hooks:
            handle.remove()
        self._hooks = []
        if self._recorder is not None:
            self._recorder.__exit__(None, None, None)
            self._recorder = None
        self._inside = False
        self._logging = False
        self._clear_step()

    def _registered(self, module: torch.nn.Module, name: str, value: Any) -> None:
        """A module or parameter was set on some module (this model's or not): walk again."""
        self._model_changed = True

    def _trainable(self) -> list[tuple[str, torch.nn.Parameter]]:
        """The model's parameters that require grad, by name."""
        self._walk_if_changed()
        return [(name, param) for name, param in self._named_parameters if param.requires_grad]

    def _walk_if_changed(self) -> None:
        """Take the model's parameters and note modules put in since watch() started, only
        after a module or parameter was set (or always, on a torch without registration hooks)."""
        if self._model_changed or not _REGISTRATION_HOOKS:
            self._named_parameters = list(self.model.named_parameters())
            self._note_unwatched()
            self._model_changed = False

    def _clear_step(self) -> None:
        self._measures = self._measures.anew()
        self._before = {}
        self._step_inputs = None
        self._grads_checked = None
        self._started = False
        self._calls.restart()

    # --- steps ---

    def step(self) -> None:
        """End a training step: call it after ``optimizer.step()``. Not needed (and does
        nothing) when ``watch`` was given the optimizer, whose step ends each step."""
        if self.optimizer is not None or not self._inside:
            return
        if self._logging:
            self._measure_parameters(read_grads=False)  # measured as they were accumulated
            self._finish()
        self._advance()

    def _start_step(self) -> None:
        self._logging = self.step_count % self.every == 0
        if self._logging and self.with_histograms:
            last = self._histogram_step
            taken = last is None or self.step_count - last >= self.histogram_every
            self._measures.with_histograms = taken
            if taken:
                self._histogram_step = self.step_count

    def _advance(self) -> None:
        self.step_count += 1
        self._clear_step()
        self._start_step()

    def listen(self, listener: Callable[["Watcher", LoggedStep], None]) -> None:
        """Call ``listener(watcher, logged_step)`` after each logged step (kept or not):
        how the TensorBoard writer and the training callbacks log as training goes."""
        self._listeners.append(listener)

    # --- hooks ---

    def _entering(self, name: str) -> Callable:
        def pre_hook(module: torch.nn.Module, args: Any) -> None:
            # Forward passes without gradients (evaluation between training steps) are not the step's.
            if _compiling() or not self._logging or not torch.is_grad_enabled():
                return
            if not name:  # the model's own call starts a forward pass (one per micro-batch): calls counted afresh
                self._calls.restart()
            if not self._calls.stack and not self._started:
                # The step's first outermost call: the model's own, or (Lightning runs its
                # training_step) the outermost module it calls.
                self._started = True
                if self.optimizer is None:
                    self._copy_parameters()
                if self.record_graph and self._graph is None and self._recorder is None:
                    self._recorder = record(self.model).__enter__()
            path = self._calls.enter(name)
            self._call_order.setdefault(path, len(self._call_order))

        return pre_hook

    def _leaving(self, name: str, bounds: Optional[tuple[float, float]]) -> Callable:
        def hook(module: torch.nn.Module, args: Any, output: Any) -> None:
            if _compiling() or not self._logging or not torch.is_grad_enabled():
                return
            path = self._calls.current
            self._calls.leave(name)
            self._output_order.setdefault(path, len(self._output_order))
            if isinstance(output, torch.Tensor):  # most modules: no nesting to look through
                tensor = output if output.is_floating_point() else None
            else:
                tensor = next((t for _, t in named_tensors(output) if t.is_floating_point()), None)
            if tensor is not None:
                self._measure_output(path, bounds, tensor)
            if not self._calls.stack and self._recorder is not None:  # the outermost call ends
                recorder, self._recorder = self._recorder, None
                recorder.__exit__(None, None, None)
                try:
                    self._graph = walk(output, self.model, recorder=recorder)
                except Exception:  # an output without a graph (no_grad): try the next logged step
                    self._graph = None

        return hook

    def _measure_output(self, path: str, bounds: Optional[tuple[float, float]], tensor: torch.Tensor) -> None:
        self._measures.output(path, bounds, tensor)
        if tensor.requires_grad:
            step = self.step_count
            tensor.register_hook(self._output_grad(path, step))

    def _output_grad(self, path: str, step: int) -> Callable[[torch.Tensor], None]:
        def on_grad(grad: torch.Tensor) -> None:
            if step != self.step_count or not self._logging:  # a backward run after its step ended
                return
            self._measures.gradient("output_grad_norm", "output_grad", path, grad)

        return on_grad

    def _accumulated(self, name: str) -> Callable[[torch.Tensor], None]:
        def on_accumulated(param: torch.Tensor) -> None:
            if _compiling() or not self._logging or param.grad is None:
                return
            self._measure_grad(name, param.grad)

        return on_accumulated

    def _measure_grad(self, name: str, grad: torch.Tensor) -> None:
        # Several backward passes in one step add entries of the same name: the step's end keeps
        # the last, the gradient accumulated in full.
        self._measures.gradient("grad_norm", "grad", name, _whole(grad.detach()))

    def _copy_parameters(self) -> None:
        with torch.no_grad():
            for name, param in self._trainable():
                self._before[name] = _whole(param.detach()).clone()

    def _keep_inputs(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        if (self._logging and self._step_inputs is None and self._origin is None and torch.is_grad_enabled()
                and not _compiling()):
            self._step_inputs = (args, kwargs)

    def _look_for_origin(self) -> None:
        """Before the optimizer's step of a logged step: when a gradient holds NaN or Inf (the first
        time), run the step again with every value watched
        (:func:`~graphviz_autograd.checks.nonfinite_origin.find_nonfinite`) on the inputs its forward
        pass was given, while the parameters are still as that forward pass saw them, to say where
        the NaN/Inf is born; everything is put back before the optimizer steps. Once per run; not
        under torch.distributed, where one rank's forward pass run alone could wait for ever."""
        inputs = self._step_inputs
        if self._origin is not None or inputs is None:
            return
        raw = [p.grad for _, p in self._trainable() if p.grad is not None]
        grads = [g.detach() for g in raw]
        if not grads:
            return  # a step given a closure computes them inside optimizer.step()
        with torch.no_grad():
            # One norm per gradient (NaN or Inf in any makes its norm so) and one move to the host
            # per device, not one per gradient.
            by_device: dict[torch.device, list[torch.Tensor]] = {}
            for g in grads:
                by_device.setdefault(g.device, []).append(g)
            norms = [torch.stack([n.float() for n in torch._foreach_norm(group)]) for group in by_device.values()]
            if all(bool(torch.isfinite(on_device).all()) for on_device in norms):
                if len(norms) == 1 and all(type(g) is torch.Tensor and g.layout == torch.strided for g in raw):
                    self._grads_checked = (raw, [g._version for g in raw], norms[0])
                return
        step = self.step_count
        if _world_size() > 1:
            self._origin = (step, None, "under torch.distributed the step is not run again")
            return
        from ..checks.nonfinite_origin import find_nonfinite

        args, kwargs = inputs
        logging, self._logging = self._logging, False  # the watcher's own hooks stay quiet meanwhile
        try:
            found = find_nonfinite(self.model, step=lambda: self.model(*args, **kwargs))
            self._origin = (step, found, "")
        except Exception as error:  # noqa: BLE001 - the training goes on; the finding says why
            self._origin = (step, None, f"running it again raised {type(error).__name__}: {error}")
        finally:
            self._logging = logging

    def _with_origin(self, finding: Finding, graph: Optional[AutogradGraph]) -> Finding:
        """``finding`` (NaN/Inf seen) with where the NaN/Inf is born, as the step run again says it."""
        if self._origin is None:
            return finding
        step, found, why = self._origin
        if found is None:
            return finding._replace(message=f"{finding.message} (Where it is born is not known: {why}.)")
        if not found:
            return finding._replace(message=(
                f"{finding.message} Step {step} run again with every value watched made no NaN/Inf: it depends "
                "on what the run does not repeat (the random state, an earlier step's side effects)."))
        first = found[0]
        nodes = finding.nodes
        if graph is not None and first.nodes and found.graph is not None:
            # The producer's node in this watcher's graph: the same op in the same module.
            producer = found.graph.node(first.nodes[0])
            same = [n.id for n in graph.nodes if n.label == producer.label and n.module == producer.module]
            nodes = tuple(dict.fromkeys((*same[:1], *nodes)))
        # Where it is born leads: the module whose output first held it is often the one after the op.
        return finding._replace(
            message=f"NaN/Inf first seen at step {step}, born here (the step run again with every value watched): "
                    f"{first.message} What the watch saw at that step: {finding.message}",
            nodes=nodes, subject=first.subject)

    def _before_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self._logging and self._inside:
            self._copy_parameters()
            self._look_for_origin()

    def _after_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self._inside:
            return
        if self._logging:
            self._measure_parameters(read_grads=True)
            self._finish()
        self._advance()

    def _measure_parameters(self, read_grads: bool) -> None:
        """Each parameter's norm before the step, its update's (``read_grads``: and its gradient's),
        all parameters at once: a handful of multi-tensor ops, not a handful per parameter."""
        named = self._trainable()
        measures = self._measures
        with torch.no_grad():
            if read_grads:
                # Read after the step: a step given a closure (as Lightning gives one) runs the
                # forward and backward passes inside it. Optimizers leave .grad as it was.
                with_grads = [(name, param.grad) for name, param in named if param.grad is not None]
                known = self._norms_checked([g for _, g in with_grads])
                measures.norms("grad_norm", "grad", [name for name, _ in with_grads], [_whole(g.detach()) for _, g in with_grads], known)
            moved = [(name, _whole(param.detach()), self._before[name]) for name, param in named if name in self._before]
            if not moved:
                return
            names = [name for name, _, _ in moved]
            copies = [copy for _, _, copy in moved]
            norms = measures.norms("param_norm", "param", names, copies)
            # The copies become the update's negative in place (multi-tensor, as torch.optim's own
            # steps): 4 MB less to take and give back for a 4-layer GPT-2.
            changes = copies
            torch._foreach_sub_(changes, [now for _, now, _ in moved])
            measures.vector("update_ratio", names, torch.stack(torch._foreach_norm(changes)).float() / norms)
            measures.histograms("update", names, changes)

    def _norms_checked(self, grads: list[torch.Tensor]) -> Optional[torch.Tensor]:
        """The norms of ``grads`` the check for NaN/Inf before the optimizer's step took, when
        it read these very gradients, unchanged since (a step given a closure makes new ones)."""
        checked, self._grads_checked = self._grads_checked, None
        if checked is None:
            return None
        tensors, versions, norms = checked
        if len(tensors) != len(grads) or any(g is not t or t._version != v for g, t, v in zip(grads, tensors, versions)):
            return None
        return norms

    # --- the end of a logged step: one transfer ---

    def _finish(self) -> None:
        measures = self._measures
        self._measures = measures.anew()
        self._before = {}
        if measures.empty:
            return
        flat, layout = measures.flat()
        numbers = self._across_ranks(flat, layout).tolist()  # the one move to the host of this step
        values, counts = layout.read(numbers)
        # ‖Δw‖/‖w‖ of a parameter that was zero (a bias initialised to zero) is no number:
        # left out, not an infinity for the page to paint as NaN/Inf.
        ratios, norms = values.get("update_ratio"), values.get("param_norm", {})
        if ratios:
            for name in [name for name in ratios if norms.get(name) == 0.0]:
                del ratios[name]
        logged = LoggedStep(self.step_count, values, counts, self._every_rank(values, counts))
        self._note_nonfinite(logged)
        self._walk_if_changed()  # notes modules put in since the step began
        self._note_unseen(values)
        if self._logged % self._stride == 0:
            self._log.append(logged)
            if len(self._log) > self.keep:
                self._log = self._log[::2]
                self._stride *= 2
        self._logged += 1
        for listener in self._listeners:
            listener(self, logged)

    def _across_ranks(self, flat: torch.Tensor, layout: Layout) -> torch.Tensor:
        """Under torch.distributed with ``ranks='reduce'``: means over ranks (largest values'
        largest, histograms' sums), when every rank measured the same things."""
        distributed = torch.distributed
        if self.ranks != "reduce" or not distributed.is_available() or not distributed.is_initialized():
            return flat
        world = distributed.get_world_size()
        if world == 1:
            return flat
        keys, histogram_keys = layout.scalar_keys(), layout.histograms
        # Every rank must hold the same layout; a different one (a module skipped on one rank) keeps each rank's own.
        shape = torch.tensor([float(len(flat)), float(_layout_hash(keys, histogram_keys))], dtype=torch.float64)
        low, high = shape.clone(), shape.clone()
        backend_device = flat.device if distributed.get_backend() != "gloo" else torch.device("cpu")
        low, high = low.to(backend_device), high.to(backend_device)
        distributed.all_reduce(low, op=distributed.ReduceOp.MIN)
        distributed.all_reduce(high, op=distributed.ReduceOp.MAX)
        if not torch.equal(low, high):
            warnings.warn(
                "graphviz-autograd: watch() found ranks that measured different modules at one step; "
                "each rank keeps its own statistics for it.",
                stacklevel=3,
            )
            return flat
        largest = torch.tensor([stat in _LARGEST for stat, _ in keys] + [False] * (len(flat) - len(keys)))
        # Scalars and the histograms of parameters (the same on every rank, or gathered whole) are
        # averaged; histograms of activations and their gradients count every rank's batch: summed.
        summed_counts = [False] * len(keys)
        for kind, _ in histogram_keys:
            summed_counts.extend([kind in _BATCH_HISTOGRAMS] * HISTOGRAM_BINS)
        data = flat.to(backend_device)
        largest = largest.to(backend_device)
        summed = torch.where(largest, torch.zeros_like(data), data)
        biggest = torch.where(largest, data, torch.full_like(data, -math.inf))
        distributed.all_reduce(summed)
        distributed.all_reduce(biggest, op=distributed.ReduceOp.MAX)
        averaged = torch.where(torch.tensor(summed_counts, device=backend_device), summed, summed / world)
        return torch.where(largest, biggest, averaged).to(flat.device)

    def _every_rank(self, values: dict[str, dict[str, float]], counts: dict[str, dict[str, tuple[int, ...]]]) -> tuple:
        """With ``ranks='each'`` under torch.distributed, every rank's numbers of this step (each
        rank calls this at the same logged steps); else none."""
        if self.ranks != "each" or _world_size() == 1:
            return ()
        gathered: list[Any] = [None] * _world_size()
        torch.distributed.all_gather_object(gathered, (values, counts))
        return tuple(gathered)

    def _note_nonfinite(self, logged: LoggedStep) -> None:
        """Keep, for each statistic, the first logged step (kept or not) that held NaN/Inf and where."""
        for stat in _NONFINITE_PLACES:
            if stat in self._nonfinite:
                continue
            keys = [key for key, value in logged.values.get(stat, {}).items() if not math.isfinite(value)]
            if keys:
                self._nonfinite[stat] = (logged.step, keys)

    def _note_unseen(self, values: Mapping[str, Mapping[str, float]]) -> None:
        seen = values.get("activation_mean", {})
        inner = len(self._module_types) > 1 and not any(key for key in seen)
        if inner and values.get("grad_norm") and not self._warned_compiled and not self._unwatched:
            self._warned_compiled = True
            warnings.warn(
                "graphviz-autograd: watch() does not see inside torch.compile'd code: no statistics of the "
                "modules it runs, only of the parameters (and of the compiled model's output); watch the model "
                "uncompiled to see them.",
                stacklevel=4,
            )

    def _note_unwatched(self) -> None:
        """Note modules put into the model after watch() started (or in place of one): its
        hooks are on the modules there were, so their calls get no statistics. They are
        named in one finding rather than measured from the middle of the run."""
        for name, module in self.model.named_modules():
            if self._hooked.get(name) != id(module) and name not in self._unwatched:
                self._unwatched[name] = (self.step_count, type(module).__name__)

    # --- the record ---

    @property
    def steps(self) -> list[int]:
        """The logged steps kept, in order."""
        return [logged.step for logged in self._log]

    @property
    def logged_steps(self) -> list[LoggedStep]:
        """Every logged step kept (see :class:`LoggedStep`)."""
        return list(self._log)

    @property
    def module_calls(self) -> list[str]:
        """The module calls seen, in the order they first started ('' is the model itself)."""
        return sorted(self._call_order, key=self._call_order.__getitem__)

    def series(self, statistic: str) -> dict[str, list[Optional[float]]]:
        """``statistic`` per module call or parameter: its value at each kept step (None where not measured)."""
        _check_statistic(statistic)
        keys: dict[str, None] = {}
        for logged in self._log:
            keys.update(dict.fromkeys(logged.values.get(statistic, {})))
        return {key: [logged.values.get(statistic, {}).get(key) for logged in self._log] for key in keys}

    def latest(self, statistic: str, step: Optional[int] = None) -> dict[str, float]:
        """``statistic`` per module call or parameter at logged ``step`` (the last one kept by default)."""
        _check_statistic(statistic)
        return dict(self._logged_step(step).values.get(statistic, {}))

    def _logged_step(self, step: Optional[int]) -> LoggedStep:
        if not self._log:
            raise OptionError("This watcher has logged no step yet: train inside 'with watch(...)' first.")
        if step is None:
            return self._log[-1]
        for logged in self._log:
            if logged.step == step:
                return logged
        raise OptionError(f"step {step!r} was not logged or not kept; the kept steps are {_steps_text(self.steps)}.")

    def graph(self) -> AutogradGraph:
        """The graph of the first logged step's forward pass, walked with ``record`` (module
        calls named as the statistics are): what :meth:`overlay` colours by default. Another
        graph of one step works as well: ``walk(loss, model, recorder=rec)`` from ``record(model)``."""
        if self._graph is None:
            raise OptionError(
                "This watcher has no graph: no logged step ran a forward pass with gradients while watched "
                "with graph=True. Record one yourself: with record(model) as rec: loss = ...; "
                "graph = walk(loss, model, recorder=rec); then w.overlay(statistic, graph=graph)."
            )
        return self._graph

    def overlay(self, statistic: str, step: Optional[int] = None, graph: Optional[AutogradGraph] = None) -> Overlay:
        """``statistic`` at logged ``step`` (the last by default) as an overlay of ``graph``
        (:meth:`graph` by default): ``make_dot(w.graph(), overlays=[w.overlay("grad_norm")])``.
        A module call's statistic colours the ops that make its output (and so its box);
        a parameter's, the parameter and its AccumulateGrad. Signed means are drawn as
        their magnitude; values roll up onto modules by their largest."""
        _check_statistic(statistic)
        logged = self._logged_step(step)
        graph = graph if graph is not None else self.graph()
        values: dict[str, float] = {}
        tooltips: dict[str, str] = {}
        measured = logged.values.get(statistic, {})
        title = statistic.replace("_", " ")
        if statistic in MODULE_STATISTICS:
            outputs = module_output_nodes(graph)
            for path, value in measured.items():
                for node_id in outputs.get(path, ()):
                    # One op can make the output of nested calls (a Sequential's last layer's is its own).
                    values[node_id] = max(values.get(node_id, abs(value)), abs(value))
                    line = f"{path or 'model'}: {title} {value:.3g} at step {logged.step}"
                    tooltips[node_id] = f"{tooltips[node_id]}\n{line}" if node_id in tooltips else line
        else:
            targets = parameter_nodes(graph)
            for name, value in measured.items():
                for node_id in targets.get(name, ()):
                    values[node_id] = value
                    tooltips[node_id] = f"{name}: {title} {value:.3g} at step {logged.step}"
        if statistic == "activation_mean":
            title = "|activation mean|"
        return Overlay(
            statistic, f"{title} (step {logged.step})", values, rollup="max", scale="log", tooltips=tooltips,
            nonfinite=f"{title} NaN/Inf", domain=tuple(abs(v) for v in measured.values()),
        )

    def overlays_over_steps(self, graph: Optional[AutogradGraph] = None) -> list[Overlay]:
        """Every statistic measured as an overlay of ``graph`` (:meth:`graph` by default) over
        all kept steps: each node's ``series``, one value per step, as :meth:`overlay` places
        them (a module call's on the ops that make its output, a parameter's on it and its
        AccumulateGrad); ``values`` are those of the last step."""
        graph = graph if graph is not None else self.graph()
        steps = tuple(self.steps)
        if not steps:
            return []
        outputs, targets = module_output_nodes(graph), parameter_nodes(graph)
        found = []
        for statistic in STATISTICS:
            series_of = self.series(statistic)
            if not series_of:
                continue
            placed = outputs if statistic in MODULE_STATISTICS else targets
            per_node: dict[str, list[Optional[float]]] = {}
            for key, values in series_of.items():
                magnitudes = [None if v is None else abs(v) for v in values]
                for node_id in placed.get(key, ()):
                    now = per_node.get(node_id)
                    per_node[node_id] = magnitudes if now is None else [
                        b if a is None else a if b is None else max(a, b) for a, b in zip(now, magnitudes)
                    ]
            last = self.overlay(statistic, steps[-1], graph)
            found.append(replace(
                last, title=last.title.rpartition(" (step")[0], steps=steps,
                series={node_id: tuple(values) for node_id, values in per_node.items()},
            ))
        return found

    def timeline(self) -> dict[str, Any]:
        """What the explorer page shows of each module call and parameter over the steps:
        :meth:`to_dict`'s steps, statistics and histograms, and the histogram bins."""
        data = self.to_dict()
        timeline = {key: data[key] for key in ("steps", "statistics", "histograms", "histogram_edges", "histogram_of")}
        if self._log and self._log[0].by_rank:
            # ranks='each': every rank's series too, for the page's choice of rank.
            timeline["ranks"] = [self._series_of_rank(rank) for rank in range(len(self._log[0].by_rank))]
        return timeline

    def _series_of_rank(self, rank: int) -> dict[str, Any]:
        """One rank's statistics and histograms over the kept steps, as :meth:`to_dict` writes them."""
        steps = [logged.by_rank[rank] if rank < len(logged.by_rank) else ({}, {}) for logged in self._log]
        statistics_data = {}
        for stat in STATISTICS:
            keys = {key: None for values, _ in steps for key in values.get(stat, {})}
            if keys:
                statistics_data[stat] = _jsonable({key: [values.get(stat, {}).get(key) for values, _ in steps] for key in keys})
        histogram_data = {}
        for kind in HISTOGRAMS:
            keys = {key: None for _, counts in steps for key in counts.get(kind, {})}
            if keys:
                histogram_data[kind] = {
                    key: [list(c) if (c := counts.get(kind, {}).get(key)) is not None else None for _, counts in steps]
                    for key in keys
                }
        return {"statistics": statistics_data, "histograms": histogram_data}

    def page(self, graph: Optional[AutogradGraph] = None, title: Optional[str] = None) -> Any:
        """The explorer page of :meth:`graph` with a step axis: a slider chooses the logged step
        whose statistics colour the nodes and modules, and the details of a module or a
        parameter show each statistic over the steps and its histograms over time."""
        from ..explorer.pages import explore

        graph = graph if graph is not None else self.graph()
        if title is None:
            title = type(self.model).__name__
        return explore(graph, overlays=self.overlays_over_steps(graph), timeline=self.timeline(), title=title)

    def save(self, path: Union[str, "os.PathLike[str]"], graph: Optional[AutogradGraph] = None) -> Optional[Path]:
        """Write :meth:`page` to ``path`` atomically (one offline file; reloading it shows the
        latest). Under torch.distributed only rank 0 writes; other ranks return None. A path
        that cannot be written is an :class:`~graphviz_autograd.errors.OutputPathError`,
        raised before the page is laid out."""
        if _rank() != 0:
            return None
        check_writable(path)
        return self.page(graph).save(path)

    def to_dict(self) -> dict[str, Any]:
        """The record as plain data for JSON: steps, each statistic and histogram as series per
        module call or parameter (NaN and infinities as the strings ``"nan"``, ``"inf"``,
        ``"-inf"``; None where not measured), the histogram edges, and what NaN/Inf was first seen."""
        steps = self.steps
        statistics_data = {stat: _jsonable(self.series(stat)) for stat in STATISTICS if any(stat in s.values for s in self._log)}
        histogram_data: dict[str, dict[str, list[Optional[list[int]]]]] = {}
        for kind in HISTOGRAMS:
            keys: dict[str, None] = {}
            for logged in self._log:
                keys.update(dict.fromkeys(logged.histograms.get(kind, {})))
            if keys:
                histogram_data[kind] = {
                    key: [list(c) if (c := logged.histograms.get(kind, {}).get(key)) is not None else None for logged in self._log]
                    for key in keys
                }
        modules = [{"path": path, "type": self._module_types.get(module_of_call(path), "")} for path in self.module_calls]
        return {
            "every": self.every,
            "kept_every": self.every * self._stride,
            "steps": steps,
            "modules": modules,
            "parameters": [name for name, p in self.model.named_parameters() if p.requires_grad],
            "statistics": statistics_data,
            "histogram_edges": list(HISTOGRAM_EDGES),
            "histogram_of": "log10 of the magnitude",
            "histograms": histogram_data,
            "nonfinite": {stat: {"step": step, "where": keys} for stat, (step, keys) in self._nonfinite.items()},
            "nonfinite_origin": None if self._origin is None or self._origin[1] is None else {
                "step": self._origin[0], "findings": [f.to_dict() for f in self._origin[1]]},
            "ranks": self.ranks,
            "world_size": _world_size(),
        }

    def save_json(self, path: Union[str, "os.PathLike[str]"]) -> Optional[Path]:
        """Write :meth:`to_dict` as JSON to ``path``, atomically (a file written beside it, then
        renamed). Under torch.distributed only rank 0 writes (``ranks='reduce'``: the statistics
        over all ranks); with ``ranks='each'`` every rank must call it, and rank 0 writes every
        rank's record in one file, under ``"ranks"``. Returns the path written, or None on other ranks."""
        import json

        data = self.to_dict()
        rank = _rank()
        if self.ranks == "each" and _world_size() > 1:
            gathered: list[Any] = [None] * _world_size()
            torch.distributed.all_gather_object(gathered, data)
            data = {"ranks": gathered, "world_size": _world_size()}
        if rank != 0:
            return None
        check_writable(path)
        # ensure_ascii: a name holding a lone surrogate is written as its \u escape, not failed on.
        text = json.dumps(data, indent=1, sort_keys=True, allow_nan=False)
        return write_atomic(path, text.encode("utf-8"))

    # --- findings over time ---

    def findings(self, graph: Optional[AutogradGraph] = None, decades: float = DEFAULT_DECADES) -> list[Finding]:
        """What the record says about training, by the rules :func:`~graphviz_autograd.checks.diagnosis.check`
        judges one step by (``checks/rules.py``), judged at every kept logged step: zero or
        missing gradients, frozen parameters the optimizer holds, dead units, saturated
        tanh/sigmoid outputs, gradients that vanish through a run of layers (more than
        ``decades`` powers of ten) or stand far from their peers, update ratios outside
        ``UPDATE_RATIO_RANGE``; over the steps, gradients that grew by more than ``decades``;
        and NaN/Inf first seen, after which no other rule reads a step. A condition that holds
        over a run of steps up to the last is one finding, its ``step`` the run's first; one
        cause is one finding. With ``graph`` (or :meth:`graph`, when there is one), ``nodes``
        holds the ids each finding points at.

        >>> import torch
        >>> model = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Linear(4, 1))
        >>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
        >>> with watch(model, optimizer=opt, every=1) as w:
        ...     for _ in range(3):
        ...         (model(torch.randn(8, 2)) * 0).sum().backward()
        ...         opt.step(); opt.zero_grad()
        >>> [(f.code, f.subject, f.step) for f in w.findings()]
        [('grad_zero', '0.weight', 0)]
        """
        if graph is None:
            graph = self._graph
        outputs = module_output_nodes(graph) if graph is not None else {}
        params = parameter_nodes(graph) if graph is not None else {}

        def nodes(condition: Condition) -> tuple[str, ...]:
            found: list[str] = []
            for key in condition.points_at:
                for node_id in outputs.get(key, ()) + params.get(key, ()):
                    if node_id not in found:
                        found.append(node_id)
            return tuple(found)

        judged = self._judged_steps()
        held = _one_per_cause(_innermost(over_steps([(evidence.step, judge(evidence, decades)) for evidence in judged])))
        series = {
            name: [(evidence.step, evidence.grad_norms[name]) for evidence in judged
                   if 0 < evidence.grad_norms.get(name, 0.0) < math.inf]
            for name in self.series("grad_norm")
        }
        trends = gradient_trend(series, decades)
        found = []
        nonfinite = self._nonfinite_finding(nodes)
        if nonfinite is not None:
            # What led up to it (updates too large for their weights, gradients that grew) is its
            # cause, said in it: one cause, one finding.
            too_fast = [h for h in held if h.condition.code == UPDATE_RATIO and h.condition.value > UPDATE_RATIO_RANGE[1]]
            above = [h for h in held if h.condition.code == GRAD_NORM_OUTLIER]
            held = [h for h in held if h not in too_fast and h not in above]
            lead = []
            if too_fast:
                largest = max(too_fast, key=lambda h: h.condition.value)
                lead.append(f"{len(too_fast)} weight{'s' if len(too_fast) > 1 else ''} changed by up to "
                            f"{largest.condition.value:.2g} of {'their' if len(too_fast) > 1 else 'its'} norm per step "
                            f"({largest.condition.subject})")
            if above:
                lead.append(f"the gradient norm of {_listed_names([h.condition.subject for h in above])} "
                            f"{'was' if len(above) == 1 else 'were'} far from the others'")
            if trends:
                largest_trend = max(trends, key=lambda c: c.value)
                lead.append(f"gradient norms grew by up to {largest_trend.value:.1f} powers of ten ({largest_trend.subject})")
                trends = []
            if lead:
                last = judged[-1].step if judged else nonfinite.message
                nonfinite = nonfinite._replace(message=f"{nonfinite.message[:-1]}. Before it (to step {last}): {'; '.join(lead)}.")
            found.append(self._with_origin(nonfinite, graph))
        for item in held:
            condition = item.condition
            found.append(Finding(
                condition.severity, condition.code, f"{condition.text}, {_when(item)}; {condition.advice}.",
                nodes(condition), condition.subject, item.since,
            ))
        for condition in trends:
            found.append(Finding(
                condition.severity, condition.code, f"{condition.text}; {condition.advice}.", nodes(condition),
                condition.subject, series[condition.subject][0][0],
            ))
        found += self._unwatched_findings()
        return sorted(found, key=lambda f: SEVERITIES.index(f.severity))

    def _unwatched_findings(self) -> list[Finding]:
        if not self._unwatched:
            return []
        names = sorted(self._unwatched, key=lambda name: self._unwatched[name][0])
        listed = ", ".join(f"{name or 'model'} ({self._unwatched[name][1]}, seen from step {self._unwatched[name][0]})" for name in names[:5])
        more = f" and {len(names) - 5} more" if len(names) > 5 else ""
        return [Finding(
            INFO, UNWATCHED_MODULE,
            f"{len(names)} module{'s were' if len(names) != 1 else ' was'} put into the model after watch() started, "
            f"so {'their' if len(names) != 1 else 'its'} calls have no statistics: {listed}{more}. "
            "Build the whole model, or replace its modules, before entering watch().",
            (), names[0],
        )]

    def _nonfinite_finding(self, nodes: Callable[[Condition], tuple[str, ...]]) -> Optional[Finding]:
        """NaN/Inf, by the rule of non-finite values (checks/rules.py: ``nonfinite_values``), as one
        finding: the first logged step (kept or not) that held any, and where it was first seen
        then, in the order a step makes them (an output, an output's gradient in backward order,
        a parameter, a gradient); the places it reached later are listed in it."""
        if not self._nonfinite:
            return None
        first_step = min(step for step, _ in self._nonfinite.values())
        conditions: list[Condition] = []
        later: list[str] = []
        for stat in _NONFINITE_PLACES:
            if stat not in self._nonfinite:
                continue
            step, keys = self._nonfinite[stat]
            ordered = list(keys)
            if stat in MODULE_STATISTICS:  # the first output made holding NaN/Inf: where it started
                ordered.sort(key=lambda k: self._output_order.get(k, 0))
            if stat == "output_grad_norm":  # the backward pass meets the last module first
                ordered.reverse()
            place = _NONFINITE_PLACES[stat]
            found = nonfinite_values(StepEvidence(step=step, nonfinite={place: ordered}))
            if not found:
                continue
            if step == first_step:
                conditions.append(found[0]._replace(text=found[0].text + (
                    f" (and {len(ordered) - 1} more)" if place == "gradient" and len(ordered) > 1 else "")))
            else:
                later.append(f"{_PLACE_NAMES[place]} from step {step}")
        first = conditions[0]
        also = [c.text for c in conditions[1:]]
        if also:
            later.insert(0, "then " + "; ".join(also))
        more = f" ({'; '.join(later)})" if later else ""
        return Finding(
            ERROR, NONFINITE_SEEN,
            f"{first.subject or 'model'}: first seen at step {first_step}: {first.text}{more}; {first.advice}.",
            tuple(n for c in conditions for n in nodes(c)), first.subject, first_step,
        )

    def _judged_steps(self) -> list[StepEvidence]:
        """The kept logged steps as the rules read them, up to the first that held NaN/Inf:
        from there on every number is suspect, and none is read as zero, dead or saturated."""
        first_nonfinite = min((step for step, _ in self._nonfinite.values()), default=None)
        order = {path: place for place, path in enumerate(self.module_calls)}
        defined = list(self._module_types)
        layers = sorted(self._layers, key=lambda path: (order.get(path, len(order)), defined.index(path)))
        trainable = [(name, p) for name, p in self.model.named_parameters() if p.requires_grad]
        roles = peer_roles([name for name, _ in trainable], self._module_types)
        weights = {name for name, p in trainable if p.dim() >= 2}
        rounding = {name: rounding_decades(p.dtype) for name, p in trainable}
        sizes = {name: p.numel() for name, p in trainable}
        owners = {
            name: f"{path} ({self._module_types.get(path, '')})" if path else "the model"
            for name, _ in trainable for path in (name.rpartition(".")[0],)
        }
        names = {id(p): name for name, p in self.model.named_parameters()}
        held = [p for group in (self.optimizer.param_groups if self.optimizer is not None else ()) for p in group["params"]]
        held_frozen = [names[id(p)] for p in held if id(p) in names and not p.requires_grad]
        judged = []
        for logged in self._log:
            if first_nonfinite is not None and logged.step >= first_nonfinite:
                break
            values = logged.values
            grads = {name: (v if math.isfinite(v) else math.nan) for name, v in values.get("grad_norm", {}).items()}
            calls: dict[str, dict[str, float]] = {}
            for stat in MODULE_STATISTICS:
                for call, value in values.get(stat, {}).items():
                    calls.setdefault(call, {})[stat] = value
            judged.append(StepEvidence(
                step=logged.step,
                grad_norms=grads,
                layers=[(path, [n for n in grads if n.rpartition(".")[0] == path]) for path in layers],
                peers=roles,
                owners=owners,
                rounding=rounding,
                outputs=calls,
                update_ratios={n: v for n, v in values.get("update_ratio", {}).items() if n in weights},
                param_norms=values.get("param_norm", {}),
                trainable=[name for name, _ in trainable] if grads else (),
                ran=frozenset(module_of_call(call) for call in calls),
                held_frozen=held_frozen,
                sizes=sizes,
            ))
        return judged


def _when(held: Held) -> str:
    """When a condition held over the steps judged, in words."""
    if held.condition.code in MOST_STEPS:
        return f"at {held.times} of the logged steps {held.first} to {held.last}, the first at step {held.since}"
    if held.before is None:
        return f"at every logged step from the first ({held.first} to {held.last})" if held.first != held.last else f"at step {held.first}"
    return f"since step {held.since} (not at step {held.before}; until step {held.last})"


def _listed_names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _one_per_cause(held: list[Held]) -> list[Held]:
    """Zero gradients that began at one step, as one finding: the dead units that began
    then, when some did (the gradients they stop are theirs), else the first parameter's,
    naming the others."""
    zero = [h for h in held if h.condition.code == GRAD_ZERO and h.condition.severity == WARNING]
    if not zero:
        return held
    starts: dict[int, list[Held]] = {}
    for h in zero:
        starts.setdefault(h.since, []).append(h)
    kept = [h for h in held if h not in zero]
    for since, group in starts.items():
        names = [n for h in group for n in h.condition.points_at]
        listed = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        cause = next((h for h in kept if h.condition.code == DEAD_UNITS and h.since == since), None)
        if cause is not None:
            place = kept.index(cause)
            c = cause.condition
            kept[place] = cause._replace(condition=c._replace(
                text=f"{c.text} (the gradient{'s' if len(names) > 1 else ''} of {listed} "
                     f"{'are' if len(names) > 1 else 'is'} exactly zero as well)",
                points_at=c.points_at + tuple(names)))
            continue
        first = group[0]
        if len(group) == 1:
            kept.append(first)
            continue
        c = first.condition
        kept.append(first._replace(condition=c._replace(
            text=f"{len(names)} parameters take part in the forward but their gradient is exactly zero ({listed})",
            points_at=tuple(names))))
    return kept


def _innermost(held: list[Held]) -> list[Held]:
    """Leave out a module call whose output is one of its children's (a Sequential ending in
    the ReLU that died): the same condition, since the same step, on a call inside it says it."""
    by_output = [h for h in held if h.condition.code in (DEAD_UNITS, SATURATED)]
    return [
        h for h in held
        if h not in by_output or not any(
            o is not h and o.condition.code == h.condition.code and o.since == h.since
            and (o.condition.subject.startswith(h.condition.subject + ".") or (not h.condition.subject and o.condition.subject))
            for o in by_output
        )
    ]


# ``with watch(model, ...) as w:``: the call that makes a Watcher reads as what it does.
watch = Watcher


class _PageWriter:
    """Writes the page of a run every ``page_every`` logged steps (``watch(page=...)``).

    The page is a view of training, not part of it: a page that cannot be written (its
    folder gone, a full disk, Graphviz missing) is said once in a warning, and training
    goes on; each later logged step tries again.
    """

    def __init__(self, page: Union[str, "os.PathLike[str]"], page_every: int):
        self.page = page
        self.page_every = page_every
        self.warned = False

    def __call__(self, watcher: Watcher, logged: LoggedStep) -> None:
        if len(watcher.steps) % self.page_every:
            return
        try:
            watcher.save(self.page)
        except Exception as error:  # whatever it is, the page must not end the training it shows
            if not self.warned:
                self.warned = True
                said = str(error) if isinstance(error, GraphvizAutogradError) else f"{type(error).__name__}: {error}."
                warnings.warn(
                    f"watch(page=...) could not write the page at step {logged.step}: {said} "
                    "Training goes on; the page is tried again at each logged step, and this is said once.",
                    RuntimeWarning,
                    stacklevel=2,
                )


def module_output_nodes(graph: AutogradGraph) -> dict[str, tuple[str, ...]]:
    """The op nodes that make each module call's output: those inside the call whose result
    leaves it (read by an op outside it, or an output of the walk). '' is the model itself.

    >>> import torch
    >>> from graphviz_autograd import record, walk
    >>> model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    >>> with record(model) as rec:
    ...     out = model(torch.ones(1, 2))
    >>> graph = walk(out, model, recorder=rec)
    >>> {path: [graph.node(i).label for i in ids] for path, ids in module_output_nodes(graph).items()}
    {'0': ['AddmmBackward0'], '1': ['ReluBackward0'], '': ['ReluBackward0']}
    """
    nodes = {node.id: node for node in graph.nodes}
    found: dict[str, list[str]] = {}
    for edge in graph.edges:
        if edge.kind != DATA:
            continue
        source, target = nodes.get(edge.source), nodes.get(edge.target)
        if source is None or target is None or source.kind != OP:
            continue
        inside_target = set(calls_around(target.module)) if target.kind != OUTPUT else set()
        for path in calls_around(source.module):
            if path not in inside_target:
                ids = found.setdefault(path, [])
                if source.id not in ids:
                    ids.append(source.id)
        if target.kind == OUTPUT:
            ids = found.setdefault("", [])
            if source.id not in ids:
                ids.append(source.id)
    return {path: tuple(ids) for path, ids in found.items()}


def _whole(tensor: torch.Tensor) -> torch.Tensor:
    """A parameter or gradient whole: a DTensor (sharded by FSDP2's ``fully_shard``) is gathered
    from every rank (each rank runs this in the same order, at the same logged steps)."""
    full_tensor = getattr(tensor, "full_tensor", None)
    return full_tensor() if callable(full_tensor) else tensor


def _check_statistic(statistic: str) -> None:
    if statistic not in STATISTICS:
        raise OptionError(f"unknown statistic {statistic!r}; choose one of {', '.join(STATISTICS)}.")


def _steps_text(steps: Sequence[int]) -> str:
    if len(steps) <= 6:
        return ", ".join(map(str, steps)) or "none"
    return f"{steps[0]}, {steps[1]}, ..., {steps[-1]}"


def _jsonable(series: Mapping[str, list[Optional[float]]]) -> dict[str, list[Any]]:
    def number(value: Optional[float]) -> Any:
        if value is None or math.isfinite(value):
            return value
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")

    return {key: [number(v) for v in values] for key, values in series.items()}


def _layout_hash(keys: list[tuple[str, str]], histogram_keys: list[tuple[str, str]]) -> int:
    """A number that two ranks share when they measured the same things in the same order
    (Python's hash of strings differs between processes: this one does not)."""
    import zlib

    return zlib.crc32(repr((keys, histogram_keys)).encode("utf-8"))


def process_rank() -> int:
    """This process's rank under torch.distributed (0 when not distributed)."""
    return _rank()


def _rank() -> int:
    distributed = torch.distributed
    return distributed.get_rank() if distributed.is_available() and distributed.is_initialized() else 0


def _world_size() -> int:
    distributed = torch.distributed
    return distributed.get_world_size() if distributed.is_available() and distributed.is_initialized() else 1


__all__ = [
    "HISTOGRAMS",
    "HISTOGRAM_EDGES",
    "LoggedStep",
    "MODULE_STATISTICS",
    "PARAMETER_STATISTICS",
    "STATISTICS",
    "Watcher",
    "module_output_nodes",
    "parameter_nodes",
    "process_rank",
    "watch",
]
