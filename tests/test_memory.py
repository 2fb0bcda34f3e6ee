"""The memory of a training step: the peak, what is alive at it, and the checkpoint advice, measured again after applying it."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest
import torch
from torch import nn

from graphviz_autograd import OptionError, StepProfile, make_dot, profile_step
from graphviz_autograd.checks.memory import (CPU_TIME, KINDS, WALL_TIME, CheckpointPlan, ModuleMemory, StepMemory,
                                             apply_checkpointing, parse_target)


class MLP(nn.Module):
    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.up = nn.Linear(width, hidden)
        self.act = nn.GELU()
        self.down = nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(self.act(self.up(x)))


class OneWideBlock(nn.Module):
    """Four residual MLP blocks, the first 32 times as wide as the others, and a large classifier
    head whose backward is the step's peak while the wide block's saved tensors wait for theirs."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([MLP(32, 1024), MLP(32, 32), MLP(32, 32), MLP(32, 32)])
        self.head = nn.Linear(32, 2048)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def wide_profile(model: nn.Module) -> StepProfile:
    torch.manual_seed(0)
    x, labels = torch.randn(512, 32), torch.randint(0, 2048, (512,))
    return profile_step(model, x, loss=lambda out: nn.functional.cross_entropy(out, labels), steps=1)


@pytest.fixture(scope="module")
def wide() -> tuple[OneWideBlock, StepProfile]:
    torch.manual_seed(0)
    model = OneWideBlock()
    return model, wide_profile(model)


def test_the_peak_is_split_by_kind_and_the_kinds_add_up_to_it(wide):
    model, profile = wide
    memory = profile.memory
    assert memory is not None and memory.device == "cpu"
    assert set(memory.at_peak) == set(KINDS)
    assert sum(memory.at_peak.values()) == pytest.approx(memory.peak)
    parameters = sum(p.numel() * p.element_size() for p in model.parameters())
    assert memory.at_peak["parameters"] == parameters
    assert memory.at_peak["optimizer_state"] == 0  # no optimizer given
    # The timeline starts where the step starts and its highest point is the peak.
    assert memory.timeline[0][0] == 0.0 and max(b for _, b, _ in memory.timeline) == memory.peak
    assert [p for _, _, p in memory.timeline] == sorted((p for _, _, p in memory.timeline), key=["forward", "backward"].index)
    assert memory.peak_phase == "backward"


def test_the_wide_block_is_first_in_the_peaks_activations_and_in_the_advice(wide):
    _, profile = wide
    memory = profile.memory
    blocks = [(path, value) for path, value in memory.activations_by_module() if path.startswith("blocks.")
              and path.count(".") == 1]
    assert blocks[0][0] == "blocks.0"
    assert all(blocks[0][1] > 10 * value for _, value in blocks[1:])
    # GELU's input (512 x 1024 floats) and the second Linear's (GELU's output) are alive at the peak.
    assert memory.module_activations["blocks.0"] >= 2 * 512 * 1024 * 4
    plan = memory.advice(0.9)
    assert plan.paths[0] == "blocks.0" and plan.reached
    assert plan.predicted_peak < memory.peak and plan.extra_time > 0
    # The extra time also as a share of a plain step on the same clock: the block's forward is part of it.
    assert 0 < plan.extra_time < plan.step_time == memory.step_time
    assert plan.extra_share == plan.extra_time / memory.step_time
    assert f"; {100 * plan.extra_share:.1f}% of a step)" in plan.text()


def test_the_predicted_peak_after_the_advice_is_within_a_tenth_of_the_measured_one(wide):
    model, profile = wide
    plan = profile.memory.advice(0.9)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    with plan.apply(model):
        assert all("forward" in vars(dict(model.named_modules())[path]) for path in plan.paths)
        after = wide_profile(model).memory
    assert not any("forward" in vars(module) for module in model.modules())  # undone
    assert all(torch.equal(p, before[name]) for name, p in model.named_parameters())
    assert after.peak < profile.memory.peak
    assert plan.predicted_peak == pytest.approx(after.peak, rel=0.10)


def test_runs_of_blocks_are_candidates_timed_by_their_blocks_and_dropping_what_passes_between_them(wide):
    _, profile = wide
    candidates = {m.path: m for m in profile.memory.modules}
    assert {"blocks.0-1", "blocks.1-3", "blocks.0-3"} <= set(candidates)
    assert candidates["blocks.0-3"].type_name == "MLP x4"
    run, first, second = candidates["blocks.0-1"], candidates["blocks.0"], candidates["blocks.1"]
    assert run.forward_time == pytest.approx(first.forward_time + second.forward_time)
    # The output of blocks.0, kept by a checkpoint of either block, is dropped by one of both.
    assert run.saved_at_peak > first.saved_at_peak + second.saved_at_peak
    assert not any(path in candidates for path in ("blocks", ""))  # the list itself runs nothing


def test_the_advice_takes_the_cheapest_candidate_that_reaches_the_target_alone(wide):
    _, profile = wide
    plan = profile.memory.advice(0.9)
    # blocks.0-3 would reach it too, for the forward time of four blocks.
    assert plan.paths == ("blocks.0",) and plan.reached
    assert plan.extra_time == next(m.cost for m in profile.memory.modules if m.path == "blocks.0")


def saves_in(model: nn.Module, path: str, x: torch.Tensor) -> int:
    """The tensors the module at ``path`` saves for backward in a forward of ``model``, counted by hooks."""
    module, inside, count = dict(model.named_modules())[path], [False], [0]

    def pack(tensor):
        count[0] += inside[0]
        return tensor

    handles = [module.register_forward_pre_hook(lambda *_: inside.__setitem__(0, True)),
               module.register_forward_hook(lambda *_: inside.__setitem__(0, False))]
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model(x)
    for handle in handles:
        handle.remove()
    return count[0]


