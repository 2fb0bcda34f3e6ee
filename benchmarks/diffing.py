"""How long ``diff()`` takes on two 12-layer GPT-2 graphs, against walking both; run by
hand from the repository root:

    PYTHONPATH=. python -m benchmarks.diffing [--repeat 5] [--chain 100000]

GPT-2 small's shape (12 layers, 768 wide) from its ``transformers`` config, random
weights, nothing downloaded. The old graph is the model as built, the new one the same
model with block 5's activation a ReLU: the diff matches every module, aligns the ops of
the changed one and writes its sentences. In one run, best of ``--repeat``, the table
gives the time of the recorded forward passes, of walking both graphs, of diffing them
and of the diff's view (unchanged modules closed) and DOT, each as a ratio to the walks.
"""

from __future__ import annotations

import argparse
from typing import Any

import torch
from torch import nn

from graphviz_autograd import diff, record, walk
from graphviz_autograd.drawing.dot_writer import dot_source

from .run import best_time


def gpt2(relu_in: int = -1) -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=12, bos_token_id=0, eos_token_id=0)).eval()
    if relu_in >= 0:
        model.transformer.h[relu_in].mlp.act = nn.ReLU()
    return model


def recorded(model: nn.Module, tokens: torch.Tensor) -> tuple[Any, Any]:
    recorder = record(model)
    with recorder:
        logits = model(tokens).logits
    return logits, recorder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--chain", type=int, default=0, metavar="OPS",
                        help="also diff two chains of this many ops, one op swapped in the middle (no modules)")
    args = parser.parse_args()
    tokens = torch.arange(16).reshape(1, 16)
    models = gpt2(), gpt2(relu_in=5)
    runs = [recorded(model, tokens) for model in models]
    forward = best_time(lambda: [recorded(model, tokens) for model in models], args.repeat)
    walking = best_time(lambda: [walk(out, model, recorder=rec) for (out, rec), model in zip(runs, models)], args.repeat)
    old, new = (walk(out, model, recorder=rec) for (out, rec), model in zip(runs, models))
    diffing = best_time(lambda: diff(old, new), args.repeat)
    found = diff(old, new)
    drawing = best_time(lambda: dot_source(found.view()), args.repeat)
    print(f"GPT-2 12 layers: {len(old.nodes):,} and {len(new.nodes):,} nodes; the diff says:")
    print("  " + found.text().rstrip("\n").replace("\n", "\n  "))
    print(f"{'step':<40}{'seconds':>10}{'/ walking both':>16}")
    for name, seconds in (("recorded forward passes of both", forward), ("walk both graphs", walking),
                          ("diff(old, new)", diffing), ("the diff's view and DOT", drawing)):
        print(f"{name:<40}{seconds:>10.4f}{seconds / walking:>15.2f}x")
    if args.chain:
        x = torch.ones(3, requires_grad=True)

        def chain(odd: int = -1) -> Any:
            y = x
            for i in range(args.chain):
                y = (y.exp() if i != odd else y.sin()) * 0.5
            return y.sum()

        ends = chain(), chain(args.chain // 2)
        walking = best_time(lambda: [walk(end, {"x": x}) for end in ends], args.repeat)
        old, new = (walk(end, {"x": x}) for end in ends)
        diffing = best_time(lambda: diff(old, new), args.repeat)
        print(f"a chain of {args.chain:,} ops, one swapped ({len(old.nodes):,} nodes, no modules): walk both "
              f"{walking:.3f} s, diff {diffing:.3f} s ({diffing / walking:.1f}x)")


if __name__ == "__main__":
    main()
