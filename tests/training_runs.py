"""A catalogue of small training runs, healthy and broken, and what watch() must say of each.

Each run is a row: a model, an optimizer, the steps, and what is wrong with it, if
anything: the finding it must give (its code, the layer it names and the first step).
A healthy run must give no warning and no error. A broken run must give its finding;
any other warning or error it gives must be one of the run's ``also`` (a consequence of
the same mistake, said in words there), or it counts as a false alarm.

``python -m tests.training_runs`` prints the table, with precision and recall over it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Optional

import torch
from torch import nn

from graphviz_autograd import Finding, watch
from graphviz_autograd.training.watching import module_output_nodes, parameter_nodes


class Expected(NamedTuple):
    """A finding a broken run must give: its code, a layer it names (a module path, or a
    module call such as ``act#2``; None: any), and its first step (None: the run's own
    first step whose loss or a gradient held NaN/Inf)."""

    code: str
    layer: Optional[str]
    step: Optional[int]


@dataclass
class Run:
    name: str
    what: str
    model: Callable[[], nn.Module]
    optimizer: Callable[[nn.Module], torch.optim.Optimizer]
    data: Callable[[int], tuple[torch.Tensor, torch.Tensor]]  # step -> (inputs, targets)
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    steps: int = 30
    every: int = 1
    expected: Optional[Expected] = None
    also: tuple[tuple[str, str], ...] = ()  # (code, why) of findings that are consequences of the same mistake
    before_step: Optional[Callable[[nn.Module, int], None]] = None  # what breaks it, at a step
    seed: int = 0


@dataclass
class Outcome:
    run: Run
    findings: list[Finding]
    named: dict[int, set[str]] = field(default_factory=dict)  # finding index -> the layers it names
    nonfinite_steps: list[int] = field(default_factory=list)  # steps whose loss or a gradient held NaN/Inf

    @property
    def alarms(self) -> list[Finding]:
        """The warnings and errors."""
        return [f for f in self.findings if f.severity in ("error", "warning")]

    def expected_step(self) -> Optional[int]:
        expected = self.run.expected
        if expected is None:
            return None
        if expected.step is not None:
            return expected.step
        return self.nonfinite_steps[0] if self.nonfinite_steps else None

    def match(self) -> Optional[Finding]:
        """The finding that names what is wrong: the right code, layer and first step."""
        expected = self.run.expected
        if expected is None:
            return None
        step = self.expected_step()
        for index, finding in enumerate(self.findings):
            if finding.code != expected.code or finding.step != step:
                continue
            if expected.layer is None or expected.layer in self.named[index]:
                return finding
        return None

    def false_alarms(self) -> list[Finding]:
        """Warnings and errors that are neither the expected finding nor a consequence the run lists."""
        right = self.match()
        allowed = {code for code, _ in self.run.also}
        return [f for f in self.alarms if f is not right and f.code not in allowed]


def run(entry: Run) -> Outcome:
    # One thread: these models are too small to gain from more, and on a shared machine
    # several threads per test process wait on each other.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _run(entry)
    finally:
        torch.set_num_threads(threads)


def _run(entry: Run) -> Outcome:
    torch.manual_seed(entry.seed)
    model = entry.model()
    opt = entry.optimizer(model)
    nonfinite_steps = []
    with watch(model, optimizer=opt, every=entry.every) as w:
        for step in range(entry.steps):
            if entry.before_step is not None:
                entry.before_step(model, step)
            x, y = entry.data(step)
            loss = entry.loss(model(x), y)
            loss.backward()
            # NaN/Inf, or a norm float32 cannot hold (its values past 1.8e19): the numbers watch() measures.
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            if not math.isfinite(loss.item()) or not all(math.isfinite(torch.linalg.vector_norm(g).item()) for g in grads):
                nonfinite_steps.append(step)
            opt.step()
            opt.zero_grad()
    findings = w.findings()
    graph = w.graph()
    owners: dict[str, set[str]] = {}
    for path, ids in module_output_nodes(graph).items():
        for node_id in ids:
            owners.setdefault(node_id, set()).add(path)
    for name, ids in parameter_nodes(graph).items():
        for node_id in ids:
            owners.setdefault(node_id, set()).add(name.rpartition(".")[0])
    named = {}
    for index, finding in enumerate(findings):
        layers = {layer for node_id in finding.nodes for layer in owners.get(node_id, ())}
        layers.add(finding.subject if "." not in finding.subject or finding.code in _CALL_CODES else finding.subject.rpartition(".")[0])
        named[index] = layers
    return Outcome(entry, findings, named, nonfinite_steps)


_CALL_CODES = frozenset({"dead_units", "saturated"})


# --- models ------------------------------------------------------------------------------


class MLP(nn.Module):
    def __init__(self, width: int = 32, act: Callable[[], nn.Module] = nn.ReLU, depth: int = 2, inputs: int = 8) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        size = inputs
        for _ in range(depth):
            layers += [nn.Linear(size, width), act()]
            size = width
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(size, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class Net(nn.Module):
    """fc1 - ReLU - fc2 - the same ReLU again - head."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.head = nn.Linear(8, 32), nn.Linear(32, 32), nn.Linear(32, 1)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.act(self.fc2(self.act(self.fc1(x)))))


