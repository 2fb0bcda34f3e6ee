"""watch(): statistics per module call and parameter over steps, one host transfer per
logged step, nothing done on other steps, hooks gone after (also after an error), and
findings over time that name the module and the step."""

from __future__ import annotations

import contextlib
import copy
import json
import math
import re
import warnings
from typing import Any

import pytest
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from graphviz_autograd import Finding, OptionError, InputTypeError, check, make_dot, record, walk, watch
from graphviz_autograd.checks.diagnosis import CODES
from graphviz_autograd.training.watching import HISTOGRAM_BINS, HISTOGRAM_EDGES, module_output_nodes, parameter_nodes


class Net(nn.Module):
    """Two layers and one activation module called twice; ``inplace`` makes the second call write into its input."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 8)
        self.head = nn.Linear(8, 1)
        self.act = nn.ReLU(inplace=inplace)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.act(self.fc2(self.act(self.fc1(x)))))


def train(model: nn.Module, steps: int, watcher_args: dict | None = None, lr: float = 0.05, seed: int = 0):
    """Train on a fixed toy regression; with ``watcher_args``, inside watch(model, optimizer=..., **args)."""
    torch.manual_seed(seed)
    data = [(torch.randn(16, 4), torch.randn(16, 1)) for _ in range(steps)]
    opt = torch.optim.SGD(model.parameters(), lr=lr)

    def loop() -> None:
        for x, y in data:
            (model(x) - y).pow(2).mean().backward()
            opt.step()
            opt.zero_grad()

    if watcher_args is None:
        loop()
        return None
    with watch(model, optimizer=opt, **watcher_args) as w:
        loop()
    return w


def hook_counts(model: nn.Module) -> list[int]:
    return [
        len(m._forward_hooks) + len(m._forward_pre_hooks) + len(m._backward_hooks) for m in model.modules()
    ] + [len(p._post_accumulate_grad_hooks or {}) if hasattr(p, "_post_accumulate_grad_hooks") else 0 for p in model.parameters()]


# --- what is measured -------------------------------------------------------------------


def test_every_nth_step_is_logged_with_statistics_per_module_call_and_parameter():
    torch.manual_seed(0)
    w = train(Net(), 7, {"every": 3})
    assert w.steps == [0, 3, 6] and w.step_count == 7
    assert w.module_calls == ["", "fc1", "act", "fc2", "act#2", "head"]
    for statistic in ("activation_mean", "activation_std", "activation_abs_max", "activation_zero_fraction", "output_grad_norm"):
        series = w.series(statistic)
        assert sorted(series) == sorted(w.module_calls), statistic
        assert all(len(values) == 3 and None not in values for values in series.values())
    for statistic in ("param_norm", "grad_norm", "update_ratio"):
        assert sorted(w.series(statistic)) == sorted(name for name, _ in Net().named_parameters())
    # The ReLU's outputs are its input's positive part: the zero fraction is that of fc1's output below 0.
    zero = w.series("activation_zero_fraction")
    assert 0.2 < zero["act"][0] < 0.8 and zero["fc1"][0] == 0.0


def test_the_values_are_those_of_the_tensors():
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = copy.deepcopy(model)
    with watch(model, optimizer=opt, every=1) as w:
        model(x).sum().backward()
        grads = {name: p.grad.clone() for name, p in model.named_parameters()}
        opt.step()
    hidden = before.fc1(x)
    assert w.latest("activation_mean")["fc1"] == pytest.approx(hidden.mean().item(), rel=1e-5)
    assert w.latest("activation_std")["fc1"] == pytest.approx(hidden.std().item(), rel=1e-5)
    assert w.latest("activation_abs_max")["fc1"] == pytest.approx(hidden.abs().max().item(), rel=1e-5)
    weight = before.fc1.weight
    assert w.latest("param_norm")["fc1.weight"] == pytest.approx(weight.norm().item(), rel=1e-5)
    assert w.latest("grad_norm")["fc1.weight"] == pytest.approx(grads["fc1.weight"].norm().item(), rel=1e-5)
    change = (model.fc1.weight - weight).norm() / weight.norm()
    assert w.latest("update_ratio")["fc1.weight"] == pytest.approx(change.item(), rel=1e-4)
    # The head's output gradient is d(sum)/d(out): ones, of norm sqrt(16).
    assert w.latest("output_grad_norm")["head"] == pytest.approx(4.0)
    counts = w.logged_steps[-1].histograms["activation"]["fc1"]
    assert len(counts) == HISTOGRAM_BINS == len(HISTOGRAM_EDGES) - 1 and sum(counts) == hidden.numel()


def test_one_host_transfer_per_logged_step_and_no_work_on_other_steps(monkeypatch):
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(16, 4)

    class Count(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.calls += 1
            return func(*args, **(kwargs or {}))

    def one_step(counter: Any) -> None:
        with counter:
            model(x).sum().backward()
            opt.step()
            opt.zero_grad()

    plain = Count()
    one_step(plain)
    transfers: list[str] = []
    with watch(model, optimizer=opt, every=2, graph=False) as w:
        logged, skipped = Count(), Count()
        one_step(logged)  # step 0: logged
        one_step(skipped)  # step 1: not logged
        # (counted outside the counting mode, which would see each call twice)
        real_tolist, real_item = torch.Tensor.tolist, torch.Tensor.item
        monkeypatch.setattr(torch.Tensor, "tolist", lambda self: transfers.append("tolist") or real_tolist(self))
        monkeypatch.setattr(torch.Tensor, "item", lambda self: transfers.append("item") or real_item(self))
        one_step(contextlib.nullcontext())  # step 2: logged
        assert transfers == ["tolist"]
        one_step(contextlib.nullcontext())  # step 3: not logged
    assert transfers == ["tolist"] and w.steps == [0, 2]
    # A step that is not logged runs exactly the ops of an unwatched one; a logged one measures.
    assert skipped.calls == plain.calls < logged.calls


def test_watching_changes_neither_training_nor_the_model_and_removes_every_hook():
    torch.manual_seed(0)
    plain, watched = Net(), Net()
    watched.load_state_dict(plain.state_dict())
    hooks = hook_counts(watched)
    train(plain, 6)
    train(watched, 6, {"every": 2})
    for (name, a), b in zip(plain.named_parameters(), watched.parameters()):
        assert torch.equal(a, b), name
    assert hook_counts(watched) == hooks


def test_an_error_inside_the_with_removes_every_hook():
    model = Net()
    hooks = hook_counts(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ZeroDivisionError):
        with watch(model, optimizer=opt, every=1):
            model(torch.randn(2, 4)).sum().backward()
            raise ZeroDivisionError("a training step failed")
    assert hook_counts(model) == hooks
    assert not opt._optimizer_step_pre_hooks and not opt._optimizer_step_post_hooks
    model(torch.randn(2, 4)).sum().backward()  # and the model runs as before


def test_in_place_ops_after_a_module_keep_its_output_gradient():
    torch.manual_seed(0)
    plain, watched = Net(inplace=True), Net(inplace=True)
    watched.load_state_dict(plain.state_dict())
    train(plain, 3)
    w = train(watched, 3, {"every": 1})
    for a, b in zip(plain.parameters(), watched.parameters()):
        assert torch.equal(a, b)
    norms = w.series("output_grad_norm")
    assert all(v is not None and v > 0 for v in norms["fc1"] + norms["fc2"])


def test_without_an_optimizer_step_ends_a_step_and_the_update_is_measured():
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with watch(model, every=1) as w:
        for _ in range(2):
            model(torch.randn(8, 4)).sum().backward()
            opt.step()
            opt.zero_grad()  # before w.step(): the gradient was measured as it was accumulated
            w.step()
    assert w.steps == [0, 1]
    assert all(v > 0 for v in w.latest("update_ratio").values())
    assert all(v > 0 for v in w.latest("grad_norm").values())


def test_the_record_is_downsampled_past_its_limit_at_an_even_spacing():
    torch.manual_seed(0)
    w = train(Net(), 40, {"every": 2, "keep": 4, "histograms": False})
    assert len(w.steps) <= 4 and w.steps[0] == 0
    gaps = {b - a for a, b in zip(w.steps, w.steps[1:])}
    assert len(gaps) == 1 and w.to_dict()["kept_every"] == gaps.pop()
    assert "histograms" in w.to_dict() and w.to_dict()["histograms"] == {}


# --- graphs and overlays ------------------------------------------------------------------


def test_an_overlay_colours_the_graph_of_a_recorded_step():
    torch.manual_seed(0)
    w = train(Net(), 3, {"every": 1})
    graph = w.graph()
    outputs = module_output_nodes(graph)
    assert {"fc1", "act", "fc2", "act#2", "head"} <= set(outputs)
    overlay = w.overlay("output_grad_norm")
    assert set(overlay.values) == {node_id for ids in outputs.values() for node_id in ids}
    assert overlay.values[outputs["head"][0]] == pytest.approx(w.latest("output_grad_norm")["head"])
    norms = w.overlay("grad_norm", step=1)
    weight = next(n.id for n in graph.nodes if n.kind == "parameter" and n.label == "fc1.weight")
    assert norms.values[weight] == pytest.approx(w.latest("grad_norm", step=1)["fc1.weight"])
    source = make_dot(graph, overlays=[overlay, norms]).source
    assert "fillcolor" in source and "step 2" in source
    # A graph recorded by hand names the calls the same way.
    model = Net()
    with record(model) as rec:
        out = model(torch.randn(2, 4))
    assert set(module_output_nodes(walk(out, model, recorder=rec))) == set(outputs)


def test_a_watcher_explains_what_it_lacks():
    model = Net()
    with pytest.raises(OptionError, match="logged no step"):
        watch(model).overlay("grad_norm")
    with pytest.raises(OptionError, match="unknown statistic"):
        watch(model).series("gradnorm")
    with pytest.raises(OptionError, match="every"):
        watch(model, every=0)
    with pytest.raises(InputTypeError, match="nn.Module"):
        watch(lambda x: x)  # type: ignore[arg-type]
    w = train(Net(), 2, {"every": 1, "graph": False})
    with pytest.raises(OptionError, match="record"):
        w.graph()
    with pytest.raises(OptionError, match="kept steps are 0, 1"):
        w.latest("grad_norm", step=5)


def test_save_json_writes_the_record_atomically_and_as_strict_json(tmp_path):
    torch.manual_seed(0)
    w = train(Net(), 3, {"every": 1})
    path = w.save_json(tmp_path / "watch.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["watch.json"]
    data = json.loads(path.read_text(encoding="utf-8"), parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))
    assert data["steps"] == [0, 1, 2] and data["every"] == 1
    assert data["statistics"]["update_ratio"]["fc1.weight"][0] > 0
    assert len(data["histograms"]["activation"]["fc1"][0]) == HISTOGRAM_BINS
    assert [m["path"] for m in data["modules"]] == w.module_calls
    assert data == json.loads(json.dumps(w.to_dict()))


# --- findings over time ------------------------------------------------------------------


def codes(findings: list[Finding]) -> set[tuple[str, str]]:
    return {(f.code, f.subject) for f in findings}


def test_new_codes_are_known_to_check():
    for code in ("nonfinite_seen", "dead_units", "saturated", "grad_norm_span", "grad_norm_trend", "update_ratio"):
        assert code in CODES


def test_a_layer_whose_units_die_is_found_with_its_step():
    torch.manual_seed(0)
    model = Net()
    w = train(model, 5, {"every": 1})
    assert not any(f.code == "dead_units" for f in w.findings())
    with torch.no_grad():
        model.fc2.bias.fill_(-50.0)  # every unit of the second ReLU call is zero from now on
    w2 = train(model, 5, {"every": 1})
    dead = [f for f in w2.findings() if f.code == "dead_units"]
    assert [f.subject for f in dead] == ["act#2"]
    assert dead[0].message.startswith("act#2: 100% of its outputs are zero, 100% of its units zero for every input")
    assert "at every logged step from the first (0 to 4)" in dead[0].message
    # The gradients it stops are named in it, and its nodes are its output's, then those parameters'.
    assert "the gradients of fc1.weight, fc1.bias, fc2.weight, fc2.bias, head.weight are exactly zero as well" in dead[0].message
    output = module_output_nodes(w2.graph())["act#2"]
    assert dead[0].nodes[: len(output)] == output and len(dead[0].nodes) > len(output)


def test_nan_first_seen_names_the_step_and_the_first_module():
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with watch(model, optimizer=opt, every=1) as w:
        for step in range(4):
            if step == 2:
                with torch.no_grad():
                    model.fc2.weight[0, 0] = math.nan
            model(torch.randn(4, 4)).sum().backward()
            opt.step()
            opt.zero_grad()
    # One cause, one finding: fc2 makes the first output holding NaN; in it, the first ReLU's output
    # is the first (backward) to get a NaN gradient, through fc2's weight, which holds it; fc1's weight gets it.
    (found,) = w.findings()
    # Run again with every value watched, the step names the weight that held the NaN before any op used it.
    assert (found.severity, found.code, found.subject) == ("error", "nonfinite_seen", "fc2.weight")
    assert found.message.startswith("NaN/Inf first seen at step 2, born here")
    assert "fc2.weight of shape (8, 8) already holds 1 NaN before any op uses it" in found.message
    assert "fc2: first seen at step 2: NaN/Inf in the output of module 'fc2'" in found.message
    for place in ("of the output of module 'act'", "in parameter 'fc2.weight'", "fc1.weight: its gradient (or its norm) holds NaN"):
        assert place in found.message
    graph_nodes = module_output_nodes(w.graph())
    assert set(graph_nodes["fc2"]) <= set(found.nodes)
    assert json.loads(json.dumps(w.to_dict()))["statistics"]["activation_abs_max"]["fc2"][2] == "nan"


def test_saturated_tanh_tiny_updates_and_a_vanishing_gradient_are_found():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 16), nn.Linear(16, 1))
    with torch.no_grad():
        model[0].weight.mul_(100.0)  # tanh saturates
        model[2].weight.mul_(1e-5)  # the gradient below this layer is 1e-5 of the one above
    w = train(model, 4, {"every": 1}, lr=1e-9)
    found = codes(w.findings())
    assert ("saturated", "1") in found
    assert ("update_ratio", "3.weight") in found  # a learning rate of 1e-9 barely moves it
    span = [f for f in w.findings() if f.code == "grad_norm_span"]
    assert len(span) == 1 and "at every logged step from the first (0 to 3)" in span[0].message
    assert span[0].message.startswith("the gradient shrinks toward the input: 1 layer (0)")


def test_a_gradient_norm_that_grows_over_steps_is_found():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    with watch(model, optimizer=opt, every=1) as w:
        for step in range(5):
            (model(torch.randn(4, 4)).sum() * 10.0**step).backward()
            opt.step()
            opt.zero_grad()
    trend = [f for f in w.findings() if f.code == "grad_norm_trend"]
    assert {f.subject.rpartition(".")[0] for f in trend} == {"0", "1"}
    assert all(re.search(r"grew by 4\.\d powers of ten, from .* at step 0 to .* at step 4", f.message) for f in trend)


# --- models from elsewhere -----------------------------------------------------------------


def test_an_unmodified_transformers_model_with_keyword_inputs():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=16)
    model = transformers.GPT2LMHeadModel(config)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 100, (2, 16))
    with watch(model, optimizer=opt, every=2) as w:
        for _ in range(3):
            model(input_ids=ids, labels=ids).loss.backward()
            opt.step()
            opt.zero_grad()
    assert w.steps == [0, 2]
    calls = w.module_calls
    assert {"transformer.h.0.attn", "transformer.h.1.mlp.act", "lm_head", ""} <= set(calls)
    assert w.latest("output_grad_norm")["transformer.h.1"] > 0
    assert w.latest("update_ratio")["transformer.h.0.attn.c_attn.weight"] > 0
    overlay = w.overlay("activation_std")
    assert overlay.values and make_dot(w.graph(), overlays=[overlay]).source


def test_a_compiled_model_says_once_what_it_cannot_see():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 1))
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="aot_eager")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with watch(model, optimizer=opt, every=1) as w:
                for _ in range(3):
                    compiled(torch.randn(2, 4)).sum().backward()
                    opt.step()
                    opt.zero_grad()
    except Exception as error:  # no working torch.compile here
        if "watch" in str(error):
            raise
        pytest.skip(f"torch.compile is unavailable: {type(error).__name__}: {error}")
    notes = [str(c.message) for c in caught if "graphviz-autograd" in str(c.message)]
    assert len(notes) == 1 and "torch.compile" in notes[0]
    assert w.steps == [0, 1, 2] and all(v > 0 for v in w.latest("grad_norm").values())


def test_a_layer_that_dies_during_training_and_the_gradients_it_stops_are_found():
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with watch(model, optimizer=opt, every=2) as w:
        for step in range(12):
            if step == 6:
                with torch.no_grad():
                    model.fc2.bias.fill_(-50.0)
            model(torch.randn(16, 4)).pow(2).mean().backward()
            opt.step()
            opt.zero_grad()
    messages = {(f.code, f.subject): f.message for f in w.findings()}
    assert messages[("dead_units", "act#2")].startswith("act#2: 100% of its outputs are zero, ")
    assert "since step 6 (not at step 4; until step 10)" in messages[("dead_units", "act#2")]
    # Nothing reaches the layers before it: their gradients are zero from that step on, said in the same finding.
    assert "the gradients of fc1.weight, fc1.bias, fc2.weight, fc2.bias, head.weight are exactly zero as well" \
        in messages[("dead_units", "act#2")]
    assert not any(code == "grad_zero" for code, _ in messages)


def test_histograms_count_a_sample_of_a_large_tensor_or_every_element():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256))
    x = torch.randn(100, 64)
    counts = {}
    for sample in (4096, None):
        with watch(model, every=1, histogram_sample=sample) as w:
            model(x).sum().backward()
            w.step()
        counts[sample] = sum(w.logged_steps[0].histograms["activation"]["0"])
    assert counts[None] == 100 * 256 and 4096 // 2 < counts[4096] <= 4096
    with pytest.raises(OptionError, match="histogram_sample"):
        watch(model, histogram_sample=0)


def test_histograms_come_every_tenth_step_by_default_and_the_statistics_every_logged_step():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    taken = {}
    for every, histogram_every in ((1, None), (3, None), (1, 1), (20, None)):
        options = {} if histogram_every is None else {"histogram_every": histogram_every}
        with watch(model, optimizer=opt, every=every, **options) as w:
            for _ in range(25):
                model(torch.randn(8, 3)).pow(2).mean().backward()
                opt.step()
                opt.zero_grad()
        assert all(step.values["activation_std"] for step in w.logged_steps)
        taken[every, histogram_every] = [step.step for step in w.logged_steps
                                         if step.histograms and all(step.histograms.values())]
        if histogram_every is None:  # the steps between have none at all
            assert not any(step.histograms for step in w.logged_steps if step.step not in taken[every, histogram_every])
    # At least ten training steps apart: every step logged, then every third, then every step with
    # histograms asked of each; a logged step ten or more steps after the last has them always.
    assert taken == {(1, None): [0, 10, 20], (3, None): [0, 12, 24], (1, 1): list(range(25)), (20, None): [0, 20]}
    data = w.to_dict()
    assert data["histograms"]["param"]["0.weight"][0] is not None
    with pytest.raises(OptionError, match="histogram_every"):
        watch(model, histogram_every=0)


def test_a_sample_steps_prime_to_the_last_dimension_of_any_tensor_a_flat_output_too():
    # A module's output of 3,000 numbers in one dimension: every k-th counted, k the first
    # step from ceil(3000 / 1024) = 3 up that is prime to 3,000 (7), as for a gradient.
    class Flatten(nn.Module):
        def forward(self, x):
            return x.reshape(-1)

    model = nn.Sequential(nn.Linear(2, 300), Flatten())
    with watch(model, every=1) as w:
        model(torch.randn(10, 2)).sum().backward()
        w.step()
    histograms = w.logged_steps[0].histograms
    assert sum(histograms["activation"]["1"]) == len(range(0, 3000, 7))
    assert sum(histograms["output_grad"]["1"]) == len(range(0, 3000, 7))


def test_the_example_of_the_docs_finds_its_dying_layer(capsys):
    import runpy
    from pathlib import Path

    example = runpy.run_path(str(Path(__file__).resolve().parent.parent / "examples" / "dying_layer.py"))
    w = example["main"]()
    printed = capsys.readouterr().out
    assert printed.startswith("warning: [dead_units] 3: 100% of its outputs are zero, 100% of its units zero for every input")
    assert "since step 100 (not at step 90; until step 290)" in printed
    # One cause, one finding: the gradients the dead units stop are named in it.
    assert [(f.code, f.subject) for f in w.findings()] == [("dead_units", "3")]
    assert "the gradients of 0.weight, 0.bias, 2.weight, 2.bias, 4.weight are exactly zero as well" in printed
    docs = (Path(__file__).resolve().parent.parent / "docs" / "watching.md").read_text(encoding="utf-8")
    assert printed.splitlines()[0] in docs  # the docs show what it prints


def test_no_tensor_of_a_step_outlives_it_and_evaluation_is_not_measured():
    import gc
    import weakref

    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with watch(model, optimizer=opt, every=1) as w:
        out = model(torch.randn(4, 4))
        output = weakref.ref(out)
        out.sum().backward()
        opt.step()
        del out
        gc.collect()
        assert output() is None  # the watcher holds none of the step's tensors
        model(torch.randn(4, 4)).sum().backward()
        with torch.no_grad():
            model(torch.full((4, 4), 1e6))  # an evaluation inside the step, after its backward
        opt.step()
    assert w.latest("activation_abs_max")["fc1"] < 1e3


def test_with_several_backward_passes_a_step_keeps_the_accumulated_gradient():
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with watch(model, every=1) as w:
        for _ in range(3):  # micro-batches
            model(torch.randn(4, 4)).sum().backward()
        accumulated = model.fc1.weight.grad.norm().item()
        opt.step()
        opt.zero_grad()
        w.step()
    assert w.latest("grad_norm")["fc1.weight"] == pytest.approx(accumulated, rel=1e-5)
    assert w.module_calls == ["", "fc1", "act", "fc2", "act#2", "head"]  # each micro-batch counts calls afresh


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_the_statistics_are_those_of_the_same_run_on_the_cpu(monkeypatch):
    # Reduced on the device, moved to the host once per logged step: the numbers agree with the CPU's.
    transfers = []
    original = torch.Tensor.tolist
    monkeypatch.setattr(torch.Tensor, "tolist", lambda self: transfers.append(self.device.type) or original(self))
    torch.manual_seed(0)
    cpu_model, gpu_model = Net(), Net()
    gpu_model.load_state_dict(cpu_model.state_dict())
    gpu_model = gpu_model.cuda()
    data = [(torch.randn(16, 4), torch.randn(16, 1)) for _ in range(6)]
    records = []
    for model, device in ((cpu_model, "cpu"), (gpu_model, "cuda")):
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        transfers.clear()
        with watch(model, optimizer=opt, every=3, graph=False) as w:
            for x, y in data:
                (model(x.to(device)) - y.to(device)).pow(2).mean().backward()
                opt.step()
                opt.zero_grad()
        records.append((w, list(transfers)))
    (cpu_watch, _), (gpu_watch, gpu_transfers) = records
    assert len(gpu_transfers) == len(gpu_watch.steps) == 2  # one host transfer per logged step
    for statistic in ("grad_norm", "activation_std", "param_norm"):
        for key, values in cpu_watch.series(statistic).items():
            assert gpu_watch.series(statistic)[key] == pytest.approx(values, rel=1e-3, abs=1e-6), (statistic, key)


def test_a_module_that_returns_its_childs_output_has_its_numbers_unless_it_changed_them():
    class Doubling(nn.Module):
        """Returns its layer's output, doubled in place: the same tensor, other values."""

        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x).mul_(2.0)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), Doubling())  # the Sequential returns Doubling's output
    with watch(model, every=1) as w:
        model(torch.randn(8, 4)).pow(2).sum().backward()
        w.step()
    logged = w.logged_steps[-1]
    for statistic in ("activation_mean", "activation_std", "activation_abs_max", "output_grad_norm"):
        values = logged.values[statistic]
        assert values[""] == values["1"], statistic
        assert values["1.fc"] != values["1"], statistic
    assert logged.values["activation_abs_max"]["1"] == pytest.approx(2 * logged.values["activation_abs_max"]["1.fc"])
    assert logged.histograms["activation"][""] == logged.histograms["activation"]["1"]


