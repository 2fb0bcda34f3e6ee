"""Where a NaN or an infinity is born in a training step, forward or backward.

``find_nonfinite(model, inputs, loss=loss)`` runs one step (forward, backward and, with
``optimizer``, its step) with every call of the forward pass and every node of the
backward pass watched (:mod:`graphviz_autograd.capture.nonfinite_values`), puts
everything back as it was, and returns findings that name:

- the **producer** in the forward pass: the first call whose inputs are all finite and
  whose output is not, with its module, the user's source line and what made it
  (``log of a value <= 0: min -0.31``); or the tensor that entered already non-finite
  (an input batch, a parameter);
- the producer in the backward pass, when the forward pass was finite: the first node
  whose incoming gradient is finite and whose outgoing gradient is not (``sqrt`` at 0, a
  division by a zero variance);
- with an optimizer: hyperparameters that are not finite (a NaN learning rate) and
  parameters its step would make non-finite from finite gradients.

The ops that only carried the values on are counted, not blamed. The result is a
:class:`NonfiniteFindings`, a :class:`~graphviz_autograd.checks.diagnosis.Findings` whose
``graph`` is the step's recorded graph and whose :meth:`NonfiniteFindings.overlay` draws
the producer red and the carriers orange: ``make_dot(found.graph, overlays=[found.overlay()])``.

>>> import torch
>>> class Net(torch.nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.fc = torch.nn.Linear(3, 3)
...     def forward(self, x):
...         return torch.log(self.fc(x) - 100).sum()
>>> found = find_nonfinite(Net(), torch.ones(2, 3))
>>> [(f.code, f.subject) for f in found]
[('nonfinite_forward', 'torch.log')]
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Iterable, Optional

import torch

from ..capture.naming import named_tensors
from ..capture.nonfinite_values import BackwardValues, Producer, all_finite, nonfinite_counts
from ..capture.recording import record
from ..capture.walking import walk
from ..errors import InputTypeError
from ..graph.autograd_graph import AutogradGraph
from ..graph.style import ERROR, WARNING
from ..views.overlays import Overlay, severity_value
from .diagnosis import NONFINITE_BACKWARD, NONFINITE_FORWARD, NONFINITE_STEP, Finding, Findings
from .profiling import StepRunner, run_backward, step_forward


class NonfiniteFindings(Findings):
    """What :func:`find_nonfinite` returns: its findings (producers first, in the order they
    were born), ``graph`` (the step's recorded graph, walked with sequence numbers),
    ``producers`` (:class:`~graphviz_autograd.capture.nonfinite_values.Producer`, forward then
    backward) and ``carriers``, the ids of the nodes that only passed NaN/Inf on."""

    def __init__(self, findings: Iterable[Finding], graph: Optional[AutogradGraph],
                 producers: Iterable[Producer] = (), carriers: Iterable[str] = ()):
        super().__init__(findings, graph)
        self.producers = list(producers)
        self.carriers = tuple(carriers)

    def overlay(self) -> Overlay:
        """The producer (the nodes the findings point at) red, the carriers orange, each with
        its words in the tooltip; rolled onto a module box by the worst inside it."""
        values: dict[str, float] = {}
        tooltips: dict[str, str] = {}
        for node_id in self.carriers:
            values[node_id] = severity_value(WARNING)
            tooltips[node_id] = "carries NaN/Inf made before it"
        for finding in self:
            for node_id in finding.nodes:
                values[node_id] = severity_value(ERROR)
                tooltips[node_id] = finding.message
        key = ((["NaN/Inf born here"], {"color": "red", "penwidth": "3", "style": "filled", "fillcolor": "white"}),
               (["NaN/Inf carried on"], {"color": "orange", "penwidth": "3", "style": "filled", "fillcolor": "white"}))
        return Overlay("nonfinite", "NaN/Inf: born, carried", values, rollup="max", scale="severity",
                       tooltips=tooltips, key=key if values else ())

    def overlays(self) -> list[Overlay]:
        """What an explorer page colours by (its menu lists measured values): how far each node
        is from where NaN/Inf is born, 2 at the producer and 1 on each carrier; the producer is
        also badged when the findings are given as ``diagnose``."""
        values = {node_id: 1.0 for node_id in self.carriers}
        values.update({node_id: 2.0 for finding in self for node_id in finding.nodes})
        return [Overlay("nonfinite", "NaN/Inf (2 born, 1 carried)", values, rollup="max", scale="log",
                        tooltips=self.overlay().tooltips)] if values else []


def find_nonfinite(
    model: Optional[torch.nn.Module] = None,
    inputs: Any = None,
    *,
    loss: Optional[Callable[[Any], Any]] = None,
    step: Optional[Callable[[], Any]] = None,
    optimizer: Optional[torch.optim.Optimizer] = None,
) -> NonfiniteFindings:
    """Run one training step of ``model`` watching every value, and say where NaN or Inf is born.

    The step is ``loss(model(*inputs))`` (``inputs`` as :func:`~graphviz_autograd.checks.profiling.profile_step`
    takes them; without ``loss`` the backward pass starts from every output with a gradient
    of ones) or ``step()``, then ``backward()`` and, with ``optimizer``, ``optimizer.step()``.
    Everything the step changes is put back as ``profile_step`` puts it back: parameters,
    buffers, gradients, the optimizer's state and the random number generators.

    An empty result means every value of the step was finite. Each call of the forward pass
    is read for NaN and Inf (on CUDA each read waits for the GPU), so this costs several
    plain steps: run it once, on the step that went wrong (``benchmarks/nonfinite.py`` has the numbers).
    """
    if model is not None and not isinstance(model, torch.nn.Module):
        raise InputTypeError(
            f"find_nonfinite() takes an nn.Module as model; got {type(model).__name__}. Pass the model whose step goes wrong."
        )
    runner = StepRunner(model, step_forward("find_nonfinite", model, inputs, loss, step), optimizer, inputs)
    with runner.state_kept():
        runner.clear_grads()
        return _search(runner, model, optimizer)


def _search(runner: StepRunner, model: Optional[torch.nn.Module], optimizer: Optional[torch.optim.Optimizer]) -> NonfiniteFindings:
    recorder = record(model, nonfinite=True)
    with recorder:
        output = runner.run("the watched step", "forward pass", runner.forward)
    forward = recorder.nonfinite
    assert forward is not None
    graph = walk(output, model, recorder=recorder, collect_sequence_numbers=True)
    node_of = {number: node_id for node_id, number in graph.sequence_numbers}
    # The births whose NaN/Inf reaches the step's output: one that does not (an attention mask
    # of -inf that a softmax takes in) is no fault, and neither are the ops that carried it.
    reached = sorted({b for b in (forward.origin_of(t) for _, t in named_tensors(output)) if b is not None})
    roots = [t.grad_fn for _, t in named_tensors(output) if t.grad_fn is not None]
    backward = BackwardValues(roots)
    try:
        runner.run("the watched step", "backward pass", functools.partial(run_backward, output))
    finally:
        backward.remove()
    del output, roots
    names = _parameter_names(model, optimizer)
    bad_grads = [name for name, p in names if p.grad is not None and not all_finite(p.grad)]
    findings: list[Finding] = []
    producers: list[Producer] = []
    carriers = {node_of[n] for n, birth in forward.carriers.items() if birth in reached and n in node_of}
    if reached:
        producers = [forward.births[b] for b in reached]
        first, others = producers[0], producers[1:]
        if first.phase == "source":
            findings.append(_source_finding(first))
        else:
            findings.append(_forward_finding(first, node_of, graph, len(reached), len(carriers), bad_grads))
        findings += [_source_finding(p) if p.phase == "source" else _forward_finding(p, node_of, graph, 0, 0, (), first=False)
                     for p in others[:2]]
    elif backward.producers:
        producers = list(backward.producers)
        carriers |= {node_of[n] for n in backward.carriers if n in node_of}
        findings.append(_backward_finding(backward.producers[0], node_of, graph, backward.produced, bad_grads))
    if optimizer is not None:
        findings += _optimizer_findings(optimizer, names, step_safe=not bad_grads and not findings)
    return NonfiniteFindings(findings, graph, producers, sorted(carriers - _pointed_at(findings), key=_id_order))


def _id_order(node_id: str) -> tuple[int, str]:
    return (int(node_id[1:]), node_id) if node_id[1:].isdigit() else (-1, node_id)


def _pointed_at(findings: Iterable[Finding]) -> set[str]:
    return {node_id for finding in findings for node_id in finding.nodes}


def _parameter_names(model: Optional[torch.nn.Module], optimizer: Optional[torch.optim.Optimizer]) -> list[tuple[str, torch.Tensor]]:
    named: dict[int, tuple[str, torch.Tensor]] = {}
    if model is not None:
        for name, p in model.named_parameters():
            named.setdefault(id(p), (name, p))
    if optimizer is not None:
        for g, group in enumerate(optimizer.param_groups):
            for i, p in enumerate(group["params"]):
                named.setdefault(id(p), (f"param group {g}, parameter {i}", p))
    return list(named.values())


def _where(producer: Producer, module: str, graph: AutogradGraph) -> str:
    if not module:
        return "at the top level"
    types = {info.path: info.type_name for info in graph.modules}
    kind = types.get(module, "")
    return f"in {module} ({kind})" if kind else f"in {module}"


def _grads_text(bad_grads: Iterable[str]) -> str:
    names = list(bad_grads)
    if not names:
        return ""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f"; the gradients of {shown} carry it on"


def _forward_finding(producer: Producer, node_of: dict[int, str], graph: AutogradGraph, produced: int,
                     carried: int, bad_grads: Iterable[str], first: bool = True) -> Finding:
    node_id = node_of.get(producer.sequence_nr)
    at = f" at {producer.where}" if producer.where else ""
    if first:
        others = f"; {produced - 1} other call{'s' if produced != 2 else ''} made NaN/Inf from finite inputs too" if produced > 1 else ""
        carried_text = f"; {carried} op{'s' if carried != 1 else ''} after it only carried them on" if carried else ""
        message = (f"{producer.op} {_where(producer, producer.module, graph)}{at} made {producer.counts_text()} from "
                   f"finite inputs in the forward pass: {producer.why}{carried_text}{_grads_text(bad_grads)}{others}.")
    else:
        message = (f"{producer.op} {_where(producer, producer.module, graph)}{at} also made {producer.counts_text()} "
                   f"from finite inputs: {producer.why}.")
    return Finding(ERROR, NONFINITE_FORWARD, message, (node_id,) if node_id else (), producer.op)


def _source_finding(source: Producer) -> Finding:
    what = source.name or "an input"
    fix = ("an earlier optimizer step (or code outside the forward pass) wrote it: look at the learning rate and "
           "at the gradients of the steps before"
           if "." in source.name else "clean the data (torch.nan_to_num, or drop the batch) before the model sees it")
    where = f" (first used {'in ' + source.module if source.module else 'at the top level'}" + (
        f", at {source.where})" if source.where else ")")
    return Finding(ERROR, NONFINITE_FORWARD, f"{what}{where}: {source.why}; {fix}.", (), what)


def _backward_finding(producer: Producer, node_of: dict[int, str], graph: AutogradGraph, produced: int,
                      bad_grads: Iterable[str]) -> Finding:
    node_id = node_of.get(producer.sequence_nr)
    module = graph.node(node_id).module if node_id else ""
    others = f"; {produced - 1} other node{'s' if produced != 2 else ''} did so too" if produced > 1 else ""
    message = (f"{producer.op} {_where(producer, module, graph)} turned a finite gradient into {producer.counts_text()} "
               f"in the backward pass, with every value of the forward pass finite: {producer.why}"
               f"{_grads_text(bad_grads)}{others}. Keep the value away from that point (add an epsilon, clamp it).")
    return Finding(ERROR, NONFINITE_BACKWARD, message, (node_id,) if node_id else (), producer.op)


def _optimizer_findings(optimizer: torch.optim.Optimizer, names: list[tuple[str, torch.Tensor]], step_safe: bool) -> list[Finding]:
    found = []
    for g, group in enumerate(optimizer.param_groups):
        for key, value in sorted(group.items()):
            numbers = value if isinstance(value, (tuple, list)) else (value,)
            bad = [v for v in numbers if isinstance(v, float) and not math.isfinite(v)]
            if isinstance(value, torch.Tensor) and value.numel() == 1 and not all_finite(value):
                bad = [float(value)]
            if bad:
                count = len(group["params"])
                found.append(Finding(
                    ERROR, NONFINITE_STEP,
                    f"optimizer param group {g} has {key}={value!r}: every step writes NaN/Inf into its {count} "
                    f"parameter{'s' if count != 1 else ''}; set a finite {key}.", (), f"param group {g}: {key}"))
    if found or not step_safe:
        return found
    # Every gradient is finite: would the optimizer's own step make a parameter non-finite?
    optimizer.step()
    for name, p in names:
        if not all_finite(p):
            nan, inf = nonfinite_counts(p)
            found.append(Finding(
                ERROR, NONFINITE_STEP,
                f"{name}: optimizer.step() made {nan} NaN and {inf} Inf from a finite gradient and finite values "
                f"({type(optimizer).__name__}); look at its learning rate, eps and state.", (), name))
    return found


__all__ = ["NonfiniteFindings", "find_nonfinite"]