class FunctionalRelu(Net):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class DetachedBranch(Net):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.fc1(x)).detach()  # by mistake: fc1 never learns
        return self.head(self.act(self.fc2(h)))


class MaskedGradient(Net):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc2(self.act(self.fc1(x)))
        if h.requires_grad:
            h.register_hook(torch.zeros_like)  # a hook left in that zeroes fc2's output gradient
        return self.head(self.act(h))


class WithUnusedModule(Net):
    def __init__(self) -> None:
        super().__init__()
        self.auxiliary = nn.Linear(32, 4)  # built, handed to the optimizer, never called


class CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.AdaptiveAvgPool2d(2),
        )
        self.classifier = nn.Linear(64, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).flatten(1))


class TinyTransformer(nn.Module):
    def __init__(self, vocab: int = 50, width: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.randn(16, width) * 0.02)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(width, 4, 64, dropout=0.0, batch_first=True, norm_first=True) for _ in range(2)
        )
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids) + self.position[: ids.shape[1]]
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h))


class ResidualLayerNorm(nn.Module):
    def __init__(self, width: int = 32, blocks: int = 4) -> None:
        super().__init__()
        self.stem = nn.Linear(8, width)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))
            for _ in range(blocks)
        )
        self.head = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        for block in self.blocks:
            h = h + block(h)
        return self.head(h)


class Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.GRU(8, 16, batch_first=True)
        self.head = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.rnn(x)[0][:, -1])


def sigmoid_tower(layers: int = 20) -> nn.Module:
    parts: list[nn.Module] = []
    for _ in range(layers):
        parts += [nn.Linear(16, 16), nn.Sigmoid()]
    return nn.Sequential(*parts, nn.Linear(16, 1))


def saturated_tanh() -> nn.Module:
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))
    with torch.no_grad():
        model[0].weight.mul_(100.0)
    return model


def dead_relu_at_init() -> nn.Module:
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))
    with torch.no_grad():
        model[2].bias.fill_(-50.0)
    return model


def dead_from_init() -> nn.Module:
    model = FunctionalRelu()
    with torch.no_grad():
        model.fc1.bias.fill_(-50.0)
    return model


def frozen_by_mistake() -> nn.Module:
    model = Net()
    model.fc2.requires_grad_(False)  # left over from fine-tuning the head alone
    return model


def growing_scale() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 1))


# --- data and losses ---------------------------------------------------------------------


