"""polymask's encoder as transformers' native ``EsmModel``, weight for weight, where that is exact.

ESM (as transformers implements it since 4.x) is a pre-LayerNorm encoder with rotary positions
(half-split, base 10000 up to transformers 4.x), separate q/k/v projections with biases, the exact GELU, an
optional embedding LayerNorm (``emb_layer_norm_before``) and a final LayerNorm (``emb_layer_norm_after``);
its LM head is BERT's (dense, GELU, LayerNorm, tied projection plus bias). With ``token_dropout`` off that
is polymask's encoder and MLM head, operation for operation in evaluation (ESM applies no dropout to the
embeddings, polymask does: fine-tuning the exported model with ``hidden_dropout_prob`` > 0 regularises a
little differently). What does not map is named by
``native_blockers``.
"""
from __future__ import annotations

from typing import Any

import torch

from polymask.model.encoder import Encoder
from polymask.objectives.base import LMHead
from polymask.tokenization import SpecialIds

ROTARY_BASE = 10000.0  # transformers 4.x's EsmRotaryEmbedding fixes it
HF_ACTIVATIONS = {"gelu": "gelu", "gelu_tanh": "gelu_pytorch_tanh"}  # polymask's name -> transformers' hidden_act


def position_rows(max_len: int) -> int:
    """``max_position_embeddings``: ESM counts positions from ``pad_token_id + 1``; rotary positions have no limit."""
    return max(max_len, 2) + 2


def native_blockers(encoder: Encoder) -> list[str]:
    """Why this encoder cannot be a native ``EsmModel`` (empty when it can)."""
    config = encoder.config
    blockers = []
    if config.activation != "gelu":
        blockers.append("it was trained with the tanh-approximated GELU, which ESM does not have (ESM's is exact)")
    if config.rope_2d:
        blockers.append("ExLM's 2D rotary positions (token index, state index) have no native counterpart")
    if config.rope_theta != ROTARY_BASE:
        blockers.append(f"its rotary base is {config.rope_theta:g}; transformers 4.x's ESM fixes {ROTARY_BASE:g}")
    return blockers


def esm_config(encoder: Encoder, specials: SpecialIds, max_len: int) -> dict[str, Any]:
    """``EsmConfig`` fields for ``encoder``."""
    config = encoder.config
    return {
        "vocab_size": encoder.vocab_size, "hidden_size": config.d_model,
        "num_hidden_layers": config.n_layers, "num_attention_heads": config.n_heads,
        "intermediate_size": config.d_ff, "hidden_act": "gelu", "hidden_dropout_prob": config.dropout,
        "attention_probs_dropout_prob": config.attention_dropout, "layer_norm_eps": config.norm_eps,
        "max_position_embeddings": position_rows(max_len), "position_embedding_type": "rotary",
        "rope_theta": config.rope_theta, "emb_layer_norm_before": config.embed_norm, "token_dropout": False,
        "mask_token_id": specials.mask, "pad_token_id": specials.pad, "bos_token_id": specials.cls,
        "eos_token_id": specials.sep, "tie_word_embeddings": True,
        "is_folding_model": False, "vocab_list": None,
    }


def esm_weights(encoder: Encoder, max_len: int, head: LMHead | None = None) -> dict[str, torch.Tensor]:
    """The encoder's weights under ``esm.`` in ``EsmModel``'s names, and ``head`` as ``EsmLMHead`` (``lm_head.``;
    its projection is the tied input embedding).

    transformers 4.x builds an absolute position table even for rotary ESM and never reads it; it is written as
    zeros (``max_position_embeddings`` rows, as ``esm_config`` states) so that 4.x loads the folder without
    reporting an untrained weight. transformers 5.x ignores it on load.
    """
    state = encoder.state_dict()
    width = encoder.config.d_model
    weights = {"esm.embeddings.word_embeddings.weight": state["embed.weight"],
               "esm.embeddings.position_embeddings.weight": torch.zeros(position_rows(max_len), width),
               "esm.encoder.emb_layer_norm_after.weight": state["norm.weight"],
               "esm.encoder.emb_layer_norm_after.bias": state["norm.bias"]}
    if encoder.config.embed_norm:
        weights.update({"esm.embeddings.layer_norm.weight": state["embed_norm.weight"],
                        "esm.embeddings.layer_norm.bias": state["embed_norm.bias"]})
    for index in range(encoder.config.n_layers):
        block, layer = f"blocks.{index}.", f"esm.encoder.layer.{index}."
        renamed = {"norm1": "attention.LayerNorm", "attn.proj": "attention.output.dense", "norm2": "LayerNorm",
                   "mlp.fc": "intermediate.dense", "mlp.proj": "output.dense"}
        for ours, theirs in renamed.items():
            for kind in ("weight", "bias"):
                weights[f"{layer}{theirs}.{kind}"] = state[f"{block}{ours}.{kind}"]
        for kind in ("weight", "bias"):  # the fused qkv projection: rows [0, d) query, [d, 2d) key, [2d, 3d) value
            for part, name in enumerate(("query", "key", "value")):
                weights[f"{layer}attention.self.{name}.{kind}"] = \
                    state[f"{block}attn.qkv.{kind}"][part * width:(part + 1) * width]
        # the rotary frequencies, where transformers 4.x keeps them (5.x moves them to esm.rotary_embeddings on load)
        weights[f"{layer}attention.self.rotary_embeddings.inv_freq"] = encoder.rotary.inv_freq.clone()
    if head is not None:
        weights.update({"lm_head.dense.weight": head.dense.weight, "lm_head.dense.bias": head.dense.bias,
                        "lm_head.layer_norm.weight": head.norm.weight, "lm_head.layer_norm.bias": head.norm.bias,
                        "lm_head.bias": head.bias})
    return {name: tensor.detach().float().contiguous() for name, tensor in weights.items()}
