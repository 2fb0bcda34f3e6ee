"""profile_step: events matched to the walked graph's nodes, rolled up by module, printed,
serialised, and the model left as it was; its bad inputs each get one named error."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from torch import nn

from graphviz_autograd import GraphvizAutogradError, ModuleInfo, OptionError, StepProfile, profile_step, walk
from graphviz_autograd.cli.commands import main
from graphviz_autograd.drawing.dot_writer import to_dot
from graphviz_autograd.errors import DeviceUnavailableError, MetaDeviceError, NoModulesError, StepFailedError
from graphviz_autograd.checks.profiling import (
    BACKWARD_MEMORY,
    BACKWARD_TIME,
    FORWARD_TIME,
    OpProfile,
    Unmatched,
    check_device,
)

MNIST = str(Path(__file__).resolve().parent.parent / "samples" / "mnist_cnn.py")


class HeavyAmongLight(nn.Module):
    """Light 8-wide layers around one heavy pair of layers, 1024 wide."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(8, 8)
        self.heavy = nn.Sequential(nn.Linear(8, 1024), nn.Tanh(), nn.Linear(1024, 1024), nn.Linear(1024, 8))
        self.last = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.last(torch.relu(self.heavy(torch.relu(self.first(x))))).sum()


class Blocks(nn.Module):
    """Three alike blocks in a ModuleList, one module called twice, a batch norm (its buffers change)."""

    def __init__(self) -> None:
        super().__init__()
        self.h = nn.ModuleList([nn.Linear(6, 6) for _ in range(3)])
        self.act = nn.ReLU()
        self.norm = nn.BatchNorm1d(6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.h:
            x = self.act(block(x))
        return self.act(self.norm(x)).pow(2).mean()


def small_profile(**kwargs) -> StepProfile:
    torch.manual_seed(0)
    model = Blocks()
    return profile_step(model, torch.randn(4, 6), steps=1, **kwargs)


# --- the walk's sequence numbers --------------------------------------------------


def test_a_walk_asked_for_sequence_numbers_numbers_each_op_node_and_draws_the_same():
    model = Blocks()
    loss = model(torch.randn(4, 6))
    plain = walk(loss, model)
    numbered = walk(loss, model, collect_sequence_numbers=True)
    ops = [n.id for n in numbered.nodes if n.kind == "op"]
    assert [node_id for node_id, _ in numbered.sequence_numbers] == ops
    numbers = [number for _, number in numbered.sequence_numbers]
    assert len(set(numbers)) == len(numbers)
    assert numbered.node(ops[0]).label == loss.grad_fn.name() and numbers[0] == loss.grad_fn._sequence_nr()
    assert plain.sequence_numbers == () and "sequence_numbers" not in plain.to_dict()
    assert to_dot(numbered) == to_dot(plain)
    assert numbered == plain  # the numbers differ from run to run: graphs compare without them


# --- matching ---------------------------------------------------------------------


def test_every_node_of_a_plain_model_is_matched_and_ids_are_the_walked_graphs():
    profile = small_profile()
    graph = profile.graph
    assert graph is not None
    ops = [n for n in graph.nodes if n.kind in ("op", "accumulate_grad")]
    assert [(op.id, op.label, op.module) for op in profile.ops] == [(n.id, n.label, n.module) for n in ops]
    op_ids = {n.id for n in ops if n.kind == "op"}
    assert set(profile.node_values(FORWARD_TIME)) == op_ids
    assert set(profile.node_values(BACKWARD_TIME)) == {n.id for n in ops}
    assert set(profile.node_values(BACKWARD_MEMORY)) == {n.id for n in ops}
    assert profile.unmatched.ops_without_forward == 0
    assert profile.unmatched.nodes_without_backward == 0
    assert profile.unmatched.backward_ranges == 0
    assert all(value > 0 for value in profile.node_values(BACKWARD_TIME).values())


def test_the_heavy_module_tops_the_backward_and_forward_tables():
    torch.manual_seed(0)
    profile = profile_step(HeavyAmongLight(), torch.randn(256, 8), steps=3)
    assert profile.by_module(BACKWARD_TIME)[0].path == "heavy"
    assert profile.by_module(FORWARD_TIME)[0].path == "heavy"
    assert profile.by_module(BACKWARD_MEMORY)[0].path == "heavy"
    top_op = profile.top_ops(BACKWARD_TIME, 1)[0]
    assert top_op.module.startswith("heavy.") and top_op.label == "AddmmBackward0"
    assert "heavy" in profile.table().split("top modules by backward time\n")[1].splitlines()[1]


def test_an_op_that_makes_no_node_of_the_graph_is_counted_not_dropped():
    class DeadBranch(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.fc(x)
            self.unused = (y * 3).exp()  # makes nodes the loss never reaches
            return y.sum()

    profile = profile_step(DeadBranch(), torch.randn(2, 4), steps=1)
    assert profile.unmatched.forward_ops >= 1
    assert profile.unmatched.nodes_without_backward == 0
    assert "forward in no node: " in profile.table()


def test_a_step_function_runs_the_forward_and_the_optimizer_step_is_timed():
    torch.manual_seed(0)
    model = Blocks()
    x = torch.randn(4, 6)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    profile = profile_step(model, step=lambda: model(x), optimizer=optimizer, steps=2, warmup=2)
    assert profile.totals["optimizer"] > 0 and profile.steps == 2 and profile.warmup == 2
    assert profile.unmatched.nodes_without_backward == 0


def test_outputs_without_a_loss_start_the_backward_from_each_output():
    model = nn.Linear(3, 2)
    profile = profile_step(model, torch.randn(5, 3), steps=1, warmup=0)
    assert {op.label for op in profile.ops} >= {"AddmmBackward0", "AccumulateGrad"}
    assert profile.unmatched.nodes_without_backward == 0


# --- roll-up ------------------------------------------------------------------------


def hand_made_profile() -> StepProfile:
    ops = (
        OpProfile("n1", "op", "MulBackward0", "h.0", 1.0, 10.0, 100.0),
        OpProfile("n2", "op", "MulBackward0", "h.1", 1.0, 30.0, 100.0),
        OpProfile("n3", "op", "MulBackward0", "h.2", 1.0, 20.0, 100.0),
        OpProfile("n4", "op", "ReluBackward0", "act", 2.0, 1.0, 0.0),
        OpProfile("n5", "op", "ReluBackward0", "act#2", 2.0, 4.0, 0.0),
        OpProfile("n6", "op", "SumBackward0", "", 0.5, 2.0, 8.0),
        OpProfile("n7", "accumulate_grad", "AccumulateGrad", "h.0", None, 1.0, None),
    )
    modules = (
        ModuleInfo("", "Net"), ModuleInfo("h", "ModuleList"), *(ModuleInfo(f"h.{i}", "Block") for i in range(3)),
        ModuleInfo("act", "ReLU"), ModuleInfo("act#2", "ReLU"),
    )
    return StepProfile(ops, modules, "cpu", "cpu", 3, 1, 100.0, 90.0, 110.0,
                       {"forward": 30.0, "backward": 70.0, "backward_memory": 400.0}, Unmatched(), model="Net")


def test_alike_blocks_fold_into_one_row_with_their_spread_and_calls_into_their_module():
    rows = {row.path: row for row in hand_made_profile().by_module(BACKWARD_TIME)}
    assert set(rows) == {"h", "h.*", "act"}
    blocks = rows["h.*"]
    assert (blocks.value, blocks.blocks, blocks.low, blocks.high, blocks.type_name) == (61.0, 3, 11.0, 30.0, "Block")
    assert rows["h"].value == 61.0 and rows["h"].blocks == 1
    assert rows["act"].value == 5.0  # act and its second call act#2
    assert [row.path for row in hand_made_profile().by_module(BACKWARD_TIME)] == ["h", "h.*", "act"]


def test_node_values_are_keyed_by_node_id_and_only_where_measured():
    profile = hand_made_profile()
    assert profile.node_values(FORWARD_TIME) == {"n1": 1.0, "n2": 1.0, "n3": 1.0, "n4": 2.0, "n5": 2.0, "n6": 0.5}
    assert profile.node_values(BACKWARD_MEMORY)["n1"] == 100.0 and "n7" not in profile.node_values(BACKWARD_MEMORY)
    with pytest.raises(OptionError, match="metric must be one of forward_time, backward_time, backward_memory"):
        profile.node_values("time")


def test_the_table_states_how_it_was_measured_and_ranks_modules_and_ops():
    text = hand_made_profile().table(top=2)
    assert text.startswith("profile of Net on cpu: median of 3 steps after 1 warm-up step")
    assert "profiler overhead: a step took 110.00 s with the profiler and 90.00 s without it (the profiler added 22%)" in text
    section = text.split("top modules by backward time\n")[1].split("\n\n")[0].splitlines()
    assert section[0].split() == ["module", "type", "backward", "time", "share", "of", "the", "step", "blocks"]
    # The list h is its blocks h.*: one row, with the blocks and their spread.
    assert section[1].split()[:4] == ["h.*", "Block", "61.00", "s"] and "x3, 11.00 s to 30.00 s each" in section[1]
    assert len(section) == 3 and section[2].split()[0] == "act"
    ops = text.split("top ops by backward time\n")[1].split("\n\n")[0].splitlines()
    assert [line.split()[:2] for line in ops[1:]] == [["MulBackward0", "n2"], ["MulBackward0", "n3"]]
    assert "30%" in ops[1]
    assert "top modules by backward memory" in text and "share of the backward's allocations" in text
    assert "forward in no node: 0 top-level ops" in text and "backward in no node: 0 ranges" in text
    assert str(hand_made_profile()) == hand_made_profile().table()


def test_a_profile_survives_json_and_gives_the_same_table():
    profile = small_profile()
    again = StepProfile.from_dict(json.loads(profile.to_json()))
    assert again == profile and again.graph is None
    assert again.table() == profile.table()
    with pytest.raises(OptionError, match="needs the data StepProfile.to_dict"):
        StepProfile.from_dict({"ops": []})


# --- the model is left as it was ----------------------------------------------------


def test_parameters_buffers_grads_optimizer_state_and_random_numbers_are_put_back():
    torch.manual_seed(0)
    model = Blocks()
    x = torch.randn(4, 6, requires_grad=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    model(x).backward()
    optimizer.step()  # the optimizer has state, and each parameter and the input a .grad
    input_grad = x.grad
    input_grad_value = input_grad.clone()
    grads = {name: p.grad for name, p in model.named_parameters()}
    grad_values = {name: g.clone() for name, g in grads.items()}
    state = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer_state = copy.deepcopy(optimizer.state_dict())
    exp_avg = optimizer_state["state"][0]["exp_avg"]
    rng = torch.get_rng_state()

    profile_step(model, x, optimizer=optimizer, steps=2)

    assert all(torch.equal(v, model.state_dict()[k]) for k, v in state.items())
    for name, p in model.named_parameters():
        assert p.grad is grads[name] and torch.equal(p.grad, grad_values[name])
    after = optimizer.state_dict()
    assert torch.equal(after["state"][0]["exp_avg"], exp_avg) and after["state"][0]["step"] == optimizer_state["state"][0]["step"]
    assert torch.equal(torch.get_rng_state(), rng)
    assert x.grad is input_grad and torch.equal(x.grad, input_grad_value)


def test_a_step_that_raises_says_where_and_leaves_the_model_as_it_was():
    model = Blocks()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    calls = []

    def step() -> torch.Tensor:
        calls.append(1)
        if len(calls) == 3:  # the recorded warm-up and the first plain step pass; the next fails
            raise ValueError("batch exhausted")
        return model(torch.randn(4, 6))

    with pytest.raises(StepFailedError, match=r"The forward pass of measured step 1 raised ValueError: batch exhausted; ") as error:
        profile_step(model, step=step)
    assert isinstance(error.value, RuntimeError)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    assert all(p.grad is None for p in model.parameters())


# --- bad input ----------------------------------------------------------------------


def test_a_model_on_the_meta_device_is_refused_in_one_sentence():
    with torch.device("meta"):
        model = nn.Linear(2, 2)
    with pytest.raises(MetaDeviceError, match=r"^Linear has weight on the meta device, which holds shapes but no data") as error:
        profile_step(model, torch.ones(1, 2))
    assert isinstance(error.value, ValueError)


def test_a_profile_without_modules_refuses_a_roll_up_and_its_table_says_why():
    w = torch.randn(3, requires_grad=True)
    profile = profile_step(step=lambda: (w * 2).exp().sum(), steps=1)
    with pytest.raises(NoModulesError, match="knows no modules.*pass the model to profile_step"):
        profile.by_module(BACKWARD_TIME)
    text = profile.table()
    assert "top modules" not in text and "top ops by backward time" in text
    assert "note: no model was given" in text


def test_counts_and_a_step_given_twice_are_refused():
    model = nn.Linear(2, 1)
    with pytest.raises(OptionError, match="steps must be a whole number of 1 or more; got 0"):
        profile_step(model, torch.ones(1, 2), steps=0)
    with pytest.raises(OptionError, match="Give either step"):
        profile_step(model, torch.ones(1, 2), step=lambda: model(torch.ones(1, 2)).sum())
    with pytest.raises(GraphvizAutogradError, match="needs a model"):
        profile_step()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_asked_without_cuda_is_refused_in_one_sentence():
    with pytest.raises(DeviceUnavailableError, match=r"^Device 'cuda' was asked for, but .*; profile on cpu instead\.$"):
        check_device("cuda")
    with pytest.raises(OptionError, match="is not a device"):
        check_device("gpu")


# --- the command line ---------------------------------------------------------------


def test_the_profile_command_prints_the_tables_of_a_model_file():
    result = CliRunner().invoke(main, ["profile", MNIST, "--steps", "1", "--top", "3", "-q"])
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert text.startswith("profile of Net on cpu: median of 1 step after 1 warm-up step")
    modules = text.split("top modules by backward time\n")[1].split("\n\n")[0].splitlines()
    assert len(modules) == 4 and {line.split()[0] for line in modules[1:]} <= {"conv1", "conv2", "fc1", "fc2", "conv2_drop"}
    assert "profiler overhead" in text and "matched: 15 of 15 op nodes to their forward op" in text


def test_the_profile_command_writes_json_that_reads_back():
    result = CliRunner().invoke(main, ["profile", MNIST, "--steps", "1", "--warmup", "0", "--json", "-q"])
    assert result.exit_code == 0, result.output
    profile = StepProfile.from_dict(json.loads(result.stdout))
    assert profile.steps == 1 and profile.warmup == 0 and profile.device == "cpu"
    assert any(op.label == "ConvolutionBackward0" and op.module == "conv1" for op in profile.ops)


def test_the_profiler_starting_and_stopping_writes_no_lines_of_its_own_and_hides_nothing_else(capfd):
    import os

    from graphviz_autograd.checks.profiling import _without_profiler_chatter

    with _without_profiler_chatter():
        os.write(2, b"USDT:2026-11-26 14:50:35 14607:14607 SyncActivityProfilerHandler.cpp:52] profiler_start\n")
        os.write(2, b"a warning of the device's own\n")
        os.write(2, b"USDT:2026-11-26 14:50:35 14607:14607 SyncActivityProfilerHandler.cpp:59] profiler_stop\n")
        print("said in Python", file=sys.stderr)
    # (In order, where sys.stderr writes to descriptor 2; the capture here writes it elsewhere.)
    assert sorted(capfd.readouterr().err.splitlines()) == ["a warning of the device's own", "said in Python"]


def test_the_profile_command_prints_the_tables_and_no_profiler_chatter():
    result = subprocess.run(
        [sys.executable, "-m", "graphviz_autograd", "profile", MNIST, "--steps", "2"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("profile of Net on cpu")
    assert result.stderr.startswith("loading ")  # what the command says of itself still comes
    assert "profiler_start" not in result.stderr and "profiler_stop" not in result.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_the_profile_command_asked_for_cuda_without_it_exits_with_one_line():
    result = subprocess.run(
        [sys.executable, "-m", "graphviz_autograd", "profile", MNIST, "--device", "cuda"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"Error: Device 'cuda' was asked for, but this build of torch has no CUDA (torch {torch.__version__}); "
        "profile on cpu instead."
    ] or "no CUDA device is visible" in result.stderr
    assert "Traceback" not in result.stderr


# --- the CUDA clock, on events made by hand ----------------------------------------


class FakeEvent:
    """What the matcher reads of a kineto event."""

    def __init__(self, name, start, duration, thread=1, *, sequence_nr=-1, correlation=0, linked=0, nbytes=0,
                 device="CPU", annotation=False):
        self._values = dict(name=name, start_ns=start, duration_ns=duration, start_thread_id=thread,
                            sequence_nr=sequence_nr, correlation_id=correlation, linked_correlation_id=linked,
                            nbytes=nbytes, device_type=getattr(torch.autograd.DeviceType, device),
                            is_user_annotation=annotation)

    def __getattr__(self, name):
        return lambda: self._values[name]


def test_on_cuda_each_range_gets_the_kernels_launched_inside_it_and_the_bytes_allocated_there():
    # Private names: no CUDA here, so the matcher is fed the events a CUDA step gives.
    from graphviz_autograd.graph.autograd_graph import AutogradGraph, Edge, Node
    from graphviz_autograd.checks.profiling import _Marks, _Matcher

    graph = AutogradGraph(
        (Node("n0", "output", ""), Node("n1", "op", "SumBackward0"), Node("n2", "op", "MulBackward0"),
         Node("n3", "accumulate_grad", "AccumulateGrad"), Node("n4", "parameter", "w")),
        (Edge("n1", "n0"), Edge("n2", "n1"), Edge("n3", "n2"), Edge("n4", "n3")),
    ).with_sequence_numbers([("n1", 11), ("n2", 10)])
    forward, backward, engine = 1, 1, 2  # threads: the step's, and autograd's device thread
    events = [
        FakeEvent("graphviz_autograd: forward", 1000, 1000, forward, annotation=True),
        FakeEvent("aten::mul", 1100, 100, forward, sequence_nr=110, correlation=1),
        FakeEvent("aten::sum", 1300, 100, forward, sequence_nr=111, correlation=2),
        FakeEvent("aten::add", 1500, 100, forward, sequence_nr=112, correlation=3),  # makes no node of the graph
        FakeEvent("graphviz_autograd: backward", 3000, 1000, backward, annotation=True),
        FakeEvent("autograd::engine::evaluate_function: SumBackward0", 3100, 100, engine, sequence_nr=111),
        FakeEvent("aten::expand", 3110, 40, engine, correlation=4),
        FakeEvent("[memory]", 3120, 0, engine, nbytes=256, device="CUDA"),
        FakeEvent("autograd::engine::evaluate_function: MulBackward0", 3300, 100, engine, sequence_nr=110),
        FakeEvent("aten::mul", 3310, 80, engine, correlation=5),
        FakeEvent("cudaLaunchKernel", 3320, 5, engine, correlation=99, linked=5),  # a runtime call, no range
        FakeEvent("[memory]", 3330, 0, engine, nbytes=512, device="CUDA"),
        FakeEvent("[memory]", 3340, 0, engine, nbytes=-512, device="CUDA"),  # frees are not counted
        FakeEvent("[memory]", 3350, 0, engine, nbytes=4096),  # host memory: another device
        FakeEvent("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 3500, 50, engine),
        FakeEvent("aten::add_", 3510, 30, engine, correlation=6),
    ]
    kernels = {1: 50, 2: 7, 3: 5, 4: 11, 5: 13, 6: 3}
    events += [FakeEvent("kernel", 5000 + c, d, 7, linked=c, device="CUDA") for c, d in kernels.items()]
    events.append(FakeEvent("graphviz_autograd: backward", 5000, 999, 7, linked=0, device="CUDA", annotation=True))

    step = _Matcher(graph, _Marks(10, 2), torch.device("cuda")).read(events, _Marks(110, 2))
    assert step.forward == {"n2": 50e-9, "n1": 7e-9}
    assert step.backward == {"n1": 11e-9, "n2": 13e-9, "n3": 3e-9}
    assert step.memory == {"n1": 256.0, "n2": 512.0, "n3": 0.0}
    assert (step.unmatched.forward_ops, step.unmatched.forward_time) == (1, 5e-9)
    assert step.totals["backward"] == 27e-9 and step.totals["forward"] == 62e-9
    assert step.totals["backward_memory"] == 768.0
    assert step.unmatched.backward_outside == 0.0 and step.unmatched.backward_ranges == 0


def test_the_profile_commands_help_imports_no_torch():
    code = (
        "import sys\n"
        "from graphviz_autograd.cli.commands import main\n"
        "try:\n"
        "    main(['profile', '--help'], prog_name='graphviz-autograd')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('torch' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "--steps N" in result.stdout and "--device DEVICE" in result.stdout and "--top N" in result.stdout
    assert result.stdout.strip().endswith("False")


# --- on the picture ------------------------------------------------------------------


def test_a_profile_is_an_overlay_on_the_graph_it_walked_and_sums_onto_module_boxes():
    from graphviz_autograd import make_dot
    from graphviz_autograd.views.prepared import prepare

    profile = small_profile()
    overlay = profile.overlay("backward_time")
    ids = {node.id for node in profile.graph.nodes}
    assert overlay.values and set(overlay.values) <= ids and overlay.unit == "s"
    assert [o.name for o in profile.overlays()] == ["forward_time", "backward_time", "backward_memory", "peak_memory"]
    whole = make_dot(profile.graph, overlays=[overlay], depth="full").source
    assert "backward time" in whole and "median of 1 step after 1 warm-up" in whole
    summary = prepare(profile.graph, depth=0, overlays=[overlay])
    assert sum(summary.overlays[0].values.values()) == pytest.approx(sum(overlay.values.values()))


def test_render_profile_colours_the_picture_by_backward_time(tmp_path):
    target = tmp_path / "mnist.dot"
    result = CliRunner().invoke(main, ["render", MNIST, "--profile", "-o", str(target), "-q"])
    assert result.exit_code == 0, result.output
    source = target.read_text()
    assert "backward time" in source and "fillcolor=\"/blues9/" in source


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_a_real_cuda_device_every_node_is_matched_and_timed_by_its_kernels():
    torch.manual_seed(0)
    model = Blocks().cuda()
    profile = profile_step(model, torch.randn(4, 6, device="cuda"), steps=3)
    assert profile.device.startswith("cuda")
    ops = [n for n in profile.graph.nodes if n.kind == "op"]
    assert set(profile.node_values(FORWARD_TIME)) == {n.id for n in ops}
    assert profile.unmatched.ops_without_forward == 0 and profile.unmatched.nodes_without_backward == 0
    backward = profile.node_values(BACKWARD_TIME)
    # Device time: a view's backward launches no kernel and takes none; a matrix product's does.
    assert all(value >= 0 for value in backward.values())
    assert all(backward[op.id] > 0 for op in profile.ops if op.label == "AddmmBackward0")
    assert sum(backward.values()) <= profile.totals["backward"] * 1.15


def test_a_profile_colours_the_explorer_page_in_chromium(tmp_path):
    # The three measurements are in the page's colour menu and module table, summed onto boxes.
    from graphviz_autograd import explore

    from .test_explore_browser import Page, chromium_path

    if chromium_path() is None:
        pytest.skip("no Chromium on this machine")
    playwright = pytest.importorskip("playwright.sync_api")
    profile = small_profile()
    path = explore(profile.graph, overlays=profile.overlays()).save(tmp_path / "profiled.html")
    with playwright.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium_path())
        try:
            page = Page(browser, path)
            menu = page.page.locator("#metric option").all_text_contents()
            assert {"forward time (sum)", "backward time (sum)", "backward memory (sum)"} <= set(menu)
            page.page.select_option("#metric", "backward_time")
            assert "backward time" in page.page.locator("#legend").text_content()
            filled = page.page.locator("g.node rect").evaluate_all("rects => rects.filter(r => r.style.fill).length")
            assert filled > 0  # the ops and boxes that have a time are filled by it
            assert page.errors == []
        finally:
            browser.close()


def test_a_step_over_the_step_before_as_a_ratio_per_node_and_sentences_per_module():
    import dataclasses

    before = hand_made_profile()
    slower = tuple(op._replace(backward_time=op.backward_time * 2) if op.module.startswith("h.") else op for op in before.ops)
    after = dataclasses.replace(before, ops=slower)
    ratio = after.ratio_overlay(before)
    assert ratio.name == "backward_time_ratio" and ratio.rollup == "max"
    assert {node: value for node, value in ratio.values.items() if value != 1.0} == {"n1": 2.0, "n2": 2.0, "n3": 2.0, "n7": 2.0}
    assert ratio.tooltips["n1"].startswith("backward time 2.00x (")
    assert after.changes_since(before) == [
        "h backward time 2.00x slower (122.00 s, was 61.00 s)",
        "h.* backward time 2.00x slower (122.00 s, was 61.00 s)",
    ]
    assert before.changes_since(before) == [] and set(before.ratio_overlay(before).values.values()) == {1.0}
    assert after.changes_since(before, least=2.5) == []
