"""Transformer building blocks: rotary positions (1D or 2D), self-attention, MLP, pre-LN block."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class RotaryEmbedding(nn.Module):
    """Rotary position embedding over ``sections`` position coordinates.

    With one section the whole head dimension rotates by the token index. With two (ExLM's 2D
    positions) the first half of each head rotates by the first coordinate (the original token
    index) and the second half by the second (the state index; 0 leaves that half unrotated).
    """

    def __init__(self, head_dim: int, theta: float, sections: int = 1) -> None:
        super().__init__()
        if head_dim % (2 * sections):
            raise ValueError(f"head dimension {head_dim} must be divisible by {2 * sections}")
        self.sections = sections
        section = head_dim // sections
        inv_freq = 1.0 / theta ** (torch.arange(0, section, 2, dtype=torch.float32) / section)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        """cos and sin of shape (B, 1, L, head_dim) for positions (B, L) or (B, L, sections)."""
        if positions.dim() == 2:
            positions = positions.unsqueeze(-1)
        missing = self.sections - positions.shape[-1]
        if missing < 0:
            raise ValueError(f"got {positions.shape[-1]} position coordinates, the encoder has {self.sections}")
        if missing:
            positions = F.pad(positions, (0, missing))
        angles = positions.float().unsqueeze(-1) * self.inv_freq  # (B, L, S, section/2)
        angles = torch.cat((angles, angles), dim=-1).flatten(-2)  # (B, L, head_dim)
        return angles.cos().unsqueeze(1), angles.sin().unsqueeze(1)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor, sections: int) -> Tensor:
    """Rotate ``x`` (B, H, L, D) by the angles in ``cos``/``sin``, half-split within each section."""
    *lead, dim = x.shape
    halves = x.view(*lead, sections, 2, dim // (2 * sections))
    first, second = halves.unbind(-2)
    rotated = torch.stack((-second, first), dim=-2).view_as(x)
    return x * cos.to(x.dtype) + rotated * sin.to(x.dtype)


def key_mask(attention_mask: Tensor | None, key_bias: Tensor | None) -> Tensor | None:
    """The (B, 1, 1, L) mask ``attention`` takes: boolean key padding (True where a key may be attended) or,
    with a per-key additive bias (B, L), that bias with -inf on padding."""
    if key_bias is None:
        return None if attention_mask is None else attention_mask[:, None, None, :]
    if attention_mask is not None:
        key_bias = key_bias.masked_fill(~attention_mask.bool(), float("-inf"))
    return key_bias[:, None, None, :]


def attention(q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None, dropout: float) -> Tensor:
    """Scaled dot-product attention; ``attn_mask`` is boolean (True where a key may be attended) or an
    additive float bias (``key_mask``).

    On CPU in bf16 the fused SDPA kernels are 3-8x slower than two plain matrix products for the
    short sequences polymask trains on, so that case uses the explicit form (softmax in fp32).
    """
    additive = attn_mask is not None and attn_mask.dtype != torch.bool
    if q.device.type != "cpu" or q.dtype != torch.bfloat16:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask.to(q.dtype) if additive else attn_mask,
                                              dropout_p=dropout)
    scores = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    if attn_mask is not None:
        scores = scores.float() + attn_mask if additive else scores.masked_fill(~attn_mask, float("-inf"))
    probs = F.dropout(scores.float().softmax(dim=-1), dropout).to(v.dtype)
    return probs @ v


class SelfAttention(nn.Module):
    """Bidirectional multi-head self-attention with rotary positions, via SDPA."""

    def __init__(self, d_model: int, n_heads: int, dropout: float, rope_sections: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.dropout = dropout
        self.rope_sections = rope_sections
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor, rope: tuple[Tensor, Tensor], attn_mask: Tensor | None) -> Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, self.n_heads, -1).permute(2, 0, 3, 1, 4)
        cos, sin = rope
        q = apply_rotary(q, cos, sin, self.rope_sections)
        k = apply_rotary(k, cos, sin, self.rope_sections)
        y = attention(q, k, v, attn_mask, self.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).reshape(batch, length, width))


def gelu(x: Tensor, activation: str) -> Tensor:
    """``activation`` of ``EncoderConfig``: ``gelu`` (exact, erf) or ``gelu_tanh`` (tanh approximation)."""
    return F.gelu(x, approximate="tanh" if activation == "gelu_tanh" else "none")


class MLP(nn.Module):
    def __init__(self, d_model: int, d_ff: int, activation: str) -> None:
        super().__init__()
        self.activation = activation
        self.fc = nn.Linear(d_model, d_ff)
        self.proj = nn.Linear(d_ff, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(gelu(self.fc(x), self.activation))


class Block(nn.Module):
    """Pre-LayerNorm Transformer block."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float, attention_dropout: float,
                 norm_eps: float, rope_sections: int, activation: str) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model, eps=norm_eps)
        self.attn = SelfAttention(d_model, n_heads, attention_dropout, rope_sections)
        self.norm2 = nn.LayerNorm(d_model, eps=norm_eps)
        self.mlp = MLP(d_model, d_ff, activation)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, rope: tuple[Tensor, Tensor], attn_mask: Tensor | None) -> Tensor:
        x = x + self.drop(self.attn(self.norm1(x), rope, attn_mask))
        return x + self.drop(self.mlp(self.norm2(x)))
