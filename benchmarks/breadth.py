"""The breadth run: every model type of the installed ``transformers``, built small, through
the whole pipeline.

Run by hand from the repository root (a full run takes some 12 minutes on one core)::

    PYTHONPATH=. python -m benchmarks.breadth --json out.json          # every model type
    PYTHONPATH=. python -m benchmarks.breadth --only bert,vit,t5        # these only
    PYTHONPATH=. python -m benchmarks.breadth --sample 40 --seed 1      # 40 types drawn at random

Each model type that ``transformers.CONFIG_MAPPING`` lists is built from its config class
with every size shrunk by name, generically (:func:`shrunk_config`: 2 layers, hidden 64,
4 heads, vocabulary 256, images of 64 pixels; ``OVERRIDES`` holds the few configs that
need more, such as an encoder-decoder's two halves), random weights, the model class of
the auto mappings or else of the config's own modeling module (:func:`own_model_class`),
and dummy inputs made from the model's ``main_input_name`` and the other inputs its
forward takes (:func:`dummy_inputs`). Then, as a user would:
``record`` around the forward pass, ``make_dot`` (the default picture), ``dot -Tsvg`` of
its source (its size read from the SVG), ``make_dot(depth="full")`` (every edge must join
two drawn nodes), ``explore`` and ``check(backward=True)``.

Every model runs in a child process forked from a worker that imported torch and
transformers once, with a time limit (``--timeout``); ``--jobs`` children at a time
(default 1: the machine is shared). It prints the totals (enumerated, built, drawn,
within a page, explored, checked without error), a table of every failure with its
cause, the page-size estimate against the SVG, and writes every model's result,
findings included, as JSON (``--json``, rewritten after each model); ``--compact`` writes
such a run as ``benchmarks/results/breadth.json`` keeps it.

``tests/test_breadth_subset.py`` runs a fixed few through :func:`run_model`, the
function each child runs.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import json
import os
import random
import re
import select
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Optional

PAGE = 3000.0  # points on the long side of a picture that fits a page (views/page_fit.py's PAGE_LONG_SIDE)
LAYERS = 2
HIDDEN = 64
HEADS = 4
KV_HEADS = 2
HEAD_DIM = 16
INTERMEDIATE = 128
VOCAB = 256
IMAGE = 64
PATCH = 8
EXPERTS = 4
TOKENS = 8
DECODER_TOKENS = 4
AUDIO_SAMPLES = 4000
SEED = 0
MAX_PARAMETERS = 30_000_000
CHILD_MEMORY = 8 << 30  # bytes of address space a child may take

# --- sizes by name ---------------------------------------------------------------------

_LAYERS = re.compile(
    r"^(num_hidden_layers|num_layers|n_layers?|layers|depth|num_blocks|(encoder|decoder)_layers"
    r"|num_(encoder|decoder|text|vision|audio|cross_attention|self_attention|backbone|transformer)_layers"
    r"|(encoder|decoder|text|vision|audio|transformer)_num_layers|num_hidden_blocks|num_self_attends_per_block)$"
)
_BASE_CHANNELS = re.compile(r"^(base_channels|num_filters|base_dim)$")  # doubled stage by stage
_SCALE = re.compile(r"_coefficient$")  # EfficientNet's widths and depths scaled up
_HEADS = re.compile(r"^(num_attention_heads|n_heads?|num_heads|(encoder|decoder|text|vision)_attention_heads"
                    r"|\w+_num_attention_heads|attention_heads)$")
_KV_HEADS = re.compile(r"^(num_key_value_heads|num_kv_heads|n_kv_heads|(encoder|decoder)_num_key_value_heads)$")
_HIDDEN = re.compile(
    r"^(hidden_size|d_model|n_embd|n_embed|dim|embed_dim|embedding_size|hidden_dim|model_dim|d_embed|emb_dim"
    r"|word_embed_proj_dim|projection_dim|proj_dim|(text|vision|audio|encoder|decoder)_(hidden_size|embed_dim)"
    r"|(encoder|decoder)_d_model|embedding_dim|d_hidden|d_latents|output_dim|hidden_size_global)$"
    r"|_(hidden_size|embed_dim|hidden_dim|projection_dim)$|^hidden_size_per_"  # a part's width: out_hidden_size...
)
_INTERMEDIATE = re.compile(
    r"(intermediate_size|ffn_dim|^d_ff$|^n_inner$|^mlp_dim$|^ffn_hidden_size$|^d_inner$|^dim_feedforward$"
    r"|^(encoder|decoder)_ffn_dim$|^feed_forward_dim$|^mlp_hidden_size$)"
)
_HEAD_DIM = re.compile(r"^(head_dim|\w+_head_dim|d_kv|attention_head_size|rotary_dim)$")
_LAYER_INDEX = re.compile(r"(feature_layers?|layer_ids|layer_indices|out_indices|_layer_idx)$")  # layers picked by index
_LORA = re.compile(r"^(q_lora_rank|kv_lora_rank|time_step_rank|lora_rank)$")
_VOCAB = re.compile(r"(^|_)vocab(_size)?($|_per_)")
_SMALL_VOCAB = re.compile(r"^(type_vocab_size|token_type_vocab_size)$")
_TOKEN = re.compile(r"_(token_id|token_index|id)$")
_EXPERTS = re.compile(r"^(num_experts|n_routed_experts|num_local_experts|moe_num_experts|num_routed_experts|n_experts"
                      r"|\w+_expert_num)$")
_TOP_K = re.compile(r"^(num_experts_per_tok|num_experts_per_token|top_k|moe_topk|moe_k|num_selected_experts|router_top_k)$")
_IMAGE = re.compile(r"^(image_size|img_size|input_size|vision_image_size)$")
_PATCH = re.compile(r"^(patch_size|patch_sizes)$")
_DROPOUT = re.compile(r"(dropout|drop_path|layerdrop|drop_rate|_drop$|^mask_time_prob$|^mask_feature_prob$|_prob$)")
_STAGE_CHANNELS = re.compile(r"^(hidden_sizes|embed_dims|dims|channels|widths|embed_dim|num_channels_per_stage|hidden_dims)$")
_STAGE_DEPTHS = re.compile(r"^(depths|num_layers|layers|block_layers|stage_depths|num_blocks|blocks_per_stage)$")
_STAGE_HEADS = re.compile(r"^(num_heads|num_attention_heads|heads)$")

# Where a config needs more than its sizes shrunk: a model type -> a function of the
# shrinking that returns (model class name, config).
OVERRIDES: dict[str, Any] = {}


def _override(model_type: str) -> Any:
    def register(function: Any) -> Any:
        OVERRIDES[model_type] = function
        return function

    return register


def _small_int(name: str, value: int) -> Optional[int]:
    """The shrunk value of an integer setting called ``name`` (None: leave it)."""
    if _LAYERS.match(name):
        return min(value, LAYERS) if value > 0 else None
    if _KV_HEADS.match(name):
        return min(value, KV_HEADS) if value > 0 else None
    if _HEADS.match(name):
        return min(value, HEADS) if value > 0 else None
    if _HIDDEN.search(name):
        return min(value, HIDDEN) if value > 0 else None
    if _INTERMEDIATE.search(name):
        return min(value, INTERMEDIATE) if value > 0 else None
    if _HEAD_DIM.match(name):
        return min(value, HEAD_DIM) if value > 0 else None
    if _LORA.match(name):
        return min(value, 16) if value > 0 else None
    if _SMALL_VOCAB.match(name):
        return None
    if _VOCAB.search(name):
        return min(value, VOCAB) if value > 0 else None
    if _EXPERTS.match(name):
        return min(value, EXPERTS) if value > 0 else None
    if _TOP_K.match(name):
        return min(value, 2) if value > 0 else None
    if name in ("n_group", "topk_group", "num_expert_group"):
        return 1
    if _LAYER_INDEX.search(name):
        return min(value, LAYERS - 1)
    if _BASE_CHANNELS.match(name):
        return min(value, 32) if value > 0 else None
    if _IMAGE.match(name):
        return min(value, IMAGE)
    if _PATCH.match(name):
        return min(value, PATCH)
    if name == "window_size":  # a window as wide as the last stage's map of a small image
        return min(value, 2) if value > 0 else None
    return None


def _small_list(name: str, value: list) -> Optional[list]:
    """The shrunk value of a list of integers (per stage of a convolution net, say)."""
    if not value or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return None
    if _LAYER_INDEX.search(name):
        return [min(v, LAYERS - 1) for v in value] if max(value) >= LAYERS else None
    if _STAGE_DEPTHS.match(name):
        return [min(v, 1) if v > 0 else v for v in value]
    if _STAGE_HEADS.match(name):
        return [min(v, 2) for v in value]
    if _STAGE_CHANNELS.match(name):
        top = max(value)
        if top <= HIDDEN:
            return None
        return [max(8, int(round(v * HIDDEN / top / 8)) * 8) for v in value]
    if _IMAGE.match(name):
        return [min(v, IMAGE) for v in value]
    if _PATCH.match(name):
        return [min(v, PATCH) for v in value]
    return None


def _shrunk_value(name: str, value: Any) -> Any:
    """``value`` shrunk, or the value itself when no rule applies."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float) and _DROPOUT.search(name) and 0.0 < value < 1.0:
        return 0.0
    if isinstance(value, float) and _SCALE.search(name) and value > 1.0:
        return 1.0
    if isinstance(value, int):
        small = _small_int(name, value)
        return value if small is None else small
    if isinstance(value, (list, tuple)):
        small = _small_list(name, list(value))
        return value if small is None else type(value)(small)
    return value


