"""A zoo of real architectures, built from tiny ``transformers`` configs with random weights.

Each entry builds a model of a family the library must draw (encoders, decoders,
encoder-decoders, mixtures of experts, vision transformers and convolution nets,
audio, multimodal and state-space models) and the inputs of one forward pass.
Nothing is downloaded: every model comes from a config of 2 layers, a hidden size
of 32 or so and a small vocabulary, so the whole zoo runs in seconds.

``tests/test_zoo.py`` holds what every one of them must do, and
``python -m benchmarks.zoo`` times the default picture of each.

>>> sorted(ZOO)[:3]
['albert', 'bart', 'bert']
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import torch

from graphviz_autograd.capture.naming import named_tensors

# The kinds of model the zoo must cover (a test keeps each one present).
ENCODER = "encoder"
DECODER = "decoder"
ENCODER_DECODER = "encoder-decoder"
MIXTURE_OF_EXPERTS = "mixture of experts"
VISION_ATTENTION = "vision (attention)"
VISION_CONVOLUTION = "vision (convolution)"
AUDIO = "audio"
MULTIMODAL = "multimodal"
STATE_SPACE = "state space"

KINDS = (
    ENCODER, DECODER, ENCODER_DECODER, MIXTURE_OF_EXPERTS, VISION_ATTENTION, VISION_CONVOLUTION, AUDIO, MULTIMODAL,
    STATE_SPACE,
)

SEED = 0
VOCAB = 96
TOKENS = 8
IMAGE = 32  # pixels on a side
# Weights drawn at the scale of a hidden size of 32 (about 1/sqrt(32)), not at the
# configs' 0.02, the scale of a 768-wide model: at 0.02 every attention score of so
# narrow a model is near zero, its queries and keys get a thousandth of the gradient
# of the other weights, and check() rightly says so of a model that is not clean.
INITIALIZER_RANGE = 0.2


class Animal(NamedTuple):
    """A zoo entry: the kind of model, and how to build it and its inputs."""

    kind: str
    build: Callable[[], torch.nn.Module]
    inputs: Callable[[], dict[str, Any]]


# Sizes shared by the text models: 2 layers, hidden 32, 2 heads, a small vocabulary.
_TEXT = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
_DECODER = dict(_TEXT, num_key_value_heads=2, max_position_embeddings=64, use_cache=False)
_NO_DROPOUT = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _tokens() -> dict[str, Any]:
    return {"input_ids": torch.arange(1, TOKENS + 1).unsqueeze(0)}


def _pixels(channels: int = 3, size: int = IMAGE) -> Callable[[], dict[str, Any]]:
    return lambda: {"pixel_values": torch.randn(1, channels, size, size)}


def _seq2seq() -> dict[str, Any]:
    return {"input_ids": torch.arange(1, TOKENS + 1).unsqueeze(0), "decoder_input_ids": torch.arange(2, 6).unsqueeze(0)}


def _model(class_name: str, config_name: str, **config: Any) -> Callable[[], torch.nn.Module]:
    def build() -> torch.nn.Module:
        import transformers

        model_config = getattr(transformers, config_name)(**config)
        for part in (model_config, *(getattr(model_config, f"{tower}_config", None) for tower in ("text", "vision"))):
            for scale in ("initializer_range", "init_std"):
                if part is not None and hasattr(part, scale):
                    setattr(part, scale, INITIALIZER_RANGE)
        return getattr(transformers, class_name)(model_config)

    return build


def _whisper_inputs() -> dict[str, Any]:
    # Whisper's encoder reads 2 * max_source_positions frames of num_mel_bins.
    return {"input_features": torch.randn(1, 8, 32), "decoder_input_ids": torch.arange(2, 6).unsqueeze(0)}


def _clip_inputs() -> dict[str, Any]:
    return {"input_ids": torch.arange(1, TOKENS + 1).unsqueeze(0), "pixel_values": torch.randn(1, 3, IMAGE, IMAGE)}


ZOO: dict[str, Animal] = {
    # --- encoders ---
    "bert": Animal(ENCODER, _model("BertModel", "BertConfig", **_TEXT, **_NO_DROPOUT), _tokens),
    "roberta": Animal(
        ENCODER, _model("RobertaModel", "RobertaConfig", **_TEXT, **_NO_DROPOUT, max_position_embeddings=40), _tokens
    ),
    "distilbert": Animal(
        ENCODER,
        _model("DistilBertModel", "DistilBertConfig", vocab_size=VOCAB, dim=32, n_layers=2, n_heads=2, hidden_dim=64,
               dropout=0.0, attention_dropout=0.0),
        _tokens,
    ),
    "albert": Animal(
        ENCODER,
        _model("AlbertModel", "AlbertConfig", **_TEXT, **_NO_DROPOUT, embedding_size=16, classifier_dropout_prob=0.0),
        _tokens,
    ),
    "deberta-v2": Animal(
        ENCODER,
        _model("DebertaV2Model", "DebertaV2Config", **_TEXT, **_NO_DROPOUT, max_relative_positions=16,
               position_buckets=8, relative_attention=True, pos_att_type=["p2c", "c2p"]),
        _tokens,
    ),
    "electra": Animal(
        ENCODER, _model("ElectraModel", "ElectraConfig", **_TEXT, **_NO_DROPOUT, embedding_size=16), _tokens
    ),
    # --- decoders ---
    "gpt2": Animal(
        DECODER,
        _model("GPT2LMHeadModel", "GPT2Config", vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2, n_positions=32,
               resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False),
        _tokens,
    ),
    "gpt-neo": Animal(
        DECODER,
        _model("GPTNeoForCausalLM", "GPTNeoConfig", vocab_size=VOCAB, hidden_size=32, num_layers=2, num_heads=2,
               attention_types=[[["global", "local"], 1]], window_size=4, max_position_embeddings=32,
               resid_dropout=0.0, embed_dropout=0.0, attention_dropout=0.0, use_cache=False),
        _tokens,
    ),
    "gpt-j": Animal(
        DECODER,
        _model("GPTJForCausalLM", "GPTJConfig", vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2, rotary_dim=8,
               n_positions=32, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False),
        _tokens,
    ),
    "opt": Animal(
        DECODER,
        _model("OPTForCausalLM", "OPTConfig", vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
               num_attention_heads=2, ffn_dim=64, word_embed_proj_dim=32, max_position_embeddings=32, dropout=0.0,
               use_cache=False),
        _tokens,
    ),
    "bloom": Animal(
        DECODER,
        _model("BloomForCausalLM", "BloomConfig", vocab_size=VOCAB, hidden_size=32, n_layer=2, n_head=2,
               use_cache=False),
        _tokens,
    ),
    "falcon": Animal(
        DECODER,
        _model("FalconForCausalLM", "FalconConfig", vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
               num_attention_heads=2, use_cache=False),
        _tokens,
    ),
    "llama": Animal(DECODER, _model("LlamaForCausalLM", "LlamaConfig", **_DECODER), _tokens),
    "mistral": Animal(DECODER, _model("MistralForCausalLM", "MistralConfig", **_DECODER, sliding_window=4), _tokens),
    "qwen2": Animal(DECODER, _model("Qwen2ForCausalLM", "Qwen2Config", **_DECODER), _tokens),
    "phi": Animal(
        DECODER,
        _model("PhiForCausalLM", "PhiConfig", **_DECODER, resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0),
        _tokens,
    ),
    "gemma": Animal(DECODER, _model("GemmaForCausalLM", "GemmaConfig", **_DECODER, head_dim=16), _tokens),
    # --- mixtures of experts: every token goes to every expert, so no expert is left unused ---
    "mixtral": Animal(
        MIXTURE_OF_EXPERTS,
        _model("MixtralForCausalLM", "MixtralConfig", **_DECODER, num_local_experts=2, num_experts_per_tok=2),
        _tokens,
    ),
    "qwen2-moe": Animal(
        MIXTURE_OF_EXPERTS,
        _model("Qwen2MoeForCausalLM", "Qwen2MoeConfig", **_DECODER, num_experts=2, num_experts_per_tok=2,
               moe_intermediate_size=32, shared_expert_intermediate_size=32),
        _tokens,
    ),
    # --- encoder-decoders ---
    "t5": Animal(
        ENCODER_DECODER,
        _model("T5Model", "T5Config", vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
               dropout_rate=0.0, use_cache=False),
        _seq2seq,
    ),
    "bart": Animal(
        ENCODER_DECODER,
        _model("BartModel", "BartConfig", vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2,
               encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
               max_position_embeddings=32, dropout=0.0, use_cache=False),
        _seq2seq,
    ),
    "whisper": Animal(
        AUDIO,
        _model("WhisperModel", "WhisperConfig", vocab_size=VOCAB, pad_token_id=0, bos_token_id=1, eos_token_id=2,
               decoder_start_token_id=1, d_model=32, encoder_layers=2, decoder_layers=2,
               encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
               num_mel_bins=8, max_source_positions=16, max_target_positions=16, dropout=0.0, use_cache=False),
        _whisper_inputs,
    ),
    # --- vision ---
    "vit": Animal(
        VISION_ATTENTION, _model("ViTModel", "ViTConfig", **_TEXT, **_NO_DROPOUT, image_size=IMAGE, patch_size=8),
        _pixels(),
    ),
    "swin": Animal(
        VISION_ATTENTION,
        _model("SwinModel", "SwinConfig", image_size=IMAGE, patch_size=4, embed_dim=16, depths=[1, 1],
               num_heads=[2, 2], window_size=4, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
               drop_path_rate=0.0),
        _pixels(),
    ),
    "mobilevit": Animal(
        VISION_ATTENTION,
        # Five halvings of the image: at 32 pixels the last batch norm sees one value per channel,
        # and patches of 1 pixel leave the last attention more than one patch to attend to.
        _model("MobileViTModel", "MobileViTConfig", image_size=2 * IMAGE, patch_size=1, hidden_sizes=[16, 16, 16],
               neck_hidden_sizes=[8, 8, 16, 16, 16, 16, 32], num_attention_heads=2, hidden_dropout_prob=0.0,
               attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0),
        _pixels(size=2 * IMAGE),
    ),
    "convnext": Animal(
        VISION_CONVOLUTION,
        _model("ConvNextModel", "ConvNextConfig", hidden_sizes=[8, 16], depths=[1, 1], num_stages=2,
               image_size=IMAGE, drop_path_rate=0.0, layer_scale_init_value=1.0),
        _pixels(),
    ),
    "resnet": Animal(
        VISION_CONVOLUTION,
        _model("ResNetModel", "ResNetConfig", embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
               layer_type="basic"),
        _pixels(),
    ),
    # --- audio, multimodal, state space ---
    "wav2vec2": Animal(
        AUDIO,
        _model("Wav2Vec2Model", "Wav2Vec2Config", hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
               intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 4), conv_kernel=(10, 8),
               num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, hidden_dropout=0.0,
               attention_dropout=0.0, activation_dropout=0.0, feat_proj_dropout=0.0, layerdrop=0.0,
               mask_time_prob=0.0),
        lambda: {"input_values": torch.randn(1, 4000)},
    ),
    "clip": Animal(
        MULTIMODAL,
        _model("CLIPModel", "CLIPConfig",
               text_config=dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                intermediate_size=64, max_position_embeddings=16, projection_dim=16),
               vision_config=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                  image_size=IMAGE, patch_size=8, projection_dim=16),
               projection_dim=16),
        _clip_inputs,
    ),
    "mamba": Animal(
        STATE_SPACE,
        _model("MambaForCausalLM", "MambaConfig", vocab_size=VOCAB, hidden_size=32, state_size=8, num_hidden_layers=2,
               expand=2, conv_kernel=4, use_cache=False),
        _tokens,
    ),
}


def build(name: str) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The model ``name`` of the zoo in training mode, and its inputs, from seed ``SEED``."""
    from transformers.utils import logging

    logging.set_verbosity_error()  # tiny vocabularies and configs make it warn
    animal = ZOO[name]
    torch.manual_seed(SEED)
    model = animal.build()
    model.train()
    return model, animal.inputs()


def loss_of(outputs: Any) -> torch.Tensor:
    """One scalar from every floating-point output that carries gradient (a pooler or a
    second tower is part of the model: leaving it out would leave its parameters unused).

    Each output is weighed by fixed random numbers: the plain mean of a layer norm's
    output depends on its bias alone, which would leave every layer below without gradient.
    """
    generator = torch.Generator().manual_seed(SEED)
    parts = [
        (t.float() * torch.randn(t.shape, generator=generator)).mean()
        for _, t in named_tensors(outputs)
        if t.requires_grad and t.is_floating_point()
    ]
    return torch.stack(parts).sum()


def forward(model: torch.nn.Module, inputs: dict[str, Any]) -> Any:
    """The model's outputs on ``inputs``, with the seed set so that two runs draw the same."""
    torch.manual_seed(SEED + 1)
    return model(**inputs)
