"""MAE-LM's shallow bidirectional decoder (dropped at fine-tuning and export)."""
from __future__ import annotations

import torch
from torch import Tensor, nn

from polymask.model.layers import Block, RotaryEmbedding


class ShallowDecoder(nn.Module):
    """A few pre-LN Transformer blocks with their own rotary positions over the full-length sequence.

    Input and output widths are the encoder's; a narrower decoder projects in and back out, so the
    prediction head stays tied to the encoder's input embedding.
    """

    def __init__(self, d_encoder: int, width: int, n_layers: int, n_heads: int, d_ff: int, dropout: float,
                 norm_eps: float, rope_theta: float, activation: str) -> None:
        super().__init__()
        if width % n_heads or (width // n_heads) % 2:
            raise ValueError(f"decoder width {width} / heads {n_heads} must be a whole, even head dimension")
        narrower = width != d_encoder
        self.project_in = nn.Linear(d_encoder, width) if narrower else nn.Identity()
        self.rotary = RotaryEmbedding(width // n_heads, rope_theta)
        self.blocks = nn.ModuleList(Block(width, n_heads, d_ff, dropout, dropout, norm_eps, 1, activation)
                                    for _ in range(n_layers))
        self.norm = nn.LayerNorm(width, eps=norm_eps)
        self.project_out = nn.Linear(width, d_encoder) if narrower else nn.Identity()
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=0.02 / (2 * n_layers) ** 0.5 if name.endswith(".proj") else 0.02)
                nn.init.zeros_(module.bias)

    def forward(self, states: Tensor, attention_mask: Tensor | None) -> Tensor:
        """Decode full-length ``states`` (B, L, D_encoder); padding keys are masked out."""
        x = self.project_in(states)
        rope = self.rotary(torch.arange(x.shape[1], device=x.device)[None, :])
        attn_mask = None if attention_mask is None else attention_mask[:, None, None, :]
        for block in self.blocks:
            x = block(x, rope, attn_mask)
        return self.project_out(self.norm(x))