def _token_ids(values: dict[str, Any], vocab: int) -> None:
    """Token ids past the shrunk vocabulary moved inside it, each to its own id from the top."""
    spare = vocab - 1
    for name in sorted(values):
        value = values[name]
        if not _TOKEN.search(name) or name.endswith("layer_id"):
            continue
        if isinstance(value, int) and not isinstance(value, bool) and value >= vocab:
            values[name], spare = spare, spare - 1
        elif isinstance(value, list) and all(isinstance(v, int) for v in value) and any(v >= vocab for v in value):
            fixed = []
            for v in value:
                if v >= vocab:
                    v, spare = spare, spare - 1
                fixed.append(v)
            values[name] = fixed


def _per_layer_lists(own: dict[str, Any], values: dict[str, Any]) -> None:
    """Lists with one entry per layer (``layer_types``, a hybrid's block pattern) cut to the
    shrunk layer count, each kind of layer kept where the count allows."""
    for count_name, count in own.items():
        if not (isinstance(count, int) and not isinstance(count, bool) and _LAYERS.match(count_name)):
            continue
        small = values.get(count_name)
        if not isinstance(small, int) or small >= count:
            continue
        for name, value in list(values.items()):
            if name == count_name or not isinstance(value, (list, tuple)) or len(value) != count:
                continue
            kinds = list(dict.fromkeys(v for v in value if isinstance(v, (str, int, bool))))
            if len(kinds) != len(set(map(repr, value))):  # unhashable or mixed entries: the first ones
                kept = list(value[:small])
            elif len(kinds) >= small:
                kept = kinds[:small] if len(kinds) > small else kinds
            else:
                kept = kinds + [value[-1]] * (small - len(kinds))
            values[name] = type(value)(kept)


