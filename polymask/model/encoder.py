"""The shared encoder: token embedding, pre-LN Transformer blocks with rotary positions, final norm.

The encoder knows nothing about objectives. It takes explicit position ids so that MAE-LM can
run it on a compacted input (visible tokens keep their original positions) and ExLM can give a
second position coordinate (``rope_2d``).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from polymask.encoder_config import EncoderConfig
from polymask.model.layers import Block, RotaryEmbedding, key_mask


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
                  config.norm_eps, self.rope_sections, config.activation)
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