def test_a_checkpoints_own_cost_is_measured_and_counted_per_call_and_per_tensor_it_saves(wide):
    # An MLP block saves each Linear's input and weight and the GELU's input (the first block
    # less, as the step's input needs no gradient): counted here by hooks of our own.
    model, profile = wide
    memory = profile.memory
    rates = memory.checkpoint_rates
    per_call, per_saved = rates.per_call, rates.per_saved
    assert per_call > 0 and per_saved >= 0
    # The checkpoint's call is paid in the forward; it is part of the whole.
    assert rates.forward_per_call > 0 and rates.own(4)[1] <= rates.own(4)[0]
    x = torch.randn(512, 32)
    saves = {f"blocks.{k}": saves_in(model, f"blocks.{k}", x) for k in range(4)}
    assert saves["blocks.1"] >= 4
    modules = {m.path: m for m in memory.modules}
    # On a CPU the launching is the forward itself: the overhead is the checkpoint's own.
    for path in ("blocks.0", "blocks.1"):
        assert modules[path].overhead == pytest.approx(per_call + saves[path] * per_saved)
    assert modules["blocks.0"].cost == modules["blocks.0"].forward_time + modules["blocks.0"].overhead
    # A run of blocks is one checkpoint: one call, and the tensors of all its blocks.
    assert modules["blocks.0-3"].overhead == pytest.approx(per_call + sum(saves.values()) * per_saved)
    assert StepMemory.from_dict(json.loads(json.dumps(memory.to_dict()))).modules == memory.modules


class Chained(nn.Module):
    def __init__(self, chained: bool = True) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([MLP(8, 16) for _ in range(4)])
        self.chained = chained

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.chained:  # every block on the input: no run of them can be one checkpoint
            return sum(block(x) for block in self.blocks)
        for block in self.blocks:
            x = block(x)
        return x


class SixAlike(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([MLP(32, 512) for _ in range(6)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


def test_a_run_of_blocks_advised_lowers_the_peak_to_within_a_tenth_of_its_prediction():
    torch.manual_seed(0)
    model, x = SixAlike(), torch.randn(512, 32)

    def measured() -> StepMemory:
        return profile_step(model, x, loss=lambda out: out.square().mean(), steps=1).memory

    before = measured()
    plan = before.advice(0.6)
    # A run of the first blocks, which wait longest for their backward, drops the most per block.
    assert plan.reached and any("-" in path for path in plan.paths), plan.paths
    with plan.apply(model):
        after = measured()
    assert after.peak < 0.7 * before.peak
    assert plan.predicted_peak == pytest.approx(after.peak, rel=0.10)


def test_a_run_of_blocks_checkpointed_as_one_gives_the_same_gradients_and_is_undone():
    torch.manual_seed(0)
    model, x = Chained(), torch.randn(3, 8)
    model(x).square().sum().backward()
    expected = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()
    calls = []
    model.blocks[2].register_forward_hook(lambda *_: calls.append(2))
    with apply_checkpointing(model, ["blocks.1-3"]):
        model(x).square().sum().backward()
    assert not any("forward" in vars(module) for module in model.modules())
    assert all(torch.allclose(p.grad, expected[name]) for name, p in model.named_parameters())
    # blocks.2 ran in the forward, again when backward remade the run, and was called by the loop.
    assert len(calls) == 3


def _conv_bn_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU()) for _ in range(3)])


@pytest.mark.parametrize("paths", [["1"], ["0-2"]])
def test_a_checkpointed_batchnorm_counts_the_step_once_in_its_running_statistics(paths):
    # Backward runs a checkpointed block's forward again: its BatchNorm must not move its
    # running mean and variance a second time.
    x = torch.randn(2, 4, 6, 6, generator=torch.Generator().manual_seed(1))
    plain, checkpointed = _conv_bn_net(), _conv_bn_net()
    plain(x).sum().backward()
    with apply_checkpointing(checkpointed, paths):
        checkpointed(x).sum().backward()
    for ours, theirs in zip(checkpointed.modules(), plain.modules()):
        if isinstance(ours, nn.BatchNorm2d):
            assert ours.num_batches_tracked.item() == theirs.num_batches_tracked.item() == 1
            assert torch.allclose(ours.running_mean, theirs.running_mean)
            assert torch.allclose(ours.running_var, theirs.running_var)
    assert all(torch.allclose(a.grad, b.grad, atol=1e-6) for a, b in zip(checkpointed.parameters(), plain.parameters()))


def test_a_run_of_blocks_that_are_not_called_one_on_anothers_output_is_a_named_error():
    model = Chained(chained=False)
    with apply_checkpointing(model, ["blocks.0-1"]), pytest.raises(OptionError, match="one by one"):
        model(torch.randn(3, 8))
    with pytest.raises(OptionError, match="no module 'blocks.2-5'"):
        apply_checkpointing(model, ["blocks.2-5"])


def test_the_overlay_puts_the_saved_bytes_on_the_graphs_nodes_and_sums_them_onto_modules(wide):
    _, profile = wide
    overlay = profile.memory.overlay()
    ids = {node.id for node in profile.graph.nodes}
    assert overlay.name == "peak_memory" and overlay.unit == "B" and set(overlay.values) <= ids
    assert sum(overlay.values.values()) == profile.memory.at_peak["activations"]
    modules = {node.id: node.module for node in profile.graph.nodes}
    wide_nodes = sum(v for node_id, v in overlay.values.items() if modules[node_id].startswith("blocks.0"))
    assert wide_nodes == profile.memory.module_activations["blocks.0"]
    source = make_dot(profile.graph, overlays=[overlay], depth=2).source
    assert "alive at the peak" in source


