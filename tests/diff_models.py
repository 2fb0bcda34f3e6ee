"""Pairs of small models that differ in one known way, for the tests of diff().

Each builder returns a model in eval mode with fixed weights; ``graph_of`` records and
walks it on fixed inputs. GPT-2 and BERT come from configs (no weights are downloaded);
the ResNet is written here.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch
from torch import nn

from graphviz_autograd import AutogradGraph, record, walk

VOCAB = 64


def gpt2(n_layer: int = 2, **config: Any) -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    settings = dict(vocab_size=VOCAB, n_embd=32, n_layer=n_layer, n_head=2, n_positions=32, resid_pdrop=0.0,
                    embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    settings.update(config)
    return GPT2LMHeadModel(GPT2Config(**settings)).eval()


def bert(num_hidden_layers: int = 2) -> nn.Module:
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=num_hidden_layers, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    return BertModel(config).eval()


def tokens() -> dict[str, torch.Tensor]:
    return {"input_ids": torch.arange(8).reshape(1, 8) % VOCAB}


def graph_of(model: nn.Module, inputs: Optional[Callable[[], Any]] = None, output: str = "") -> AutogradGraph:
    """The recorded and walked graph of ``model`` on fixed inputs (tokens, or ``inputs()``)."""
    given = inputs() if inputs is not None else tokens()
    recorder = record(model)
    with recorder:
        out = model(**given) if isinstance(given, dict) else model(given)
    if output:
        out = getattr(out, output)
    elif not isinstance(out, torch.Tensor):
        out = out[0]
    return walk(out, model, recorder=recorder)


# --- changes to a GPT-2 ---------------------------------------------------------------


def gpt2_relu() -> nn.Module:
    return gpt2(activation_function="relu")


def gpt2_wider_mlp() -> nn.Module:
    return gpt2(n_inner=256)


def gpt2_frozen_head() -> nn.Module:
    model = gpt2(tie_word_embeddings=False)
    model.lm_head.weight.requires_grad_(False)
    return model


def gpt2_untied() -> nn.Module:
    return gpt2(tie_word_embeddings=False)


def gpt2_detached_attention() -> nn.Module:
    model = gpt2()
    attention = model.transformer.h[1].attn
    attention.register_forward_hook(lambda module, args, out: (out[0].detach(), *out[1:]))
    return model


def gpt2_renamed_mlp() -> nn.Module:
    """Block 1's ``mlp`` is called ``ffn``."""
    model = gpt2()
    block = model.transformer.h[1]
    base = type(block)
    renamed = type(base.__name__, (base,), {"mlp": property(lambda self: self.ffn)})
    block._modules["ffn"] = block._modules.pop("mlp")
    block.__class__ = renamed
    return model


def gpt2_float64() -> nn.Module:
    return gpt2().double()


def gpt2_extra_norm() -> nn.Module:
    """Block 1 normalises its MLP's output once more, in a LayerNorm of its own (``ln_3``)."""
    model = gpt2()
    block = model.transformer.h[1]
    block.ln_3 = nn.LayerNorm(32)
    block.mlp.register_forward_hook(lambda module, args, out: block.ln_3(out))
    return model


# --- a ResNet written by hand ------------------------------------------------------------


class Block(nn.Module):
    def __init__(self, width: int, act: Callable[[], nn.Module], extra_norm: bool = False):
        super().__init__()
        self.conv1 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.act = act()
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        if extra_norm:
            self.norm = nn.GroupNorm(2, width)
        self.extra_norm = extra_norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn2(self.conv2(self.act(self.bn1(self.conv1(x)))))
        if self.extra_norm:
            y = self.norm(y)
        return torch.relu(x + y)


class ResNet(nn.Module):
    def __init__(self, blocks: int = 2, width: int = 8, act: Callable[[], nn.Module] = nn.ReLU,
                 extra_norm_in: Optional[int] = None, detach_stem: bool = False, head: str = "fc"):
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, padding=1)
        self.layers = nn.Sequential(*(Block(width, act, extra_norm=i == extra_norm_in) for i in range(blocks)))
        setattr(self, head, nn.Linear(width, 10))
        self.head = head
        self.detach_stem = detach_stem

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        if self.detach_stem:
            x = x.detach()
        x = self.layers(x)
        return getattr(self, self.head)(x.mean(dim=(2, 3)))


def resnet(**settings: Any) -> nn.Module:
    torch.manual_seed(0)
    return ResNet(**settings).eval()


def pixels() -> torch.Tensor:
    return torch.ones(1, 3, 8, 8)


def resnet_graph(model: nn.Module) -> AutogradGraph:
    return graph_of(model, pixels)