def regression(inputs: int = 8, batch: int = 32, scale: float = 1.0) -> Callable[[int], tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(batch * 4, inputs, generator=generator) * scale
    y = torch.sin(x[:, :1]) + 0.5 * x[:, 1:2]

    def data(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        part = step % 4
        return x[part * batch : (part + 1) * batch], y[part * batch : (part + 1) * batch]

    return data


def images(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(step % 4)
    x = torch.randn(16, 1, 8, 8, generator=generator)
    return x, (x.mean((1, 2, 3)) > 0).long() + 2 * (x[:, 0, 0, 0] > 0).long()


def tokens(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(step % 4)
    ids = torch.randint(0, 50, (8, 12), generator=generator)
    return ids, ids.roll(1, dims=1)


def sequences(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(step % 4)
    x = torch.randn(16, 6, 8, generator=generator)
    return x, x[:, :, 0].sum(1, keepdim=True)


def mse(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (out - y).pow(2).mean()


def cross_entropy(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))


def sgd(lr: float, **kwargs: float) -> Callable[[nn.Module], torch.optim.Optimizer]:
    return lambda model: torch.optim.SGD(model.parameters(), lr=lr, **kwargs)


def adam(lr: float = 1e-3, weight_decay: float = 0.0) -> Callable[[nn.Module], torch.optim.Optimizer]:
    return lambda model: torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)


def adamw(lr: float = 1e-3, weight_decay: float = 0.01) -> Callable[[nn.Module], torch.optim.Optimizer]:
    return lambda model: torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)


def zero_lr_for_fc1(model: nn.Module) -> torch.optim.Optimizer:
    fc1 = list(model.fc1.parameters())
    rest = [p for p in model.parameters() if all(p is not q for q in fc1)]
    return torch.optim.SGD([{"params": fc1, "lr": 0.0}, {"params": rest}], lr=0.05)


def kill_fc2_at(step_of_death: int) -> Callable[[nn.Module, int], None]:
    def before(model: nn.Module, step: int) -> None:
        if step == step_of_death:
            with torch.no_grad():
                model.fc2.bias.fill_(-50.0)

    return before


# --- the catalogue -----------------------------------------------------------------------

HEALTHY = [
    Run("mlp_sgd", "MLP, ReLU, SGD", lambda: MLP(), sgd(0.05), regression(), mse),
    Run("mlp_momentum_wd", "MLP, ReLU, SGD with momentum and weight decay", lambda: MLP(), sgd(0.02, momentum=0.9, weight_decay=1e-4), regression(), mse),
    Run("mlp_adam", "MLP, ReLU, Adam", lambda: MLP(), adam(1e-3), regression(), mse),
    Run("mlp_adamw_wd", "MLP, ReLU, AdamW with weight decay", lambda: MLP(depth=3), adamw(1e-3, 0.01), regression(), mse),
    Run("tanh_mlp_sgd", "MLP, tanh, SGD", lambda: MLP(act=nn.Tanh), sgd(0.05), regression(), mse),
    Run("cnn_bn_sgd", "CNN with BatchNorm, SGD with momentum", CNN, sgd(0.05, momentum=0.9), images, cross_entropy),
    Run("cnn_bn_adamw", "CNN with BatchNorm, AdamW with weight decay", CNN, adamw(1e-3, 0.05), images, cross_entropy),
    Run("layernorm_gelu_fit", "residual LayerNorm/GELU blocks, Adam, fits its data", ResidualLayerNorm, adam(3e-3), regression(), mse, steps=60, every=5),
    Run("tiny_transformer_adamw", "2-layer transformer, AdamW", TinyTransformer, adamw(1e-3, 0.01), tokens, cross_entropy, steps=20),
    Run("tiny_transformer_sgd", "2-layer transformer, SGD with momentum", TinyTransformer, sgd(0.05, momentum=0.9), tokens, cross_entropy, steps=20),
    Run("gru_adam", "GRU, Adam", Recurrent, adam(3e-3), sequences, mse, steps=20),
    Run("mlp_sgd_every_5", "MLP, ReLU, SGD, logged every 5 steps", lambda: MLP(depth=3), sgd(0.05), regression(), mse, steps=60, every=5),
]

BROKEN = [
    Run("dead_from_init", "bias -50 before a functional relu, from the start", dead_from_init, sgd(0.05), regression(), mse,
        expected=Expected("grad_zero", "fc1", 0)),
    Run("dead_relu_module_from_init", "bias -50 before a ReLU module, from the start", dead_relu_at_init, sgd(0.05), regression(), mse,
        expected=Expected("dead_units", "3", 0)),
    Run("dying_mid_run", "the second layer's bias set to -50 at step 10", Net, sgd(0.05), regression(), mse, steps=24, every=2,
        expected=Expected("dead_units", "act#2", 10), before_step=kill_fc2_at(10)),
    Run("vanishing", "20 sigmoid layers", lambda: sigmoid_tower(20), sgd(0.05), regression(16), mse, steps=10,
        expected=Expected("grad_norm_span", "0", 0)),
    Run("saturated", "tanh after weights 100 times too large", saturated_tanh, sgd(0.05), regression(), mse, steps=10,
        expected=Expected("saturated", "1", 0),
        also=(("update_ratio", "the head reads +-1 from every saturated unit: its gradient, and its steps, are as large as "
                               "they can be (0.1 of its norm)"),)),
    Run("exploding", "a learning rate just past stable: the loss and its gradients grow every step",
        growing_scale, sgd(0.32), regression(scale=3.0), mse, steps=24,
        expected=Expected("grad_norm_trend", "0", 0),
        also=(("update_ratio", "the weights it moves change by more than a tenth of their norm a step: the same learning rate"),)),
    Run("diverging_to_nan", "MLP, SGD with a learning rate of 10", lambda: MLP(), sgd(10.0), regression(), mse,
        expected=Expected("nonfinite_seen", None, None)),
    Run("frozen_by_mistake", "fc2 frozen, still handed to the optimizer", frozen_by_mistake, sgd(0.05), regression(), mse, steps=10,
        expected=Expected("frozen_parameter", "fc2", 0)),
    Run("detached_branch", "detach() after fc1 by mistake", DetachedBranch, sgd(0.05), regression(), mse, steps=10,
        expected=Expected("grad_missing", "fc1", 0)),
    Run("zero_lr_group", "a parameter group with a learning rate of 0 (fc1)", Net, zero_lr_for_fc1, regression(), mse, steps=10,
        expected=Expected("update_ratio", "fc1", 0)),
    Run("masked_gradient", "a hook that zeroes the gradient of fc2's output", MaskedGradient, sgd(0.05), regression(), mse, steps=10,
        expected=Expected("grad_zero", "fc2", 0)),
    Run("unused_module", "a module built and handed to the optimizer, never called", WithUnusedModule, sgd(0.05), regression(), mse, steps=10,
        expected=Expected("unused_parameter", "auxiliary", 0)),
]

CATALOGUE = HEALTHY + BROKEN


def table(outcomes: list[Outcome]) -> str:
    """The catalogue as a Markdown table, with precision and recall over it."""
    lines = ["| run | expected finding | found (warnings and errors) | first step named |", "| --- | --- | --- | --- |"]
    for outcome in outcomes:
        expected = outcome.run.expected
        wanted = "none" if expected is None else f"{expected.code} on {expected.layer or 'any layer'} from step {outcome.expected_step()}"
        found = ", ".join(f"{f.code} {f.subject or 'model'}" for f in outcome.alarms) or "none"
        right = outcome.match()
        first = "-" if expected is None else (str(right.step) if right is not None else "missed")
        lines.append(f"| {outcome.run.name} | {wanted} | {found} | {first} |")
    true_positive = sum(1 for o in outcomes if o.match() is not None)
    consequences = sum(len(o.alarms) - len(o.false_alarms()) - (o.match() is not None) for o in outcomes)
    false_alarms = sum(len(o.false_alarms()) for o in outcomes)
    expected_count = sum(1 for o in outcomes if o.run.expected is not None)
    precision = (true_positive + consequences) / max(true_positive + consequences + false_alarms, 1)
    recall = true_positive / max(expected_count, 1)
    lines.append("")
    lines.append(
        f"precision {precision:.2f} ({true_positive} expected findings and {consequences} listed consequences among "
        f"{true_positive + consequences + false_alarms} warnings and errors; {false_alarms} false alarms), "
        f"recall {recall:.2f} ({true_positive} of {expected_count} expected findings with the right code, layer and first step)"
    )
    return "\n".join(lines)


def main() -> None:
    print(table([run(entry) for entry in CATALOGUE]))


if __name__ == "__main__":
    main()