def test_memory_survives_json_with_its_advice(wide):
    _, profile = wide
    data = json.loads(profile.to_json(memory_target=0.9))
    assert data["memory"]["advice"]["modules"][0]["path"] == "blocks.0"
    again = StepProfile.from_dict(data)
    assert again.memory is not None
    assert again.memory.advice(0.9) == profile.memory.advice(0.9) and again.memory.step_time == profile.memory.step_time > 0
    assert data["memory"]["advice"]["extra_share"] == profile.memory.advice(0.9).extra_share
    assert again.table(memory_target=0.9) == profile.table(memory_target=0.9)
    assert StepMemory.from_dict(profile.memory.to_dict()).module_activations == profile.memory.module_activations


def test_a_saved_tensor_is_held_once_by_all_the_candidates_that_drop_it_and_so_when_read_back(wide):
    # Runs of blocks repeat their blocks' saved tensors (a GPT-2 of 48 layers: 432,189 among
    # 1,513 candidates); each tensor, dropped as the same call, is one entry for all of them.
    _, profile = wide
    modules = {m.path: m for m in profile.memory.modules}
    run, block = modules["blocks.0-3"], modules["blocks.1"]
    assert {id(e) for e in block.saved} <= {id(e) for e in run.saved}
    again = StepMemory.from_dict(json.loads(json.dumps(profile.memory.to_dict())))
    assert again.modules == profile.memory.modules
    for memory in (profile.memory, again):
        entries = [e for m in memory.modules for e in m.saved]
        assert len({id(e) for e in entries}) == len(set(entries)) < len(entries)


def test_the_json_writes_each_candidates_saved_tensors_as_ranges_and_reads_the_earlier_pairs(wide):
    _, profile = wide
    data = json.loads(json.dumps(profile.memory.to_dict()))
    written = {m["path"]: m["saved"] for m in data["modules"]}
    # The largest candidate, written first, takes its tensors' indices in order: one range.
    assert written["blocks.0-3"] == [[0, len(data["saved_tensors"]), 0]]
    assert sum(len(ranges) for ranges in written.values()) < sum(count for ranges in written.values() for _, count, _ in ranges)
    # Written before as a pair of index and call per saved tensor: read back the same.
    for module in data["modules"]:
        module["saved"] = [[first + k, call] for first, count, call in module["saved"] for k in range(count)]
    assert StepMemory.from_dict(data).modules == profile.memory.modules


