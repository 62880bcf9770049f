"""MAE-LM's shallow bidirectional decoder (dropped at fine-tuning and export)."""
from __future__ import annotations

import torch
from torch import Tensor, nn

from polymask.model.layers import Block, RotaryEmbedding


class ShallowDecoder(nn.Module):
    """A few pre-LN Transformer blocks with their own rotary positions over the full-length sequence.

    Input and output widths are the encoder's; a narrower decoder projects in and back out, so the
    prediction head stays tied to the encoder's input embedding. ``absolute_positions`` (a table size) replaces
    the rotary positions with a learned table added to the input; ``input_norm`` normalises the input (after the
    positions), as the reference decoder's embedding LayerNorm does.
    """

    def __init__(self, d_encoder: int, width: int, n_layers: int, n_heads: int, d_ff: int, dropout: float,
                 norm_eps: float, rope_theta: float, activation: str, absolute_positions: int | None = None,
                 input_norm: bool = False) -> None:
        super().__init__()
        if width % n_heads or (width // n_heads) % 2:
            raise ValueError(f"decoder width {width} / heads {n_heads} must be a whole, even head dimension")
        narrower = width != d_encoder
        self.project_in = nn.Linear(d_encoder, width) if narrower else nn.Identity()
        self.rotary = RotaryEmbedding(width // n_heads, rope_theta)
        self.positions = nn.Embedding(absolute_positions, width) if absolute_positions else None
        self.input_norm = nn.LayerNorm(width, eps=norm_eps) if input_norm else nn.Identity()
        self.blocks = nn.ModuleList(Block(width, n_heads, d_ff, dropout, dropout, norm_eps, 1, activation)
                                    for _ in range(n_layers))
        self.norm = nn.LayerNorm(width, eps=norm_eps)
        self.project_out = nn.Linear(width, d_encoder) if narrower else nn.Identity()
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=0.02 / (2 * n_layers) ** 0.5 if name.endswith(".proj") else 0.02)
                nn.init.zeros_(module.bias)
        if self.positions is not None:
            nn.init.normal_(self.positions.weight, std=0.02)

    def forward(self, states: Tensor, attention_mask: Tensor | None) -> Tensor:
        """Decode full-length ``states`` (B, L, D_encoder); padding keys are masked out."""
        x = self.project_in(states)
        index = torch.arange(x.shape[1], device=x.device)[None, :]
        if self.positions is None:
            rope = self.rotary(index)
        else:
            if x.shape[1] > self.positions.num_embeddings:
                raise ValueError(f"sequence of {x.shape[1]} positions exceeds the decoder's position table "
                                 f"({self.positions.num_embeddings}); raise objective.decoder_max_positions")
            x = x + self.positions(index).to(x.dtype)
            rope = self.rotary(torch.zeros_like(index))  # angle 0: no rotation
        x = self.input_norm(x)
        attn_mask = None if attention_mask is None else attention_mask[:, None, None, :]
        for block in self.blocks:
            x = block(x, rope, attn_mask)
        return self.project_out(self.norm(x))