def _heads_alike(own: dict[str, Any], values: dict[str, Any]) -> None:
    """As many key-value heads as heads where the config had as many (no grouped queries:
    DeepSeek's latent attention counts on it) or left them unset; an unset head width set
    (some models read it without working it out)."""
    heads = values.get("num_attention_heads")
    if isinstance(heads, int) and heads > 0:
        if "num_key_value_heads" in values and values["num_key_value_heads"] is None:
            values["num_key_value_heads"] = heads
        if "head_dim" in values and values["head_dim"] is None and isinstance(values.get("hidden_size"), int):
            values["head_dim"] = values["hidden_size"] // heads
    for name in own:
        if not _KV_HEADS.match(name):
            continue
        heads = name.replace("key_value_heads", "attention_heads").replace("kv_heads", "heads")
        if heads != name and own.get(heads) == own[name] and isinstance(values.get(heads), int):
            values[name] = values[heads]


def _groups_alike(own: dict[str, Any], values: dict[str, Any]) -> None:
    """A convolution's groups as many as the channels they were as many as (one per channel:
    Mimi's upsampling), shrunk alike."""
    for name, value in own.items():
        if not (name.endswith("groups") and isinstance(value, int) and value > 1 and values.get(name) == value):
            continue
        alike = [values[n] for n, v in own.items() if v == value and n != name and isinstance(values.get(n), int)
                 and values[n] != v and not isinstance(values[n], bool)]
        if alike:
            values[name] = min(alike)