class WaitingMLP(MLP):
    """An MLP block whose forward first waits: time that passes but that the process does not work."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.05)
        return super().forward(x)


@pytest.mark.parametrize("threads, clock", [(1, CPU_TIME), (2, WALL_TIME)])
def test_on_one_cpu_thread_a_forward_is_timed_by_the_processs_cpu_time_that_waiting_does_not_add_to(threads, clock):
    model = OneWideBlock()
    model.blocks[0] = WaitingMLP(32, 1024)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        memory = wide_profile(model).memory
    finally:
        torch.set_num_threads(before)
    assert memory is not None and memory.clock == clock
    waiting = next(m for m in memory.modules if m.path == "blocks.0")
    # Its own work (two small matrix products) is a few milliseconds; the wait is 50.
    assert (waiting.forward_time < 0.025) if clock == CPU_TIME else (waiting.forward_time >= 0.05)
    plan = memory.advice(0.9)
    assert plan.paths == ("blocks.0",) and plan.clock == clock and f"longer ({clock}; " in plan.text()
    # The plain step it is a share of is read on the same clock: the wait is in it on the wall clock only.
    assert (memory.step_time < 0.05) if clock == CPU_TIME else (memory.step_time >= 0.05)
    assert StepMemory.from_dict(json.loads(json.dumps(memory.to_dict()))).advice(0.9) == plan


def test_a_target_is_a_fraction_of_the_peak_or_bytes():
    assert parse_target("0.5") == 0.5 and parse_target("2MiB") == 2 * 2**20 and parse_target("3 GB") == 3e9
    with pytest.raises(OptionError):
        parse_target("half")


def test_applying_checkpoints_to_a_module_that_is_not_there_is_a_named_error():
    model = nn.Sequential(nn.Linear(2, 2))
    with pytest.raises(OptionError, match="no module 'h.0'"):
        apply_checkpointing(model, ["h.0"])
    assert "forward" not in vars(model[0])


def test_memory_is_left_out_when_not_asked_for():
    model = nn.Linear(3, 1)
    assert profile_step(model, torch.ones(2, 3), steps=1, memory=False).memory is None


def test_gpt2_predicted_peak_after_the_advice_is_within_a_tenth_of_the_measured_one():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=256, n_positions=128,
                                     attn_implementation="eager", use_cache=False)
    model = transformers.GPT2LMHeadModel(config)
    tokens = torch.randint(0, 256, (2, 128))
    inputs = {"input_ids": tokens, "labels": tokens}
    optimizer = torch.optim.AdamW(model.parameters())
    profile = profile_step(model, inputs, loss=lambda out: out.loss, optimizer=optimizer, steps=1)
    memory = profile.memory
    assert memory.at_peak["optimizer_state"] > 0 and memory.at_peak["activations"] > 0
    plan = memory.advice(0.85)
    assert plan.modules and all(path.startswith("transformer.h.") for path in plan.paths)
    with plan.apply(model):
        after = profile_step(model, inputs, loss=lambda out: out.loss, optimizer=optimizer, steps=1).memory
    assert plan.predicted_peak == pytest.approx(after.peak, rel=0.10)


def test_what_is_alive_at_the_peak_holds_when_the_profilers_clock_is_off_from_the_systems(wide, monkeypatch):
    # The profiler stamps its events by its own cycle counter turned into epoch time, the hooks by
    # time.time_ns(). On a virtual machine the two can be seconds apart: the hooks' stamps are put
    # on the profiler's clock by anchors stamped on both, else every saved tensor reads as packed
    # after the peak (none alive at it) or unpacked before it.
    import graphviz_autograd.checks.memory as memory_module

    _, profile = wide
    expected = profile.memory.at_peak
    for offset in (-30_000_000_000, 30_000_000_000):
        class Shifted:
            def __getattr__(self, name):
                return getattr(time, name)

            @staticmethod
            def time_ns(offset=offset):
                return time.time_ns() + offset

        monkeypatch.setattr(memory_module, "time", Shifted())
        torch.manual_seed(0)
        shifted = wide_profile(OneWideBlock()).memory
        assert shifted.peak_phase == "backward"
        for kind in ("activations", "gradients"):
            assert shifted.at_peak[kind] == pytest.approx(expected[kind], rel=0.05), (offset, kind)
        assert shifted.module_activations["blocks.0"] == pytest.approx(profile.memory.module_activations["blocks.0"], rel=0.05)


def test_no_step_of_the_profile_keeps_an_earlier_steps_output_alive():
    # On CUDA the memory step reads the allocator, which counts every tensor alive: an output the
    # profile kept from an earlier step was counted in its peak (4 MiB of 88 on the model below).
    import gc
    import weakref

    model = OneWideBlock()
    outputs: list[weakref.ref] = []
    alive_at_forward: list[int] = []

    def before(module, args):
        gc.collect()
        alive_at_forward.append(sum(ref() is not None for ref in outputs))

    def after(module, args, output):
        outputs.append(weakref.ref(output))

    model.register_forward_pre_hook(before)
    model.register_forward_hook(after)
    profile_step(model, torch.randn(64, 32), steps=2)
    assert len(alive_at_forward) >= 6 and max(alive_at_forward) == 0, alive_at_forward


def test_the_profile_keeps_its_copies_of_parameters_and_optimizer_state_off_their_device():
    from graphviz_autograd.checks.profiling import _host_copy

    state = {"state": {0: {"step": torch.tensor(3.0), "exp_avg": torch.ones(2, dtype=torch.float16)}},
             "param_groups": [{"lr": 0.1, "params": [0]}]}
    copied = _host_copy(state)
    assert copied["state"][0]["exp_avg"].dtype == torch.float16 and copied["param_groups"] == state["param_groups"]
    assert copied["state"][0]["exp_avg"].data_ptr() != state["state"][0]["exp_avg"].data_ptr()
    assert all(t.device.type == "cpu" for t in copied["state"][0].values())


def test_clock_anchors_take_the_least_offset_near_a_moment_so_a_late_anchor_moves_nothing():
    from graphviz_autograd.checks.memory import _ClockAnchors

    anchors = _ClockAnchors()
    anchors.ours = list(range(100, 1100, 100))  # ten anchors, 100 apart
    # The profiler's clock 1000 ahead; anchor 4's second stamp taken 5000 late (the process put aside).
    late = {k: when + 1000 + (5000 if k == 4 else 0) for k, when in enumerate(anchors.ours)}
    mapped = anchors.mapping(late)
    assert [mapped(t) for t in (50, 450, 500, 550, 1050)] == [1050, 1450, 1500, 1550, 2050]
    # A clock that drifts over the step (10 each anchor) is followed, within the anchors near a moment.
    drifting = anchors.mapping({k: when + 1000 + 10 * k for k, when in enumerate(anchors.ours)})
    assert [drifting(t) for t in (50, 550, 1050)] == [1050, 550 + 1030, 1050 + 1080]
    assert anchors.mapping({})(123) == 123


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_the_peak_is_the_allocators():
    model = OneWideBlock().cuda()
    x = torch.randn(512, 32, device="cuda")
    memory = profile_step(model, x, steps=1).memory
    assert memory.device.startswith("cuda") and "allocator" in memory.source
    assert memory.peak >= max(b for _, b, _ in memory.timeline) * 0.95
    # The same step by hand, from no gradients: its allocator's peak is the one measured, and
    # what is alive at it is read at it (the wide block's saved tensors, in the backward).
    model.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    out = model(x)
    out.backward(torch.ones_like(out))
    del out
    torch.cuda.synchronize()
    assert memory.peak == pytest.approx(torch.cuda.max_memory_allocated(), rel=0.05)
    assert memory.peak_phase == "backward" and not any("allocator" in note for note in memory.notes)
    # So small a step keeps the GPU waiting on the CPU's launches: the advice says its time may be low.
    assert any("bound by launching its kernels" in note for note in memory.notes)
    assert all(m.forward_time > 0 for m in memory.modules)
    assert memory.at_peak["activations"] > 0 and memory.module_activations["blocks.0"] > 0
    # On CUDA a checkpoint adds at least the forward it runs again.
    assert memory.modules and all(m.cost >= m.forward_time for m in memory.modules)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_a_busy_gpus_queue_hides_a_checkpoints_cpu_work():
    # Six blocks of two large matrix products: the GPU takes milliseconds over each, the CPU
    # microseconds to launch it, so from the second block on the GPU has work queued, and a
    # checkpoint's own CPU work (a millisecond or so) runs while the GPU works through it. Each
    # block's GELU saves the product before it, which a checkpoint of the block drops.
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(4096, 4096), nn.GELU(), nn.Linear(4096, 4096)) for _ in range(6)]).cuda()
    x = torch.randn(8192, 4096, device="cuda")
    memory = profile_step(model, x, steps=1).memory
    assert not any("bound by launching" in note for note in memory.notes)
    later = [m for m in memory.modules if m.path in ("2", "3", "4")]
    assert len(later) == 3
    assert all(m.backlog[0] > 0 and m.backlog[1] > 0 for m in later)
    assert all(m.overhead == 0 and m.cost == m.forward_time for m in later)


def test_the_profile_command_prints_the_peak_and_the_advice_and_writes_them_in_its_json():
    from click.testing import CliRunner

    from graphviz_autograd.cli.commands import main

    model = "samples/mnist_cnn.py"
    result = CliRunner().invoke(main, ["profile", model, "--steps", "1", "-q", "--json", "--memory-target", "0.5"])
    assert result.exit_code == 0, result.output
    memory = json.loads(result.output)["memory"]
    assert memory["advice"]["target"] == pytest.approx(0.5 * memory["peak"])
    assert set(memory["at_peak"]) == set(KINDS)
    table = CliRunner().invoke(main, ["profile", model, "--steps", "1", "-q", "--memory-target", "1MiB"])
    assert table.exit_code == 0 and "alive at the peak: parameters" in table.output
    assert "under 1.0 MiB" in table.output
    bad = CliRunner().invoke(main, ["profile", model, "-q", "--memory-target", "half"])
    assert bad.exit_code == 1 and "a target peak is a fraction of the peak" in bad.output
    plain = CliRunner().invoke(main, ["profile", model, "--steps", "1", "-q", "--no-memory", "--json"])
    assert "memory" not in json.loads(plain.output)


def test_render_profile_writes_a_page_with_the_steps_memory(tmp_path):
    from click.testing import CliRunner

    from graphviz_autograd.cli.commands import main

    target = tmp_path / "mnist.html"
    result = CliRunner().invoke(main, ["render", "samples/mnist_cnn.py", "--profile", "-o", str(target), "-q"])
    assert result.exit_code == 0, result.output
    text = target.read_text()
    data = json.loads(text[text.index('id="graph-data">') + len('id="graph-data">'):text.index("</script>")])
    memory = data["memory"]
    assert memory["kinds"] == list(KINDS) and memory["peak"] > 0
    assert all(len(point[3]) == len(KINDS) for point in memory["points"])
    # Saved tensors by page node index, each [saved at, last read at, bytes].
    assert memory["saved"] and all(0 <= k < len(data["nodes"]) and spans[0][0] <= spans[0][1]
                                   for k, spans in memory["saved"])


def test_the_whole_forward_is_timed_to_its_launch_and_to_the_device_being_done():
    from graphviz_autograd.checks.memory import _whole_forward

    now = [0.0]

    def clock():  # each reading a second after the last
        now[0] += 1.0
        return now[0]

    def synchronize():  # the device is done ten seconds after the call returns
        now[0] += 10.0

    model = nn.Linear(2, 2)
    with _whole_forward(model, synchronize, clock) as spans:
        model(torch.ones(1, 2))
        model(torch.ones(1, 2))
    assert spans == [(1.0, 12.0), (1.0, 12.0)]
    model(torch.ones(1, 2))  # its hooks are gone
    assert len(spans) == 2
    with _whole_forward(None, synchronize, clock) as nothing:
        pass
    assert nothing == []


def test_on_cuda_each_modules_forward_time_is_read_from_events_recorded_around_its_calls(monkeypatch):
    from graphviz_autograd.checks import memory as checks_memory

    now = [0.0]

    class Event:  # a CUDA event whose GPU reaches it a second after the last one
        def __init__(self, enable_timing: bool = False) -> None:
            self.at = None

        def record(self) -> None:
            now[0] += 1.0
            self.at = now[0]

        def elapsed_time(self, end: "Event") -> float:
            return (end.at - self.at) * 1e3  # milliseconds, as CUDA's

    waits = []
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *_: waits.append(now[0]))
    model = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.ReLU(), nn.Tanh()))
    times: dict[str, float] = {}
    with checks_memory._module_timer_on_gpu(model, times):
        model(torch.ones(1, 2))
        assert waits == []  # nothing waits for the GPU inside the step
    # Events in order: 0 in, 0 out, 1 in, 1.0 in, 1.0 out, 1.1 in, 1.1 out, 1 out.
    assert times == {"0": 1.0, "1": 5.0, "1.0": 1.0, "1.1": 1.0}
    assert waits == [8.0]  # once, after the step, to read the events
    model(torch.ones(1, 2))  # its hooks are gone
    assert now[0] == 8.0


class Looped(nn.Module):
    """One residual MLP cell called six times on its own output, as a recurrent cell is, then a head."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = MLP(32, 512)
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(6):
            x = self.cell(x)
        return self.head(x)


