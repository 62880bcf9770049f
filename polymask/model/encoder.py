"""The shared encoder: token embedding, pre-LN Transformer blocks with rotary positions, final norm.

The encoder knows nothing about objectives. It takes explicit position ids so that MAE-LM can
run it on a compacted input (visible tokens keep their original positions) and ExLM can give a
second position coordinate (``rope_2d``).
"""
from __future__ import annotations

import math
from typing import Any, Literal

import torch
from pydantic import Field, model_validator
from torch import Tensor, nn

from polymask.model.layers import Block, RotaryEmbedding, key_mask
from polymask.schema import StrictModel

PRESETS: dict[str, dict[str, int]] = {
    "tiny": {"d_model": 64, "n_layers": 2, "n_heads": 2, "d_ff": 256},
    "mini": {"d_model": 256, "n_layers": 4, "n_heads": 4, "d_ff": 1024},
    "small": {"d_model": 512, "n_layers": 6, "n_heads": 8, "d_ff": 2048},
    "base": {"d_model": 768, "n_layers": 12, "n_heads": 12, "d_ff": 3072},
}


class EncoderConfig(StrictModel):
    """Encoder size and behaviour; ``preset`` fills the sizes, explicit fields override it."""

    preset: Literal["tiny", "mini", "small", "base"] = Field(
        "mini", description="size preset: tiny (tests), mini (4x256), small (6x512), base (BERT-base, 12x768)")
    d_model: int = Field(256, ge=8, description="hidden width")
    n_layers: int = Field(4, ge=1, description="Transformer blocks")
    n_heads: int = Field(4, ge=1, description="attention heads")
    d_ff: int = Field(1024, ge=8, description="MLP hidden width")
    dropout: float = Field(0.0, ge=0, lt=1, description="residual dropout")
    attention_dropout: float = Field(0.0, ge=0, lt=1, description="attention-probability dropout")
    rope_theta: float = Field(10000.0, gt=0, description="rotary base")
    rope_2d: bool = Field(False, description="two position coordinates (ExLM): half of each head per coordinate")
    norm_eps: float = Field(1e-5, gt=0, description="LayerNorm epsilon")
    embed_norm: bool = Field(
        True, description="LayerNorm on the token embeddings before the first block (RoBERTa's, ModernBERT's); "
                          "checkpoints written before it existed load with false")

    @model_validator(mode="before")
    @classmethod
    def _apply_preset(cls, data: Any) -> Any:
        if isinstance(data, dict):
            preset = data.get("preset", "mini")
            if preset in PRESETS:
                return {**PRESETS[preset], **data}
        return data

    @model_validator(mode="after")
    def _check_heads(self) -> "EncoderConfig":
        sections = 2 if self.rope_2d else 1
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % (2 * sections):
            raise ValueError(f"d_model ({self.d_model}) / n_heads ({self.n_heads}) must be a whole head "
                             f"dimension divisible by {2 * sections}")
        return self


class Encoder(nn.Module):
    """Bidirectional Transformer encoder over token ids (or precomputed input embeddings)."""

    def __init__(self, config: EncoderConfig, vocab_size: int) -> None:
        super().__init__()
        self.config = config
        self.vocab_size = vocab_size
        self.rope_sections = 2 if config.rope_2d else 1
        self.embed = nn.Embedding(vocab_size, config.d_model)
        self.embed_norm = nn.LayerNorm(config.d_model, eps=config.norm_eps) if config.embed_norm else nn.Identity()
        self.drop = nn.Dropout(config.dropout)
        self.rotary = RotaryEmbedding(config.d_model // config.n_heads, config.rope_theta, self.rope_sections)
        self.blocks = nn.ModuleList(
            Block(config.d_model, config.n_heads, config.d_ff, config.dropout, config.attention_dropout,
                  config.norm_eps, self.rope_sections)
            for _ in range(config.n_layers))
        self.norm = nn.LayerNorm(config.d_model, eps=config.norm_eps)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """BERT-style init; residual output projections scaled down by depth."""
        residual_std = 0.02 / math.sqrt(2 * self.config.n_layers)
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear):
                std = residual_std if name.endswith(".proj") else 0.02
                nn.init.normal_(module.weight, std=std)
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, std=0.02)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    @property
    def output_embedding(self) -> Tensor:
        """The (tied) vocabulary projection weight."""
        return self.embed.weight

    def forward(self, input_ids: Tensor | None = None, *, inputs_embeds: Tensor | None = None,
                attention_mask: Tensor | None = None, position_ids: Tensor | None = None,
                key_bias: Tensor | None = None, output_hidden_states: bool = False) -> Tensor | list[Tensor]:
        """Encode a batch.

        input_ids (B, L) or inputs_embeds (B, L, D); attention_mask (B, L), True for real tokens,
        None when nothing is padding; position_ids (B, L) or (B, L, 2), default 0..L-1; key_bias (B, L):
        added to every query's attention logit of each key (ExLM's -log k on expanded states), or None.
        Returns the final hidden states (B, L, D), or with ``output_hidden_states`` the list
        [embeddings, block 1, ..., block N (normed)].
        """
        x = self.embed_norm(self.embed(input_ids) if inputs_embeds is None else inputs_embeds)
        if position_ids is None:
            position_ids = torch.arange(x.shape[1], device=x.device).unsqueeze(0)
        rope = self.rotary(position_ids)
        attn_mask = key_mask(attention_mask, key_bias)
        x = self.drop(x)
        states = [x] if output_hidden_states else []
        for index, block in enumerate(self.blocks):
            x = block(x, rope, attn_mask)
            if output_hidden_states:
                states.append(self.norm(x) if index == len(self.blocks) - 1 else x)
        return states if output_hidden_states else self.norm(x)
