"""How well :func:`graphviz_autograd.checks.profiling.profile_step` measures, and what it costs.

Run by hand from the repository root, so that this checkout's package is the one imported::

    PYTHONPATH=. python -m benchmarks.profiling              # every case (several minutes on CPU)
    PYTHONPATH=. python -m benchmarks.profiling --only heavy --only resnet18
    PYTHONPATH=. python -m benchmarks.profiling --device cuda

For each model, with random weights and nothing downloaded:

- ``heavy``: light layers around one deliberately heavy one (``heavy``, a 1024-wide
  layer among 32-wide ones): it must top the backward table.
- ``resnet18``: a ResNet-18 written by hand (torchvision does not import everywhere):
  a 7x7/2 stem, four stages of two basic blocks (64 to 512 channels), global pooling,
  a 1000-way classifier; on 4 images of 224x224 with a cross-entropy loss.
- ``gpt2``: GPT-2 small (``transformers.GPT2Config()``: 12 layers, 768 wide) on one
  sequence of ``--seq-len`` tokens, with the language-model loss.

Columns:

- ``steps s``: the median wall time of one step without the profiler (3 steps after 1 warm-up).
- ``profile s``: the wall time of one ``profile_step(..., steps=3, warmup=1)`` call,
  everything included (the recorded warm-up step, 3 steps without and 3 with the
  profiler, reading the events); ``profile/3 steps``: that over 3 unprofiled steps.
- ``nodes/backward``: the per-node backward times summed, over the backward pass's
  time on the same clock (CPU: its wall time under the profiler); what is left is the
  engine between nodes.
- ``in nodes``: the share of each measured step's backward that lies in the range of a
  node of the graph (median over the steps). ``nodes/backward`` sums medians taken node
  by node, so on a loaded machine, where one step's noise lands on other nodes than the
  next's, it falls below ``in nodes``; on a quiet one the two agree.
- ``overhead``: the profiler's own cost, as the profile states it.
- ``top backward module``: the first row of the backward table.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from typing import Any, Callable, Optional

import torch
from torch import nn
from torch.nn import functional as F

from graphviz_autograd.checks.profiling import BACKWARD_TIME, StepProfile, profile_step

CASES = ("heavy", "resnet18", "gpt2")


class HeavyAmongLight(nn.Module):
    """Six 32-wide layers and, in the middle, one 1024-wide pair: the heavy module."""

    def __init__(self) -> None:
        super().__init__()
        self.before = nn.ModuleList([nn.Linear(32, 32) for _ in range(3)])
        self.heavy = nn.Sequential(nn.Linear(32, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 32))
        self.after = nn.ModuleList([nn.Linear(32, 32) for _ in range(3)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.before:
            x = torch.relu(layer(x))
        x = self.heavy(x)
        for layer in self.after:
            x = torch.relu(layer(x))
        return x.square().mean()


class BasicBlock(nn.Module):
    def __init__(self, inputs: int, outputs: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.downsample: Optional[nn.Sequential] = None
        if stride != 1 or inputs != outputs:
            self.downsample = nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride, bias=False), nn.BatchNorm2d(outputs))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet18(nn.Module):
    """ResNet-18 (He et al.): 11,689,512 parameters, as torchvision's ``resnet18``."""

    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        widths = (64, 128, 256, 512)
        stages = []
        inputs = 64
        for index, width in enumerate(widths):
            stride = 1 if index == 0 else 2
            stages.append(nn.Sequential(BasicBlock(inputs, width, stride), BasicBlock(width, width, 1)))
            inputs = width
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.fc = nn.Linear(512, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def heavy_case(device: str) -> tuple[nn.Module, Any, Callable[[Any], Any]]:
    torch.manual_seed(0)
    return HeavyAmongLight().to(device), torch.randn(256, 32, device=device), lambda out: out


def resnet18_case(device: str) -> tuple[nn.Module, Any, Callable[[Any], Any]]:
    torch.manual_seed(0)
    labels = torch.randint(0, 1000, (4,), device=device)
    return ResNet18().to(device), torch.randn(4, 3, 224, 224, device=device), lambda out: F.cross_entropy(out, labels)


def gpt2_case(device: str, seq_len: int) -> tuple[nn.Module, Any, Callable[[Any], Any]]:
    import transformers

    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    config = transformers.GPT2Config()
    model = transformers.GPT2LMHeadModel(config).to(device)
    ids = torch.randint(0, config.vocab_size, (1, seq_len), device=device)
    return model, {"input_ids": ids, "labels": ids}, lambda out: out.loss


def plain_steps(model: nn.Module, inputs: Any, loss: Callable[[Any], Any], count: int, device: str) -> list[float]:
    """Wall times of ``count`` plain steps (forward, loss, backward), grads cleared before each."""
    times = []
    for _ in range(count):
        for p in model.parameters():
            p.grad = None
        started = time.perf_counter()
        output = model(**inputs) if isinstance(inputs, dict) else model(inputs)
        loss(output).backward()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    for p in model.parameters():
        p.grad = None
    return times


def measure(name: str, model: nn.Module, inputs: Any, loss: Callable[[Any], Any], device: str) -> tuple[list[str], StepProfile]:
    plain_steps(model, inputs, loss, 1, device)  # warm-up
    three = sum(plain_steps(model, inputs, loss, 3, device))
    started = time.perf_counter()
    profile = profile_step(model, inputs, loss=loss, steps=3, warmup=1)
    spent = time.perf_counter() - started
    per_node = sum(profile.node_values(BACKWARD_TIME).values())
    backward = profile.totals.get("backward", 0.0)
    top = profile.by_module(BACKWARD_TIME)
    overhead = profile.profiled_wall_time / profile.unprofiled_step_time - 1
    row = [
        name,
        f"{len(profile.ops):,}",
        f"{three / 3:.3f}",
        f"{spent:.3f}",
        f"{spent / three:.2f}",
        f"{per_node / backward:.3f}" if backward else "-",
        f"{1 - (profile.unmatched.backward_outside + profile.unmatched.backward_time) / backward:.3f}" if backward else "-",
        f"{100 * overhead:+.0f}%",
        f"{top[0].path} ({100 * top[0].value / profile.step_time:.0f}%)" if top else "-",
    ]
    return row, profile


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", choices=CASES, help="run only this case (repeatable)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seq-len", type=int, default=128, help="GPT-2's sequence length (default 128)")
    parser.add_argument("--tables", action="store_true", help="also print each case's profile table")
    parser.add_argument("--threads", type=int, help="torch.set_num_threads (default: torch's own choice)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    cases = args.only or list(CASES)
    threads = torch.get_num_threads()
    print(f"torch {torch.__version__} on {args.device} ({platform.processor() or platform.machine()}, {threads} threads)")
    header = ["model", "nodes", "steps s", "profile s", "profile/3 steps", "nodes/backward", "in nodes", "overhead", "top backward module"]
    rows = [header]
    for name in cases:
        if name == "heavy":
            case = heavy_case(args.device)
        elif name == "resnet18":
            case = resnet18_case(args.device)
        else:
            case = gpt2_case(args.device, args.seq_len)
        row, profile = measure(name, *case, args.device)
        rows.append(row)
        print("| " + " | ".join(row) + " |", file=sys.stderr)
        if args.tables:
            print(profile.table(top=5))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for index, row in enumerate(rows):
        print("| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths)) + " |")
        if index == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    print("(one run each: times vary with the machine's load)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