def classifier_step(model: nn.Module):
    """A step of ``model`` on 256 random rows of 32 features, cross entropy over 10 classes: its
    memory, and the input and loss to take it again."""
    torch.manual_seed(0)
    x, labels = torch.randn(256, 32), torch.randint(0, 10, (256,))

    def loss(out):
        return nn.functional.cross_entropy(out, labels)

    return profile_step(model, x, loss=loss, steps=1).memory, x, loss


def test_a_module_called_in_a_loop_drops_its_other_calls_tensors_while_backward_remakes_one_calls():
    # A checkpoint of the cell remakes one call's tensors at a time in backward; the other calls'
    # stay dropped. Counting the whole stretch of backward over all six calls as remade, the
    # advice found the cell of no use, and the target out of reach.
    model = Looped()
    memory, x, loss = classifier_step(model)
    cell = next(m for m in memory.modules if m.path == "cell")
    assert len(cell.backward) == 6 and {call for *_, call in cell.saved} == set(range(6))
    rates = memory.checkpoint_rates
    # Six checkpoint calls, each paid for.
    assert cell.overhead == pytest.approx(rates.own(saves_in(model, "cell", x), calls=6)[0])
    plan = memory.advice(0.6)
    assert plan.reached and plan.paths == ("cell",)
    with plan.apply(model):
        after = profile_step(model, x, loss=loss, steps=1).memory
    assert after.peak < 0.6 * memory.peak
    assert plan.predicted_peak == pytest.approx(after.peak, rel=0.10)


