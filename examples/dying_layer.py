"""A small model trained on a toy task, with one layer made to die: what watch() finds.

Run from the repository root: ``PYTHONPATH=. python examples/dying_layer.py``. It is
also a model file (``model`` and ``example_inputs``): ``graphviz-autograd render
examples/dying_layer.py`` draws the network.

The model learns the sign of x * y on [-1, 1]^2 with three hidden layers. At step 100
the bias of the second hidden layer is set to -50, as a bad update would: every unit
of the ReLU after it is zero from then on, and nothing before it learns any more.
"""

from __future__ import annotations

import torch
from torch import nn

from graphviz_autograd import Watcher, make_dot, watch


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(2, 32), nn.Tanh(),
        nn.Linear(32, 32), nn.ReLU(),  # the layer that dies
        nn.Linear(32, 32), nn.ReLU(),
        nn.Linear(32, 1),
    )


def example_inputs() -> tuple:
    torch.manual_seed(1)
    return (torch.rand(512, 2) * 2 - 1,)


def main() -> Watcher:
    net = model()
    (x,) = example_inputs()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    y = (x[:, :1] * x[:, 1:]).sign()
    with watch(net, optimizer=opt, every=10) as w:
        for step in range(300):
            if step == 100:
                with torch.no_grad():
                    net[2].bias.fill_(-50.0)
            loss = nn.functional.mse_loss(net(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
    for finding in w.findings():
        print(f"{finding.severity}: [{finding.code}] {finding.message}")
    zeros = w.series("activation_zero_fraction")["3"]
    print("zero fraction of module 3 by logged step:", " ".join(f"{v:.2f}" for v in zeros[8:13]), "...")
    make_dot(w.graph(), overlays=[w.overlay("activation_zero_fraction", step=90), w.overlay("output_grad_norm")])
    return w


if __name__ == "__main__":
    main()
