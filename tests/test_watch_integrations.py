"""watch() where training already reports, each with the real library on CPU: TensorBoard's
scalars and histograms per module, a Lightning callback, a transformers TrainerCallback."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from graphviz_autograd import watch
from graphviz_autograd.training.watching import HISTOGRAM_EDGES


def event_data(folder):
    """Scalars {tag: [(step, value)]} and histograms {tag: [(step, counts)]} TensorBoard reads from ``folder``."""
    accumulator_module = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    accumulator = accumulator_module.EventAccumulator(str(folder), size_guidance={"scalars": 0, "histograms": 0})
    accumulator.Reload()
    tags = accumulator.Tags()
    scalars = {tag: [(e.step, e.value) for e in accumulator.Scalars(tag)] for tag in tags["scalars"]}
    histograms = {tag: [(e.step, list(e.histogram_value.bucket)) for e in accumulator.Histograms(tag)] for tag in tags["histograms"]}
    return scalars, histograms


def test_tensorboard_gets_a_scalar_and_a_histogram_per_module_and_parameter(tmp_path):
    pytest.importorskip("tensorboard")
    from graphviz_autograd.integrations.tensorboard import log_to_tensorboard

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with watch(model, optimizer=opt, every=2, histogram_every=2) as w:
        for step in range(5):
            if step == 3:  # the steps kept so far are written at once, later ones as they come
                logger = log_to_tensorboard(w, tmp_path)
            model(torch.randn(8, 4)).pow(2).mean().backward()
            opt.step()
            opt.zero_grad()
    logger.writer.close()
    scalars, histograms = event_data(tmp_path)
    assert scalars["update_ratio/0.weight"] == [(s, pytest.approx(v)) for s, v in zip(w.steps, w.series("update_ratio")["0.weight"])]
    assert [s for s, _ in scalars["activation_std/model"]] == [0, 2, 4]
    assert {"output_grad_norm/1", "activation_zero_fraction/1", "grad_norm/2.bias"} <= set(scalars)
    counts = histograms["log10_abs_activation/0"]
    assert [s for s, _ in counts] == [0, 2, 4]
    assert counts[-1][1] == pytest.approx(list(w.logged_steps[-1].histograms["activation"]["0"]))
    assert len(HISTOGRAM_EDGES) - 1 == len(counts[-1][1])


def test_a_lightning_callback_watches_fitting_and_logs_to_its_tensorboard(tmp_path):
    lightning = pytest.importorskip("lightning.pytorch")
    pytest.importorskip("tensorboard")
    from lightning.pytorch.loggers import TensorBoardLogger

    from graphviz_autograd.integrations.lightning import WatchCallback

    class Regression(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))

        def training_step(self, batch, batch_index):
            x, y = batch
            return (self.body(x) - y).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    module = Regression()
    hooks = [len(m._forward_hooks) + len(m._forward_pre_hooks) for m in module.modules()]
    callback = WatchCallback(every=2, save_json=tmp_path / "watch.json")
    trainer = lightning.Trainer(
        max_steps=5, accelerator="cpu", devices=1, logger=TensorBoardLogger(tmp_path, name="logs"),
        callbacks=[callback], enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )
    trainer.fit(module, torch.utils.data.DataLoader(data, batch_size=8))
    w = callback.watcher
    assert w.steps == [0, 2, 4]
    assert "body.1" in w.module_calls and w.latest("activation_saturated_fraction")["body.1"] >= 0
    # Lightning runs forward and backward inside the optimizer's step (a closure): gradients are measured all the same.
    assert all(v > 0 for v in w.latest("grad_norm").values()) and all(v > 0 for v in w.latest("update_ratio").values())
    assert hooks == [len(m._forward_hooks) + len(m._forward_pre_hooks) for m in module.modules()]
    assert (tmp_path / "watch.json").is_file()
    # The graph is that of the outermost module training_step called.
    lines = "\n".join(w.overlay("output_grad_norm").tooltips.values()).splitlines()
    assert {"body", "body.0", "body.1", "body.2"} == {line.split(":")[0] for line in lines}
    scalars, _ = event_data(tmp_path / "logs" / "version_0")
    assert [s for s, _ in scalars["grad_norm/body.0.weight"]] == [0, 2, 4]


def test_a_transformers_trainer_callback_watches_training(tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from graphviz_autograd.integrations.transformers import WatchTrainerCallback

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=16)
    model = transformers.GPT2LMHeadModel(config)
    ids = torch.randint(0, 100, (8, 16))
    data = [{"input_ids": row, "labels": row} for row in ids]
    callback = WatchTrainerCallback(every=1)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=3, per_device_train_batch_size=4, report_to=[], use_cpu=True,
        save_strategy="no", disable_tqdm=True, logging_strategy="no",
    )
    transformers.Trainer(model=model, args=args, train_dataset=data, callbacks=[callback]).train()
    w = callback.watcher
    assert w.steps == [0, 1, 2]
    assert {"transformer.h.1.attn", "lm_head", ""} <= set(w.module_calls)
    assert w.latest("update_ratio")["transformer.h.0.mlp.c_fc.weight"] > 0
    assert not any(m._forward_hooks for m in model.modules())