class TwoPasses(nn.Module):
    """Three residual MLP blocks, gone over twice, then a head."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([MLP(32, 512) for _ in range(3)])
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(2):
            for block in self.blocks:
                x = block(x)
        return self.head(x)


def test_a_run_of_blocks_gone_over_twice_is_remade_one_pass_at_a_time():
    model = TwoPasses()
    memory, x, loss = classifier_step(model)
    runs = [m for m in memory.modules if "-" in m.path]
    assert runs and all(len(m.backward) == 2 for m in runs)
    for target in (0.7, 0.5):
        plan = memory.advice(target)
        with plan.apply(model):
            after = profile_step(model, x, loss=loss, steps=1).memory
        assert plan.reached and after.peak <= plan.target * 1.05
        assert plan.predicted_peak == pytest.approx(after.peak, rel=0.10)


@pytest.mark.parametrize("model", [OneWideBlock, Looped, TwoPasses])
def test_the_bytes_a_candidate_drops_over_the_timeline_are_those_at_each_moment(model):
    # The advice replays every candidate over the whole timeline at once; each point must read
    # as the candidate's drop at that moment, its remade calls left out.
    torch.manual_seed(0)
    net = model()
    x = torch.randn(256, 32)
    memory = profile_step(net, x, loss=lambda out: out.square().mean(), steps=1).memory
    times = torch.tensor([t for t, _, _ in memory.timeline], dtype=torch.float64)
    assert memory.modules
    for module in memory.modules:
        expected = torch.tensor([module.dropped_at(float(t)) for t in times], dtype=torch.float64)
        assert torch.allclose(module.dropped_over(times), expected), module.path


def test_a_candidate_written_before_calls_were_told_apart_reads_as_one_call():
    old = {"path": "blocks.0", "type_name": "MLP", "saved_at_peak": 4.0, "forward_time": 0.1,
           "saved": [[0.0, 0.9, 4.0]], "backward": [0.8, 0.9], "overhead": 0.01}
    module = ModuleMemory.from_dict(old)
    assert module.saved == ((0.0, 0.9, 4.0, 0),) and module.backward == ((0.8, 0.9),)
    assert module.dropped_at(0.5) == 4.0 and module.dropped_at(0.85) == 0.0
    assert ModuleMemory.from_dict(json.loads(json.dumps(module.to_dict()))) == module


class _Queue:
    """A stand-in GPU: work runs in the order launched, each piece once the CPU has launched it
    and the GPU is done with the last; the CPU's clock moves only where a test moves it."""

    def __init__(self) -> None:
        self.cpu, self.free = 0.0, 0.0

    def launch(self, work: float) -> None:
        self.free = max(self.free, self.cpu) + work

    def reached(self) -> float:  # when the GPU reaches an event recorded now
        return max(self.free, self.cpu)

    def wait(self) -> None:
        self.cpu = self.reached()


class _Launching(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, stage):
        ctx.stage = stage
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        queue, (_, _, cpu, gpu) = ctx.stage
        queue.cpu += cpu
        queue.launch(gpu)
        return grad, None


class _Stage(nn.Module):
    """A module whose forward and backward each take the CPU some time to launch some GPU work."""

    def __init__(self, queue: _Queue, cpu_forward: float, gpu_forward: float, cpu_backward: float, gpu_backward: float):
        super().__init__()
        self.stage = (queue, (cpu_forward, gpu_forward, cpu_backward, gpu_backward))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        queue, (cpu, gpu, _, _) = self.stage
        queue.cpu += cpu
        queue.launch(gpu)
        return _Launching.apply(x, self.stage)


def _queued_events(monkeypatch, queue: _Queue) -> None:
    class Event:
        def __init__(self, enable_timing: bool = False) -> None:
            self.at = None

        def record(self) -> None:
            self.at = queue.reached()

        def elapsed_time(self, end: "Event") -> float:
            return (end.at - self.at) * 1e3  # milliseconds, as CUDA's

    monkeypatch.setattr(torch.cuda, "Event", Event)