# --- one rule set with check(), and no false alarm ---------------------------------------------


class FunctionalRelu(nn.Module):
    """Three layers with torch.relu between them: no ReLU module whose output watch() could see."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.head = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def test_a_layer_dead_from_the_first_step_is_found_by_watch_as_check_finds_it():
    torch.manual_seed(0)
    model = FunctionalRelu()
    with torch.no_grad():
        model.fc1.bias.fill_(-50.0)  # relu(fc1(x)) is zero for every input from the start
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    zero_in_check = {f.subject for f in check((model(x) - y).pow(2).mean(), model, backward=True) if f.code == "grad_zero"}
    assert zero_in_check == {"fc1.weight", "fc1.bias", "fc2.weight"}
    w = train(model, 30, {"every": 1})
    (finding,) = [f for f in w.findings() if f.severity != "info"]
    assert (finding.code, finding.subject) == ("grad_zero", "fc1.weight")
    assert "3 parameters take part in the forward but their gradient is exactly zero (fc1.weight, fc1.bias, fc2.weight)" in finding.message
    assert "at every logged step from the first (0 to 29)" in finding.message
    params = {name for name, ids in parameter_nodes(w.graph()).items() if set(ids) & set(finding.nodes)}
    assert params == zero_in_check


def test_a_run_that_diverges_to_nan_is_one_error_and_no_unit_counts_as_dead():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))
    w = train(model, 30, {"every": 1}, lr=10.0)
    assert any(not math.isfinite(v) for v in w.latest("activation_abs_max").values())  # it did diverge
    found = [(f.severity, f.code) for f in w.findings()]
    assert found and all(item == ("error", "nonfinite_seen") for item in found)


def test_log_of_a_negative_value_is_a_nan_not_dead_units():
    class Logged(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 8)
            self.act = nn.ReLU()
            self.head = nn.Linear(8, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.act(torch.log(self.fc(x))))  # log of a negative: NaN

    torch.manual_seed(0)
    w = train(Logged(), 4, {"every": 1})
    assert {f.code for f in w.findings()} == {"nonfinite_seen"}


def test_a_parameter_initialised_to_zero_has_no_update_ratio_rather_than_an_infinite_one():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    with torch.no_grad():
        for layer in (model[0], model[2]):
            layer.bias.zero_()  # as transformers initialise them
    w = train(model, 3, {"every": 1})
    assert "0.bias" not in w.latest("update_ratio", step=0) and "0.bias" in w.latest("update_ratio", step=1)
    overlay = w.overlay("update_ratio", step=0)
    assert all(math.isfinite(v) for v in overlay.values.values())  # nothing to paint as NaN/Inf
    stepped = next(o for o in w.overlays_over_steps() if o.name == "update_ratio")
    assert all(v is None or math.isfinite(v) for series in stepped.series.values() for v in series)
    assert w.findings() == []
    assert "inf" not in json.dumps(w.to_dict()["statistics"]["update_ratio"])


def test_a_layernorm_gelu_net_that_fits_its_data_gets_no_finding():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 1))
    x = torch.randn(64, 4)
    y = x[:, :1] * 0.5 - x[:, 1:2]
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with watch(model, optimizer=opt, every=10) as w:
        for _ in range(400):
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
    assert loss.item() < 0.01  # it fit the data: its gradients shrank by decades
    norms = w.series("grad_norm")["0.weight"]
    assert math.log10(norms[0] / norms[-1]) > 1.5
    assert [f for f in w.findings() if f.severity != "info"] == []


@pytest.mark.parametrize("shape", [(32, 32, 32, 32), (3, 100_003), (70_000,)])
def test_the_zero_fraction_of_a_large_output_is_counted_on_a_sample_within_half_a_point(shape):
    from graphviz_autograd.training.measures import ZERO_COUNT_SAMPLE, StepMeasures

    generator = torch.Generator().manual_seed(0)
    output = torch.relu(torch.randn(shape, generator=generator) - 0.3)  # about 62% zero
    output[0] = 0.0  # a block of zeros at the start, as a dead first sample would be
    measures = StepMeasures(histograms=False, sample=None)
    measures.output("block", None, output)
    values, _ = measures.flat()[1].read(measures.flat()[0].tolist())
    exact = (output == 0).double().mean().item()
    assert output.numel() > ZERO_COUNT_SAMPLE
    assert abs(values["activation_zero_fraction"]["block"] - exact) < 0.005
    assert values["activation_mean"]["block"] == pytest.approx(output.mean().item(), rel=1e-4)  # still every element


def test_an_output_gradient_that_is_not_contiguous_has_its_norm_measured_all_the_same():
    from graphviz_autograd.training.measures import StepMeasures

    grad = torch.arange(12.0).view(3, 4).t()  # not contiguous
    measures = StepMeasures(histograms=False, sample=None)
    measures.gradient("output_grad_norm", "output_grad", "layer", grad)
    contiguous = StepMeasures(histograms=False, sample=None)
    contiguous.gradient("output_grad_norm", "output_grad", "layer", grad.contiguous())
    norms = [m.flat()[0].item() for m in (measures, contiguous)]
    assert norms[0] == pytest.approx(norms[1]) == pytest.approx(grad.norm().item())


def test_the_gradient_norms_logged_are_those_the_optimizer_steps_with_even_when_changed_after_the_nan_check():
    # watch() takes the gradients' norms once, before the optimizer's step (its NaN check), and
    # logs those: unless the gradients change after that check, as a step pre-hook of the
    # user's registered later does here (doubling them), when it takes them again.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    x = torch.randn(16, 4)
    seen = {}

    def double_gradients(*_):
        torch._foreach_mul_([p.grad for p in model.parameters()], 2.0)

    with watch(model, optimizer=opt, every=1, graph=False) as w:
        for doubled in (False, True):
            handle = opt.register_step_pre_hook(double_gradients) if doubled else None
            model(x).pow(2).mean().backward()
            opt.step()
            seen[doubled] = {name: p.grad.norm().item() for name, p in model.named_parameters()}
            opt.zero_grad()
            if handle is not None:
                handle.remove()
    for step, doubled in enumerate((False, True)):
        logged = w.latest("grad_norm", step=step)
        assert logged == pytest.approx(seen[doubled], rel=1e-5)
    assert seen[True]["0.weight"] == pytest.approx(2 * seen[False]["0.weight"], rel=1e-5)  # lr 0: the same gradient, doubled
