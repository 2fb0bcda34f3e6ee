"""The benchmark script runs and prints its table. A smoke test: no time is asserted."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COLUMNS = [
    "graph", "nodes", "edges", "bare ms", "bare+leaves ms", "floor ms", "walk ms", "walk+dot ms", "first ms", "plain ms",
    "torchviz ms", "ours/bare", "ours/bare+leaves", "floor/bare", "ours/floor", "plain/floor", "torchviz/ours", "torchviz/first", "peak MiB",
]


def run_module(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_benchmark_prints_a_table_for_the_smallest_chain():
    done = run_module("benchmarks", "--only", "chain-10k", "--repeat", "1")
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("|")]
    header, _rule, row = rows
    assert [cell.strip() for cell in header.strip("|").split("|")] == COLUMNS
    cells = dict(zip(COLUMNS, (cell.strip() for cell in row.strip("|").split("|"))))
    assert cells["graph"] == "chain-10k"
    # y = y * 1.0001: the number is part of each op, not an input of its own, so n + 3 nodes
    # (drawn as inputs without gradient, it made 2n + 3).
    assert cells["nodes"] == "10,003"
    assert cells["edges"] == "10,002"
    float(cells["ours/bare"])
    float(cells["ours/bare+leaves"])
    assert float(cells["floor/bare"]) > 0 and float(cells["ours/floor"]) > 0
    float(cells["walk+dot ms"].replace(",", ""))
    float(cells["first ms"].replace(",", ""))
    assert float(cells["plain ms"].replace(",", "")) > 0 and float(cells["plain/floor"]) > 0
    # torchviz dies past ~1,000 ops deep; when it is missing the column says so.
    assert cells["torchviz ms"] in ("RecursionError", "not installed")
    assert cells["torchviz/first"] == "-"
    # The header names the machine and the package that was measured.
    assert "graphviz_autograd imported from" in done.stdout


def test_the_floor_walk_reads_every_leaf_once_and_sees_what_the_bare_walk_sees():
    import torch

    from benchmarks.run import bare_walk, bare_walk_reading_leaves

    w = torch.ones(2, 3, requires_grad=True)
    b = torch.ones(3, dtype=torch.float64, requires_grad=True)
    out = ((torch.ones(4, 2) @ w) * 2 + b.float()).sum() + w.sum()  # w used twice, read once
    seen, leaves = bare_walk_reading_leaves(out)
    assert seen == bare_walk(out)
    assert sorted((tuple(shape), str(dtype), str(device)) for shape, dtype, device in leaves) == [
        ((2, 3), "torch.float32", "cpu"),
        ((3,), "torch.float64", "cpu"),
    ]


def test_the_floor_writes_dot_with_the_nodes_and_edges_of_the_walk():
    import graphviz
    import torch

    from benchmarks.run import walk_and_write_floor
    from graphviz_autograd import walk

    w = torch.ones(2, 3, requires_grad=True)
    b = torch.ones(3, requires_grad=True)
    # w used twice; a tensor without gradient, an input of its own in both (a number would be part of its op in ours)
    out = ((torch.ones(4, 2) @ w) * torch.full((4, 3), 2.0) + b).sum() + w.sum()
    body = walk_and_write_floor(out, {"w": w, "b": b})
    lines = body.splitlines()
    graph = walk(out, {"w": w, "b": b})
    # The walk adds one node for the output tensor and its edge; the floor draws grad_fns and leaves only.
    assert sum("->" in line for line in lines) == len(graph.edges) - 1
    assert sum("->" not in line for line in lines) == len(graph.nodes) - 1
    assert '"w\\n(2, 3)' in body and '"b\\n(3,)' in body
    graphviz.Source("digraph {\n" + body + "}\n").pipe(format="dot")  # DOT that Graphviz reads


def test_compare_times_two_checkouts_and_checks_their_dot_is_the_same():
    # This checkout against itself: a fresh import of the same package writes the same text.
    done = run_module("benchmarks.compare", "--before", str(ROOT), "--only", "lstm-30-steps", "--repeat", "1")
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| lstm")]
    assert len(rows) == 1
    cells = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert cells[:2] == ["lstm-30-steps", "491"] and cells[-1] == "True"
    float(cells[5])  # before/now


def test_compare_measures_the_other_checkout_not_this_one_twice(tmp_path):
    # A copy of the package whose DOT ends in a comment: compare must see the difference.
    shutil.copytree(ROOT / "graphviz_autograd", tmp_path / "graphviz_autograd")
    with open(tmp_path / "graphviz_autograd" / "drawing" / "dot_writer.py", "a", encoding="utf-8") as dot:
        dot.write("\n_to_dot = to_dot\n\n\ndef to_dot(*args, **kwargs):\n    return _to_dot(*args, **kwargs) + '// other\\n'\n")
    done = run_module("benchmarks.compare", "--before", str(tmp_path), "--only", "lstm-30-steps", "--repeat", "1")
    assert done.returncode == 0, done.stderr
    (row,) = [line for line in done.stdout.splitlines() if line.startswith("| lstm")]
    assert row.rstrip(" |").endswith("False")


def test_compare_refuses_a_folder_without_the_package(tmp_path):
    done = run_module("benchmarks.compare", "--before", str(tmp_path))
    assert done.returncode == 2
    assert f"--before {tmp_path}: no graphviz_autograd package there" in done.stderr


def test_the_memory_benchmark_times_plain_and_checkpointed_steps_in_turn_each_round():
    import time

    import torch
    from torch import nn

    from benchmarks.memory import paired_step_times

    calls: list[str] = []  # "f" for a forward call, "b" for one that backward makes (the recompute)

    class Logged(nn.Linear):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            calls.append("b" if torch._C._current_graph_task_id() != -1 else "f")
            return torch.tanh(super().forward(x))

    model = nn.Sequential(Logged(4, 4), nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    plain, checkpointed, differences, after_forward, shares = paired_step_times(
        model, torch.ones(2, 4), lambda out: out.sum(), optimizer, "cpu", ("0",), 3, time.process_time)
    # Plain (one forward), then checkpointed (the forward and backward's recompute), three times.
    assert "".join(calls) == "ffb" * 3
    assert len(differences) == len(after_forward) == len(shares) == 3 and plain > 0 and checkpointed > 0
    assert "forward" not in vars(model[0])  # the checkpoint is undone
    # With repeats, each side of a round is that many steps in a row, of which one (the fastest) counts.
    calls.clear()
    *_, differences, after_forward, _ = paired_step_times(
        model, torch.ones(2, 4), lambda out: out.sum(), optimizer, "cpu", ("0",), 2, time.process_time, repeats=2)
    assert "".join(calls) == "fffbfb" * 2 and len(differences) == len(after_forward) == 2


def test_the_memory_benchmark_times_the_recompute_of_checkpointed_blocks_alone():
    import time

    import torch
    from torch import nn

    from benchmarks.memory import recompute_times

    ticks = [0.0]  # a clock that moves only while a block runs its own ops, between its children

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.inner(x)
            ticks[0] += 1.0
            return x + torch.tanh(y)

    model = nn.Sequential(*[Block() for _ in range(3)])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    args = (model, torch.ones(4, 8), lambda out: out.sum(), optimizer, "cpu")
    # A run of two blocks and one block are made again in backward; nothing is without a checkpoint.
    assert all(t > 0 for t in recompute_times(*args, ("0-1",), 2, time.perf_counter))
    assert all(t > 0 for t in recompute_times(*args, ("2",), 2, time.perf_counter))
    assert recompute_times(*args, (), 2, time.perf_counter) == [0.0, 0.0]
    # A module without children is called by the checkpoint itself, not as a module: no hook sees it.
    assert all(t > 0 for t in recompute_times(*args, ("1.inner",), 2, time.perf_counter))
    assert all("forward" not in vars(block) and "forward" not in vars(block.inner) for block in model)
    # A block's own ops count (an attention's product and softmax run between its children), once per block.
    assert recompute_times(*args, ("2",), 2, lambda: ticks[0]) == [1.0, 1.0]
    assert recompute_times(*args, ("0-1",), 2, lambda: ticks[0]) == [2.0, 2.0]


def test_the_memory_benchmark_decides_within_20_percent_only_where_the_medians_interval_does():
    from benchmarks.memory import _verdict, median_interval

    steady = [1.0, 1.01, 0.99, 1.02, 0.98] * 8
    low, high = median_interval(steady)
    assert low <= 1.0 <= high and high - low < 0.03
    assert median_interval(steady) == (low, high)  # seeded: one list, one interval
    spread = [0.2, 1.8, 0.5, 1.5, 1.0] * 2
    assert median_interval(spread)[1] - median_interval(spread)[0] > 0.4
    assert _verdict(1.0, 1.0, steady).endswith("(within 20%)")
    assert _verdict(2.0, 1.0, [2 * v for v in steady]).endswith("(MISSES 20%)")
    assert "undecided" in _verdict(1.0, 1.0, spread)  # a median of 1.0 that ten noisy rounds cannot vouch for


def test_the_zoo_benchmarks_floor_runs_the_forward_through_stand_ins_and_leaves_each_module_as_it_was():
    import torch
    from torch import nn

    from benchmarks.zoo import floor
    from tests.zoo import forward, loss_of

    seen = []

    class Probe(nn.Linear):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            seen.append("forward" in vars(self))  # the floor's stand-in, set on the instance
            return super().forward(x)

    model = nn.Sequential(Probe(3, 3), nn.Linear(3, 2))
    own = model[1].forward = lambda x: torch.tanh(nn.Linear.forward(model[1], x))  # set before: kept
    inputs = {"input": torch.ones(2, 3)}
    assert torch.equal(floor(model, inputs), loss_of(forward(model, inputs)))
    assert seen == [True, False]
    assert "forward" not in vars(model[0]) and vars(model[1])["forward"] is own


def test_the_memory_benchmarks_share_is_each_rounds_difference_over_its_plain_step():
    import torch
    from torch import nn

    from benchmarks.memory import paired_step_times

    now = [0.0]

    def clock() -> float:  # a second a reading; the recompute takes two more
        now[0] += 1.0
        return now[0]

    class Recomputed(nn.Linear):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if torch._C._current_graph_task_id() != -1:
                now[0] += 2.0
            return torch.tanh(super().forward(x))

    model = nn.Sequential(Recomputed(4, 4), nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    plain, checkpointed, differences, after_forward, shares = paired_step_times(
        model, torch.ones(2, 4), lambda out: out.sum(), optimizer, "cpu", ("0",), 3, clock)
    assert (plain, checkpointed) == (2.0, 4.0)
    assert differences == after_forward == [2.0] * 3 and shares == [1.0] * 3