def test_on_cuda_the_gpus_queue_is_read_where_each_module_starts_where_backward_reaches_it_and_at_the_end(monkeypatch):
    from graphviz_autograd.checks import memory as checks_memory

    queue = _Queue()
    _queued_events(monkeypatch, queue)
    # The GPU's forward work outlasts the CPU's launching; the middle stage's backward is long
    # CPU work (the GPU runs dry there); each stage's backward is launched after its gradient.
    model = nn.Sequential(_Stage(queue, 1, 3, 1, 3), _Stage(queue, 1, 1, 8, 1), _Stage(queue, 1, 3, 1, 3))
    found: list = []
    with checks_memory._gpu_backlog(model, found, queue.wait, clock=lambda: queue.cpu):
        model(torch.ones(2, requires_grad=True)).sum().backward()
    [backlog] = found
    # Marks: forward 0, 1, 2 at CPU 0, 1, 2; backward reaches 2, 1, 0 at 3, 4, 12; the end at 13.
    # The GPU is done with 4, 5, 8 of forward work there; 11 and 13 of backward's.
    assert backlog.lags == (0.0, 3.0, 3.0, 5.0, 7.0, 1.0, 3.0)
    assert backlog.forward_at == {"0": 0, "1": 1, "2": 2}
    assert backlog.backward_at == {"2": 3, "1": 4, "0": 5}
    # From a module's forward to backward reaching it, then to the end: the least queue of each.
    assert backlog.hidden(["2"]) == (3.0, 1.0)
    assert backlog.hidden(["0"]) == (0.0, 1.0)
    assert backlog.hidden(["1", "2"]) == (3.0, 1.0)  # a run: from its first forward to backward reaching its last block
    assert backlog.hidden(["absent"]) == (0.0, 0.0)
    # The hooks are gone: another step records nothing.
    model(torch.ones(2, requires_grad=True)).sum().backward()
    assert len(found) == 1 and len(backlog.lags) == 7


def test_a_gpus_queue_that_hides_the_checkpoints_cpu_work_leaves_the_recompute_alone_as_its_cost(monkeypatch):
    # On a CPU there is no queue: a checkpoint costs its forward and its own work. Where the GPU
    # had work queued all along, more than that CPU work, the recompute's time is all it adds.
    from graphviz_autograd.checks import memory as checks_memory

    candidates = checks_memory._candidates
    queued: list = []

    def with_queue(*args):
        return candidates(*args[:-1], queued)

    monkeypatch.setattr(checks_memory, "_candidates", with_queue)
    plain = {m.path: m for m in wide_profile(OneWideBlock()).memory.modules}
    assert all(m.overhead > 0 and m.backlog == (0.0, 0.0) for m in plain.values())
    paths = [p for p, _ in OneWideBlock().named_modules() if p]
    at = {p: k for k, p in enumerate(paths)}
    queued.append(checks_memory._GpuBacklog((10.0,) * (2 * len(paths) + 1), at, {p: len(paths) + k for p, k in at.items()}))
    memory = wide_profile(OneWideBlock()).memory
    hidden = {m.path: m for m in memory.modules}
    assert hidden.keys() == plain.keys()
    assert all(m.overhead == 0 and m.backlog == (10.0, 10.0) for m in hidden.values())
    # Several checkpoints share one queue: their CPU work together is what it must outlast.
    three = [hidden[p] for p in ("blocks.1", "blocks.2", "blocks.3")]
    assert checks_memory.plan_extra_time(three) == pytest.approx(sum(m.forward_time for m in three))
    cpu = sum(m.cpu_work[1] for m in three)
    assert cpu > 0 and all(m.cpu_work[1] < 0.8 * cpu for m in three)
    short = [replace(m, forward_time=0.0, backlog=(10.0, 0.8 * cpu)) for m in three]  # each alone hidden
    assert checks_memory.plan_extra_time(short) == pytest.approx(0.2 * cpu)


def test_on_cuda_the_advice_weighs_each_candidate_by_what_it_adds_beside_those_chosen():
    # Three candidates, each dropping 20 of a 100-byte peak; a target of 65 takes two. `a` is
    # taken first. Alone, `b` costs less than `c` (its forward is shorter), but its CPU work
    # and `a`'s together outlast the queue they share, where `c`'s and `a`'s do not.
    from graphviz_autograd.checks.memory import plan_extra_time

    def candidate(path: str, forward: float, cpu: tuple[float, float]) -> ModuleMemory:
        return ModuleMemory(path, "Block", 20.0, forward, ((0.0, 2.0, 20.0, 0),), ((1.5, 2.0),), (4.0, 4.0), cpu)

    a, b, c = candidate("a", 1.0, (0.5, 3.5)), candidate("b", 1.0, (0.5, 3.5)), candidate("c", 1.4, (0.1, 0.2))
    assert b.cost < c.cost
    assert plan_extra_time([a, c]) < plan_extra_time([a, b])
    timeline = ((0.0, 10.0, "forward"), (1.0, 100.0, "backward"), (2.0, 50.0, "backward"))
    memory = StepMemory("cuda", "test", 100.0, 1.0, "backward", {}, 0.0, timeline, {}, {}, (a, b, c), {})
    plan = memory.advice(0.65)
    assert plan.paths == ("a", "c") and plan.reached and plan.predicted_peak == pytest.approx(60.0)
    assert plan.extra_time == pytest.approx(plan_extra_time([a, c]))
    # With no queue (a CPU), what each adds is its own cost, `a` and `b` each paying all of
    # their CPU work: `c`, then `a`.
    on_cpu = replace(memory, modules=tuple(replace(m, backlog=(0.0, 0.0)) for m in (a, b, c))).advice(0.65)
    assert on_cpu.paths == ("c", "a") and on_cpu.extra_time == pytest.approx(sum(m.cost for m in on_cpu.modules))