def _rope_sections(config_class: Any, values: dict[str, Any]) -> None:
    """A multimodal rotary embedding's sections (time, height, width: ``mrope_section``)
    scaled to the shrunk rotary width, where the config has them or its model reads them."""
    rope = values.get("rope_parameters")
    if not isinstance(rope, dict):
        return
    if "mrope_section" not in rope and "mrope_section" not in getattr(config_class, "ignore_keys_at_rope_validation", ()):
        return
    sections = rope.get("mrope_section") or [8, 12, 12]  # the models' default where the config has none
    heads = values.get("num_attention_heads")
    head_dim = values.get("head_dim") or (values.get("hidden_size", HIDDEN) // heads if isinstance(heads, int) else None)
    if not isinstance(head_dim, int) or not sections:
        return
    half = int(head_dim * float(rope.get("partial_rotary_factor", values.get("partial_rotary_factor") or 1.0))) // 2
    if sum(sections) <= half:
        return
    scaled = [max(1, s * half // sum(sections)) for s in sections]
    scaled[-1] += half - sum(scaled)
    values["rope_parameters"] = dict(rope, mrope_section=scaled)


def shrunk_config(config_class: Any, **fixed: Any) -> Any:
    """A config of ``config_class`` with every size shrunk by its name (and ``fixed`` as
    given): sub-configs (a vision tower, a text model) shrunk alike."""
    default = config_class(**fixed)
    values: dict[str, Any] = {}
    accepted = set(inspect.signature(config_class.__init__).parameters)
    own = default.to_dict() if hasattr(default, "to_dict") else dict(vars(default))
    for name, value in own.items():
        if name not in accepted or name in fixed or name.startswith("_"):
            continue
        try:
            sub = getattr(default, name, None)
        except Exception:  # noqa: BLE001 - a setting read per layer only (Gemma 4's head_dim)
            sub = None
        if _is_config(sub):
            try:
                values[name] = shrunk_config(type(sub))
            except Exception:  # a sub-config that needs arguments of its own: keep the default
                values[name] = sub
            continue
        values[name] = _shrunk_value(name, value)
    _per_layer_lists(own, values)
    _heads_alike(own, values)
    _rope_sections(config_class, values)
    _groups_alike(own, values)
    vocab = values.get("vocab_size")
    if isinstance(vocab, int):
        _token_ids(values, vocab)
    else:
        _token_ids(values, VOCAB)
    for name in ("use_cache",):
        if name in accepted:
            values[name] = False
    values.update(fixed)
    return _constructed(config_class, own, values)


def _constructed(config_class: Any, own: dict[str, Any], values: dict[str, Any]) -> Any:
    """``config_class(**values)``; where the config refuses the combination (its validation
    ties two sizes together), sizes equal by default made equal again, then the settings its
    error names put back as they were, then the sub-configs as they were."""
    try:
        return config_class(**values)
    except Exception as error:  # noqa: BLE001 - some combination the config refuses
        last = error
    values = _equal_again(own, values)
    for _ in range(4):
        try:
            return config_class(**values)
        except Exception as error:  # noqa: BLE001
            last = error
        named = {name for name in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", str(last))
                 if name in values and name in own and values[name] != own[name] and not _is_config(values[name])}
        if not named:
            break
        values = dict(values, **{name: own[name] for name in named})
    values = {k: v for k, v in values.items() if not _is_config(v)}
    return config_class(**values)


def _equal_again(own: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with integer sizes that were equal before shrinking equal again (the
    smallest of their shrunk values): heads and key-value heads, a codebook's and the model's
    width, a vision tower's output and the text model's width (sub-configs one level down)."""
    import copy

    values = {k: copy.deepcopy(v) if _is_config(v) else v for k, v in values.items()}
    places: list[tuple[Any, str, int]] = []  # (dict or config, name, default)
    for name, value in own.items():
        if name not in values:
            continue
        if isinstance(value, dict) and _is_config(values[name]):
            places += [(values[name], sub, v) for sub, v in value.items() if hasattr(values[name], sub)]
        else:
            places.append((values, name, value))

    def read(holder: Any, name: str) -> Any:
        return holder[name] if isinstance(holder, dict) else getattr(holder, name, None)

    groups: dict[int, list[tuple[Any, str]]] = {}
    for holder, name, default in places:
        if isinstance(default, int) and not isinstance(default, bool) and default > 1 and not _TOKEN.search(name):
            groups.setdefault(default, []).append((holder, name))
    for default, members in groups.items():
        shrunk = [v for v in (read(h, n) for h, n in members) if isinstance(v, int) and v != default]
        if not shrunk or len(members) < 2:
            continue
        for holder, name in members:
            if isinstance(holder, dict):
                holder[name] = min(shrunk)
            else:
                with contextlib.suppress(Exception):
                    setattr(holder, name, min(shrunk))
    return values


def _is_config(value: Any) -> bool:
    return type(value).__name__.endswith("Config") and hasattr(value, "to_dict")


@_override("encoder-decoder")
def _encoder_decoder() -> tuple[str, Any]:
    import transformers

    encoder = shrunk_config(transformers.BertConfig)
    decoder = shrunk_config(transformers.BertConfig, is_decoder=True, add_cross_attention=True)
    return "EncoderDecoderModel", transformers.EncoderDecoderConfig.from_encoder_decoder_configs(encoder, decoder)


@_override("vision-encoder-decoder")
def _vision_encoder_decoder() -> tuple[str, Any]:
    import transformers

    encoder = shrunk_config(transformers.ViTConfig)
    decoder = shrunk_config(transformers.BertConfig, is_decoder=True, add_cross_attention=True)
    config = transformers.VisionEncoderDecoderConfig.from_encoder_decoder_configs(encoder, decoder)
    return "VisionEncoderDecoderModel", config


@_override("speech-encoder-decoder")
def _speech_encoder_decoder() -> tuple[str, Any]:
    import transformers

    encoder = shrunk_config(transformers.Wav2Vec2Config)
    decoder = shrunk_config(transformers.BertConfig, is_decoder=True, add_cross_attention=True)
    config = transformers.SpeechEncoderDecoderConfig.from_encoder_decoder_configs(encoder, decoder)
    return "SpeechEncoderDecoderModel", config


def _backbone_as_it_is(model_type: str) -> tuple[str, Any]:
    """A model whose backbone's stages are set out block by block (``block_configs``), which
    shrinking its depths would contradict: the backbone kept, the rest shrunk."""
    import transformers

    config_class = transformers.CONFIG_MAPPING[model_type]
    backbone = config_class().backbone_config
    return model_class_name(model_type) or "", shrunk_config(config_class, backbone_config=backbone)


for _type in ("slanet", "slanext"):
    OVERRIDES[_type] = lambda _type=_type: _backbone_as_it_is(_type)


# --- which model, which inputs -----------------------------------------------------------


def model_types() -> list[str]:
    """Every model type the installed transformers has a config for, sorted."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return sorted(CONFIG_MAPPING_NAMES)


def model_class_name(model_type: str) -> Optional[str]:
    """The class ``AutoModel`` builds for ``model_type``; where it has none, the first of
    the other auto mappings that has one (a causal LM, an image classifier...)."""
    from transformers.models.auto import modeling_auto

    mappings = [modeling_auto.MODEL_MAPPING_NAMES] + [
        getattr(modeling_auto, name) for name in sorted(dir(modeling_auto))
        if name.startswith("MODEL_FOR_") and name.endswith("_MAPPING_NAMES")
    ]
    for mapping in mappings:
        name = mapping.get(model_type)
        if isinstance(name, (list, tuple)):
            name = name[0] if name else None
        if name:
            return name
    return None


def own_model_class(config_class: Any) -> Any:
    """A model class of ``config_class``'s own ``modeling_*`` module whose ``config_class`` is
    it (a vision tower or text model that the auto mappings leave out), or None: the bare
    ``...Model`` before heads, shared base classes left out."""
    import importlib

    from transformers import PreTrainedModel

    name = config_class.__module__.replace(".configuration_", ".modeling_")
    try:
        module = importlib.import_module(name)
    except Exception:  # noqa: BLE001 - no modeling module of the same name (a config of another model's classes)
        return None
    found = [c for c in vars(module).values() if inspect.isclass(c) and issubclass(c, PreTrainedModel)
             and c.__module__ == module.__name__ and getattr(c, "config_class", None) is config_class]
    found = [c for c in found if not any(other is not c and issubclass(other, c) for other in found)]
    if not found:
        return None
    return min(found, key=lambda c: (not c.__name__.endswith("Model"), len(c.__name__), c.__name__))


def build(model_type: str) -> tuple[Any, Any]:
    """The model of ``model_type`` (random weights, training mode) and its config."""
    import torch
    import transformers

    if model_type in OVERRIDES:
        class_name, config = OVERRIDES[model_type]()
        model_class = getattr(transformers, class_name)
    else:
        config_class = transformers.CONFIG_MAPPING[model_type]
        class_name = model_class_name(model_type)
        model_class = getattr(transformers, class_name, None) if class_name else None
        model_class = model_class or own_model_class(config_class)
        if model_class is None:
            raise LookupError(f"no model class for {model_type!r} in the auto mappings or its modeling module")
        config = shrunk_config(config_class)
    try:  # counted on the meta device first: a config left large is refused, not allocated
        with torch.device("meta"):
            count = sum(p.numel() for p in model_class(config).parameters())
    except Exception:  # noqa: BLE001 - a model that cannot be built on meta: built for real, under the memory limit
        count = 0
    if count > MAX_PARAMETERS:
        raise ValueError(f"config not shrunk enough: {count:,} parameters (over {MAX_PARAMETERS:,})")
    torch.manual_seed(SEED)
    model = model_class(config)
    model.train()
    return model, config


def _setting(config: Any, names: tuple[str, ...], default: Any) -> Any:
    """The first of ``names`` set on ``config`` or on one of its sub-configs."""
    parts = [config] + [getattr(config, n) for n in ("vision_config", "text_config", "audio_config", "encoder",
                                                       "decoder", "backbone_config") if _is_config(getattr(config, n, None))]
    for part in parts:
        for name in names:
            value = getattr(part, name, None)
            if isinstance(value, (int, list, tuple)) and not isinstance(value, bool) and value:
                return value
    return default


_INPUT_NAMES = ("input_ids", "pixel_values", "pixel_values_videos", "images", "input_values", "audio_values",
                "raw_audio", "input_features", "spectrogram", "input_spectrograms", "audio_features")


def _inputs_named(name: str, config: Any, generator: Any) -> list[Any]:
    """Tensors for the input called ``name``: the shapes to try in turn (none: a name not known here)."""
    import torch

    if name == "input_ids":
        vocab = _setting(config, ("vocab_size",), VOCAB)
        high = int(vocab) if isinstance(vocab, int) else VOCAB
        return [torch.randint(min(3, high - 1), high, (1, TOKENS), generator=generator)]
    if name in ("pixel_values", "pixel_values_videos", "images"):
        size = _setting(config, ("image_size", "img_size", "input_size"), IMAGE)
        if isinstance(size, (list, tuple)):
            height, width = int(size[-2]), int(size[-1])
        else:
            height = width = int(size)
        channels = _setting(config, ("num_channels", "in_channels", "num_input_channels"), 3)
        channels = int(channels) if isinstance(channels, int) else 3
        tried = [torch.randn(1, channels, height, width, generator=generator)]
        if (height, width) != (IMAGE, IMAGE):
            tried.append(torch.randn(1, channels, IMAGE, IMAGE, generator=generator))
        tried.append(torch.randn(1, 2, channels, height, width, generator=generator))
        return tried
    bins = _setting(config, ("num_mel_bins", "feature_size", "n_mels", "input_feat_per_channel", "num_mel_filters"), 80)
    bins = int(bins) if isinstance(bins, int) else 80
    if name in ("input_values", "audio_values", "raw_audio"):
        return [torch.randn(1, AUDIO_SAMPLES, generator=generator), torch.randn(1, 1, AUDIO_SAMPLES, generator=generator),
                torch.randn(1, 64, bins, generator=generator)]  # a spectrogram's frames (audio spectrogram transformer)
    if name in ("hidden_states", "inputs_embeds"):  # a tower fed by another's output: vectors of its width
        width = _setting(config, ("hidden_size", "d_model", "embed_dim"), HIDDEN)
        return [torch.randn(1, TOKENS, int(width) if isinstance(width, int) else HIDDEN, generator=generator)]
    if name == "past_values":  # a time series: its context, one column per channel
        length = _setting(config, ("context_length",), 32)
        channels = _setting(config, ("num_input_channels", "input_size"), 1)
        length = int(length) if isinstance(length, int) else 32
        channels = int(channels) if isinstance(channels, int) else 1
        return [torch.randn(1, length, channels, generator=generator), torch.randn(1, length, generator=generator)]
    if name in ("input_features", "spectrogram", "input_spectrograms", "audio_features", "audio_mel"):
        frames = _setting(config, ("max_source_positions",), 32)
        frames = 2 * int(frames) if isinstance(frames, int) and frames <= 1500 else 64
        tried = [torch.randn(1, bins, frames, generator=generator), torch.randn(1, 64, bins, generator=generator)]
        if frames != 64:
            tried.append(torch.randn(1, bins, 64, generator=generator))
        tried.append(torch.randn(1, 1, 64, bins, generator=generator))  # one channel of frames (CLAP's audio)
        return tried
    return []


def dummy_inputs(model: Any, config: Any) -> list[dict[str, Any]]:
    """Inputs for one forward pass, from the model's ``main_input_name``: the ones to try in
    turn; then the same with every other input of ``forward`` known here (a text and an
    image for a model of both, such as CLIP)."""
    import torch

    name = getattr(model, "main_input_name", "input_ids")
    try:
        accepted = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        accepted = {}
    if accepted and name not in accepted:  # a name inherited from a base class: the first input forward knows
        name = next((n for n in accepted if n in _INPUT_NAMES), name)
    generator = torch.Generator().manual_seed(SEED)
    candidates: list[dict[str, Any]] = [{name: t} for t in _inputs_named(name, config, generator)]
    if not candidates:
        raise LookupError(f"main_input_name {name!r} has no dummy input here")
    others = {other: _inputs_named(other, config, generator) for other in accepted
              if other != name and other in _INPUT_NAMES}
    others = {other: tried for other, tried in others.items() if tried}
    if len(others) == 1:  # every shape of the other input with every shape of the main one
        ((other, tried),) = others.items()
        candidates += [dict(c, **{other: t}) for c in candidates for t in tried]
    elif others:
        candidates += [dict(c, **{other: tried[0] for other, tried in others.items()}) for c in candidates]
    if getattr(config, "is_encoder_decoder", False) or type(model).__name__.endswith("EncoderDecoderModel"):
        decoder_ids = torch.randint(3, VOCAB, (1, DECODER_TOKENS), generator=generator)
        vocab = _setting(getattr(config, "decoder", config), ("vocab_size",), VOCAB)
        if isinstance(vocab, int):
            decoder_ids = decoder_ids % vocab
        candidates = [dict(c, decoder_input_ids=decoder_ids) for c in candidates] + candidates
    return candidates


# --- one model through the pipeline --------------------------------------------------------


def svg_size(svg: bytes) -> Optional[tuple[float, float]]:
    """``(width, height)`` in points of an SVG that ``dot`` wrote."""
    found = re.search(rb'<svg width="([\d.]+)pt" height="([\d.]+)pt"', svg)
    return (float(found.group(1)), float(found.group(2))) if found else None


def undefined_edge_ends(source: str) -> list[str]:
    """The ids that edges of DOT ``source`` join but no node statement defines (none in a sound drawing)."""
    defined = set(re.findall(r"^\s*(n\d+) \[", source, re.MULTILINE))
    ends = set()
    for a, b in re.findall(r"^\s*(n\d+)(?::\w+)? -> (n\d+)", source, re.MULTILINE):
        ends.update((a, b))
    return sorted(ends - defined, key=lambda s: int(s[1:]))


def _cause(error: BaseException) -> str:
    """``Type: message`` and where it was raised: the innermost frame of ours, else the last."""
    frames = traceback.extract_tb(error.__traceback__)
    ours = [f for f in frames if "graphviz_autograd" in f.filename]
    frame = (ours or frames or [None])[-1]
    where = f" ({Path(frame.filename).name}:{frame.lineno} {frame.name})" if frame else ""
    message = str(error).strip().splitlines()[0][:300] if str(error).strip() else ""
    return f"{type(error).__name__}: {message}{where}"


def run_model(model_type: str, *, dot_timeout: float = 120.0) -> dict[str, Any]:
    """``model_type`` built small and taken through record, make_dot, ``dot -Tsvg``,
    make_dot(depth="full"), explore and check; what happened at each step.

    ``built`` says the model was built and ran a forward pass (else ``stage`` is
    ``build`` or ``forward`` and ``error`` why: a config or input this generic
    builder does not know, not a fault of ours); any later failure is ours.
    """
    import torch

    from graphviz_autograd import check, explore, make_dot, record
    from graphviz_autograd.views.page_fit import picture_size
    from tests.zoo import loss_of

    from transformers.utils import logging

    logging.set_verbosity_error()
    result: dict[str, Any] = {"type": model_type, "built": False, "stage": "build", "error": None}
    started = time.perf_counter()
    try:
        model, config = build(model_type)
        result["model"] = type(model).__name__
        result["parameters"] = sum(p.numel() for p in model.parameters())
        candidates = dummy_inputs(model, config)
    except Exception as error:  # noqa: BLE001 - a config this generic builder cannot make
        result["error"] = _cause(error)
        return result
    result["stage"] = "forward"
    outputs, rec, inputs, last = None, None, None, None
    for candidate in candidates:
        try:
            with record(model) as rec:
                torch.manual_seed(SEED + 1)
                outputs = model(**candidate)
            loss = loss_of(outputs)
            inputs = candidate
            break
        except Exception as error:  # noqa: BLE001 - inputs the model does not take
            last = last or error
    if inputs is None:
        result["error"] = _cause(last) if last else "no inputs"
        return result
    result["inputs"] = {k: list(v.shape) for k, v in inputs.items()}
    result["built"] = True
    result["forward_s"] = round(time.perf_counter() - started, 2)

    def stage(name: str) -> None:
        result["stage"] = name

    try:
        stage("make_dot")
        with contextlib.redirect_stderr(io.StringIO()):
            dot = make_dot(loss, recorder=rec)
        source = dot.source
        view = dot.prepared  # what make_dot decided to draw: the graph as drawn, its depth and spacing
        result["nodes"] = len(view.source.nodes)
        result["depth"] = "all" if view.depth is None else view.depth
        result["note"] = view.note
        result["drawn_count"] = len(view.graph.nodes)
        options = view.options
        estimate = picture_size(view.graph, options.direction, view.compact, options.clusters)
        result["estimate_pt"] = [round(estimate[0]), round(estimate[1])]
        missing = undefined_edge_ends(source)
        if missing:
            raise AssertionError(f"the default DOT has edges to undefined ids {missing[:5]}")
        stage("render")
        done = subprocess.run(["dot", "-Tsvg"], input=source.encode("utf-8"), capture_output=True,
                              timeout=dot_timeout)
        if done.returncode != 0:
            raise RuntimeError(f"dot -Tsvg failed: {done.stderr.decode(errors='replace')[:300]}")
        size = svg_size(done.stdout)
        result["svg_pt"] = [round(size[0]), round(size[1])] if size else None
        result["drawn"] = size is not None
        result["within_page"] = bool(size) and max(size) <= PAGE + 0.5
        words = re.sub(r"(\\[lnr]|\s)+", " ", source)  # a note is wrapped into lines ("too big for a\lpage")
        result["has_note"] = any(p in words for p in ("too big for a page", "does not fit", "not drawn whole"))
        stage("make_dot full")
        with contextlib.redirect_stderr(io.StringIO()):
            full = make_dot(loss, recorder=rec, depth="full").source
        missing = undefined_edge_ends(full)
        if missing:
            raise AssertionError(f"depth='full' has edges to undefined ids {missing[:5]}")
        stage("explore")
        page = explore(loss, recorder=rec)
        result["page_bytes"] = len(page.html().encode("utf-8"))
        result["explored"] = True
        stage("check")
        findings = check(loss, model, recorder=rec, backward=True)
        result["findings"] = [{"code": f.code, "severity": f.severity, "subject": f.subject,
                               "message": f.message[:400]} for f in findings]
        result["check_errors"] = sum(f.severity == "error" for f in findings)
        result["checked"] = True
        stage("done")
    except Exception as error:  # noqa: BLE001 - the failure of ours to report
        result["error"] = _cause(error)
        result["traceback"] = traceback.format_exc()[-3000:]
    result["seconds"] = round(time.perf_counter() - started, 2)
    return result


# --- many models, each in a child with a time limit ----------------------------------------


def _child(model_type: str, write_end: int) -> None:
    os.setpgid(0, 0)  # its own group: a timeout ends it and the dot it started
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))
    try:
        result = run_model(model_type)
    except BaseException as error:  # noqa: BLE001 - reported, never raised past the fork
        result = {"type": model_type, "built": False, "stage": "run", "error": _cause(error)}
    data = json.dumps(result, default=str).encode("utf-8")
    with os.fdopen(write_end, "wb") as pipe:
        pipe.write(data)
    os._exit(0)


def run_all(types: list[str], *, timeout: float, jobs: int, on_result: Any) -> list[dict[str, Any]]:
    """Each of ``types`` in a forked child, ``jobs`` at a time, stopped after ``timeout`` seconds."""
    import torch
    import transformers  # noqa: F401 - imported once, before the forks
    import transformers.modeling_utils  # noqa: F401 - what every model imports: 10 s a child otherwise
    from transformers import GenerationMixin, PreTrainedModel  # noqa: F401

    torch.set_num_threads(1)
    from transformers.utils import logging

    logging.set_verbosity_error()
    import graphviz_autograd.api  # noqa: F401
    import graphviz_autograd.explorer.pages  # noqa: F401
    import graphviz_autograd.checks.diagnosis  # noqa: F401
    import tests.zoo  # noqa: F401

    waiting = list(types)
    running: dict[int, tuple[str, int, float, bytearray]] = {}  # pid -> type, read end, start, data
    results: list[dict[str, Any]] = []
    while waiting or running:
        while waiting and len(running) < jobs:
            model_type = waiting.pop(0)
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read_end)
                _child(model_type, write_end)
            os.close(write_end)
            running[pid] = (model_type, read_end, time.monotonic(), bytearray())
        ready, _, _ = select.select([r for _, r, _, _ in running.values()], [], [], 1.0)
        for pid, (model_type, read_end, start, data) in list(running.items()):
            if read_end in ready:
                chunk = os.read(read_end, 1 << 20)
                if chunk:
                    data.extend(chunk)
                    continue
                os.close(read_end)
                os.waitpid(pid, 0)
                del running[pid]
                try:
                    result = json.loads(data.decode("utf-8"))
                except ValueError:
                    result = {"type": model_type, "built": None, "stage": "crashed",
                              "error": "the child died without a result (killed or out of memory)"}
                result["wall_s"] = round(time.monotonic() - start, 1)
                results.append(result)
                on_result(result)
            elif time.monotonic() - start > timeout:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                os.close(read_end)
                del running[pid]
                result = {"type": model_type, "built": None, "stage": "timeout",
                          "error": f"no result within {timeout:g} s", "wall_s": round(timeout, 1)}
                results.append(result)
                on_result(result)
    return results


# --- what it found ---------------------------------------------------------------------


def totals(results: list[dict[str, Any]], enumerated: int) -> dict[str, int]:
    built = [r for r in results if r.get("built")]
    return {
        "enumerated": enumerated,
        "run": len(results),
        "built": len(built),
        "drawn": sum(bool(r.get("drawn")) for r in built),
        "within a page": sum(bool(r.get("within_page")) for r in built),
        "over a page, with a note": sum(bool(r.get("drawn")) and not r.get("within_page") and bool(r.get("has_note"))
                                        for r in built),
        "explored": sum(bool(r.get("explored")) for r in built),
        "checked": sum(bool(r.get("checked")) for r in built),
        "checked without error": sum(bool(r.get("checked")) and r.get("check_errors", 0) == 0 for r in built),
        "timed out": sum(r.get("stage") == "timeout" for r in results),
    }


def failures(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Models that built and ran a forward pass, then failed a step of ours or timed out;
    pictures over a page; check errors."""
    rows = []
    for r in results:
        if r.get("stage") in ("timeout", "crashed", "run"):
            rows.append({"type": r["type"], "step": r["stage"], "cause": r.get("error")})
        elif r.get("built") and r.get("error"):
            rows.append({"type": r["type"], "step": r["stage"], "cause": r["error"]})
        elif r.get("built") and r.get("drawn") and not r.get("within_page"):
            rows.append({"type": r["type"], "step": "page", "cause": f"picture {r.get('svg_pt')} pt over a page"
                         + (" (with a note)" if r.get("has_note") else "")})
        if r.get("check_errors"):
            codes = sorted({f["code"] for f in r.get("findings", []) if f["severity"] == "error"})
            rows.append({"type": r["type"], "step": "check", "cause": "check error: " + ", ".join(codes)})
    return rows


def estimate_accuracy(results: list[dict[str, Any]]) -> dict[str, Any]:
    """How the page-size estimate compares with the SVG: the ratio actual / estimate of
    the long side (and of width and height), as percentiles over the run."""
    def ratios(pick: Any) -> list[float]:
        values = []
        for r in results:
            est, svg = r.get("estimate_pt"), r.get("svg_pt")
            if est and svg and pick(est) > 0:
                values.append(pick(svg) / pick(est))
        return sorted(values)

    def summary(values: list[float]) -> dict[str, Any]:
        if not values:
            return {}
        at = lambda q: round(values[min(len(values) - 1, int(q * len(values)))], 2)  # noqa: E731
        within = sum(0.67 <= v <= 1.5 for v in values) / len(values)
        return {"n": len(values), "min": round(values[0], 2), "p10": at(0.1), "median": at(0.5), "p90": at(0.9),
                "max": round(values[-1], 2), "within x1.5": round(within, 2)}

    # Both sides of a picture over or under a page: the one decision that counts.
    decided = [(max(r["estimate_pt"]) <= PAGE, max(r["svg_pt"]) <= PAGE) for r in results
               if r.get("estimate_pt") and r.get("svg_pt")]
    return {
        "long side": summary(ratios(max)),
        "width": summary(ratios(lambda s: s[0])),
        "height": summary(ratios(lambda s: s[1])),
        "estimated within a page but over": sum(e and not a for e, a in decided),
    }


def markdown(rows: list[dict[str, Any]], columns: list[str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(str(row.get(c, "")).replace("|", "\\|") for c in columns) + " |")
    return "\n".join(lines)


def warning_kinds(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Findings of severity warning or error, counted per code and message form (names and numbers taken out)."""
    counts: dict[tuple[str, str, str], set] = {}
    for r in results:
        for f in r.get("findings", []):
            if f["severity"] == "info":
                continue
            form = re.sub(r"\d[\d.,e+-]*", "N", f["message"].split(":", 1)[-1])[:90]
            counts.setdefault((f["severity"], f["code"], form), set()).add(r["type"])
    return [{"severity": s, "code": c, "form": form, "models": len(m), "e.g.": ", ".join(sorted(m)[:4])}
            for (s, c, form), m in sorted(counts.items(), key=lambda kv: -len(kv[1]))]


def report(results: list[dict[str, Any]], enumerated: int) -> str:
    out = ["## Totals", markdown([totals(results, enumerated)], list(totals(results, enumerated)))]
    out += ["", "## Failures", markdown(failures(results), ["type", "step", "cause"])]
    accuracy = estimate_accuracy(results)
    out += ["", "## Page-size estimate (actual / estimate)",
            markdown([dict(side=k, **v) for k, v in accuracy.items() if isinstance(v, dict) and v],
                     ["side", "n", "min", "p10", "median", "p90", "max", "within x1.5"]),
            f"estimated within a page but over: {accuracy['estimated within a page but over']}"]
    not_built: dict[str, int] = {}
    for r in results:
        if r.get("built") is False:
            not_built[(r.get("error") or "").split(":", 1)[0]] = not_built.get((r.get("error") or "").split(":", 1)[0], 0) + 1
    out += ["", "## Not built (configs or inputs this generic builder does not make), by error type",
            ", ".join(f"{k} {v}" for k, v in sorted(not_built.items(), key=lambda kv: -kv[1]))]
    out += ["", "## Warnings and errors of check(), by kind", markdown(warning_kinds(results),
                                                                        ["severity", "code", "form", "models", "e.g."])]
    return "\n".join(out)


COMMAND = "PYTHONPATH=. python -m benchmarks.breadth --json out.json --timeout 120"


def compact(data: dict[str, Any]) -> str:
    """A run's JSON (``--json``) as ``benchmarks/results/breadth.json`` keeps it: the totals
    and estimate, then one line per model type: what was built and drawn, its findings
    other than info (unused parameters counted, not listed), errors cut to 100 characters."""
    import transformers

    def row(r: dict[str, Any]) -> dict[str, Any]:
        out = {"type": r["type"]}
        if r.get("model"):
            out["model"] = r["model"]
        out.update(built=r.get("built"), stage=r.get("stage"))
        if r.get("error"):
            out["error"] = r["error"][:100]
        if not r.get("built"):
            return out
        for key in ("nodes", "depth", "svg_pt", "estimate_pt", "within_page"):
            if key in r:
                out[key] = r[key]
        if r.get("has_note") and not r.get("within_page"):
            out["has_note"] = True
        findings = [f for f in r.get("findings", []) if f["severity"] != "info"]
        out["findings"] = [[f["severity"], f["code"], f["subject"]] for f in findings if f["code"] != "unused_parameter"]
        unused = sum(f["code"] == "unused_parameter" for f in findings)
        if unused:
            out["unused_parameters"] = unused
        if "findings" in r:
            out["infos"] = sum(f["severity"] == "info" for f in r["findings"])
        return out

    results = sorted(data["results"], key=lambda r: r["type"])
    head = {"transformers": transformers.__version__, "command": COMMAND, "enumerated": data["enumerated"],
            "totals": totals(results, data["enumerated"]), "estimate": estimate_accuracy(results)}
    lines = [json.dumps(row(r), separators=(",", ":")) for r in results]
    return json.dumps(head, separators=(",", ":"))[:-1] + ',"results":[\n' + ",\n".join(lines) + "]}\n"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.breadth", description=__doc__.split("\n")[0])
    parser.add_argument("--only", help="these model types only (comma-separated)")
    parser.add_argument("--sample", type=int, help="this many model types drawn at random")
    parser.add_argument("--seed", type=int, default=0, help="the seed of --sample")
    parser.add_argument("--skip", help="model types to leave out (comma-separated)")
    parser.add_argument("--json", type=Path, help="write every model's result here (rewritten after each model)")
    parser.add_argument("--resume", action="store_true", help="keep the results of --json and run the rest")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per model (default 180)")
    parser.add_argument("--jobs", type=int, default=1, help="models at a time (default 1)")
    parser.add_argument("--compact", type=Path, help="write the results of --json, compacted, here (no run)")
    args = parser.parse_args(argv)
    if args.compact:
        if not args.json:
            parser.error("--compact needs --json, the run to compact")
        args.compact.write_text(compact(json.loads(args.json.read_text())))
        return 0
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    everything = model_types()
    types = [t.strip() for t in args.only.split(",") if t.strip()] if args.only else everything
    if args.sample:
        types = sorted(random.Random(args.seed).sample(types, min(args.sample, len(types))))
    if args.skip:
        types = [t for t in types if t not in set(args.skip.split(","))]
    results: list[dict[str, Any]] = []
    if args.resume and args.json and args.json.exists():
        results = json.loads(args.json.read_text())["results"]
        done = {r["type"] for r in results}
        types = [t for t in types if t not in done]

    def save(result: dict[str, Any]) -> None:
        results.append(result)
        print(f"{len(results):4d} {result['type']:<40} {result.get('stage')!s:<12} {result.get('wall_s')} s "
              f"{(result.get('error') or '')[:100]}", file=sys.stderr, flush=True)
        if args.json:
            data = {"enumerated": len(everything), "results": results}
            temporary = args.json.with_suffix(".tmp")
            temporary.write_text(json.dumps(data, indent=1, default=str))
            os.replace(temporary, args.json)

    run_all(types, timeout=args.timeout, jobs=max(1, args.jobs), on_result=save)
    if args.json:
        data = {"enumerated": len(everything), "totals": totals(results, len(everything)),
                "estimate": estimate_accuracy(results), "results": results}
        args.json.write_text(json.dumps(data, indent=1, default=str))
    print(report(results, len(everything) if not args.only else len(types)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