def _queued_step(forward, backward, checkpoints):
    """A stand-in step on a GPU queue (:class:`_Queue`'s rules): modules' forwards in order, then
    their backwards in reverse, each a list of kernels (CPU time to launch, GPU work). A
    checkpoint of module ``m`` (``checkpoints[m]``: its own CPU work in the forward, and in
    backward before the recompute) adds that work and the forward's kernels again. Returns the
    step's time and the queue at each mark, with each module's first mark in the forward and
    where backward reaches it, as :func:`_gpu_backlog` marks them."""
    from graphviz_autograd.checks.memory import _GpuBacklog

    queue, lags, forward_at, backward_at = _Queue(), [], {}, {}

    def launch(kernels):
        for cpu, gpu in kernels:
            queue.cpu += cpu
            queue.launch(gpu)

    for m, kernels in enumerate(forward):
        forward_at[str(m)] = len(lags)
        lags.append(queue.reached() - queue.cpu)
        queue.cpu += checkpoints.get(m, (0.0, 0.0))[0]
        launch(kernels)
    for m in reversed(range(len(backward))):
        backward_at[str(m)] = len(lags)
        lags.append(queue.reached() - queue.cpu)
        if m in checkpoints:
            queue.cpu += checkpoints[m][1]
            launch(forward[m])
        launch(backward[m])
    lags.append(queue.reached() - queue.cpu)
    return queue.reached(), _GpuBacklog(tuple(lags), forward_at, backward_at)


@pytest.mark.parametrize("gpu", [0.3, 1.0, 3.0])
def test_a_checkpoints_extra_time_on_a_gpu_queue_is_the_one_predicted_from_the_queue_read_at_the_marks(gpu):
    # Random steps of twelve modules of eight kernels each, launch-bound (the GPU's work a third
    # of the CPU's), even, and GPU-bound; a checkpoint of one module, then of two, with random
    # own work. Predicted from the plain step's queue at the marks, as the profile reads it.
    import random

    from graphviz_autograd.checks.memory import checkpoint_extra_time, plan_extra_time

    rng = random.Random(0)

    def module(cpu, work):
        return [(rng.uniform(0.5, 1.5) * cpu / 8, rng.uniform(0.2, 1.8) * work / 8) for _ in range(8)]

    singles, pairs = [], []
    for _ in range(300):
        forward = [module(rng.uniform(0.3, 1.0), gpu * rng.uniform(0.3, 1.5)) for _ in range(12)]
        backward = [module(rng.uniform(0.5, 1.5), gpu * rng.uniform(0.6, 3.0)) for _ in range(12)]
        plain, backlog = _queued_step(forward, backward, {})
        chosen = {m: (rng.uniform(0, 0.5), rng.uniform(0, 0.8)) for m in rng.sample(range(1, 11), 2)}
        modules = []
        for m, (own_forward, own_backward) in chosen.items():
            work, launch = sum(w for _, w in forward[m]), sum(c for c, _ in forward[m])
            own = own_forward + own_backward
            modules.append(ModuleMemory(str(m), "M", 1.0, work, backlog=backlog.hidden([str(m)]),
                                        cpu_work=(own_forward, launch + own)))
            assert modules[-1].cost == checkpoint_extra_time(work, own_forward, launch + own, backlog.hidden([str(m)]))
        m = next(iter(chosen))
        singles.append((_queued_step(forward, backward, {m: chosen[m]})[0] - plain) / modules[0].cost)
        pairs.append((_queued_step(forward, backward, chosen)[0] - plain) / plan_extra_time(modules))
    for ratios in (singles, pairs):
        ratios.sort()
        assert ratios[len(ratios) // 2] == pytest.approx(1.0, abs=0.03)
        assert sum(abs(r - 1) <= 0.2 for r in ratios) >= 0.95 * len(ratios)


def test_the_plan_says_where_the_gpus_queue_hid_the_checkpoints_own_work():
    hidden = ModuleMemory("layer2.1", "BasicBlock", 3e8, 0.001, backlog=(0.0032, 0.0041))
    open_ = ModuleMemory("layer1.1", "BasicBlock", 3e8, 0.001, backlog=(0.0, 0.0012), cpu_work=(0.0, 0.0026))  # 0.4 ms over
    text = CheckpointPlan(5e9, 5.5e9, 5.2e9, 0.0024, (hidden, open_), True).text()
    assert "the GPU had at least 3.2 ms of work queued under it:" in text
    # On a CPU, or where the queue ran dry under every checkpoint, nothing is said.
    assert "queued" not in CheckpointPlan(5e9, 5.5e9, 5.2e9, 0.0014, (open_,), True).text()


def test_a_step_that_runs_on_waits_for_the_device_only_where_asked(monkeypatch):
    # The steps reading events on CUDA run as in a training loop: the CPU launches backward while
    # the GPU still runs the forward, so what the GPU has queued is a training loop's.
    from graphviz_autograd.checks.profiling import StepRunner, step_forward

    model = nn.Linear(4, 2)
    x = torch.randn(3, 4)
    runner = StepRunner(model, step_forward("profile_step", model, x, lambda out: out.sum(), None),
                        torch.optim.SGD(model.parameters(), lr=0.1), x)
    waits = []
    monkeypatch.setattr(runner, "synchronize", lambda: waits.append(1))
    runner.step("waiting")
    assert len(waits) == 3  # after the forward, the backward and the optimizer's step
    waits.clear()
    runner.step("running on", wait=False)
    assert waits == [] and model.weight.grad is not None


def test_the_cost_of_measuring_memory_counts_all_its_work(monkeypatch):
    # The timing steps, the checkpoint's rates and the memory step are all work that memory=True
    # adds: a slow measurement of the rates shows in what measuring memory is said to cost.
    import graphviz_autograd.checks.memory as memory_module

    def slow_rates(*_, **__):
        time.sleep(0.3)
        return memory_module.CheckpointRates()

    monkeypatch.setattr(memory_module, "checkpoint_cost", slow_rates)
    memory = wide_profile(OneWideBlock()).memory
    assert memory.measure_time >= 0.3 + 2 * memory.plain_step_time
