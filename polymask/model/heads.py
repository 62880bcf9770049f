"""Prediction networks on the pretrained encoder: a pooled linear layer per sequence, a start and an end score per
token. The loss and prediction rule of each task kind is its ``TaskKind`` (``polymask.tasks.finetune.kinds``)."""
from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn

from polymask.model.encoder import Encoder

Pooling = Literal["cls", "mean"]
HeadKind = Literal["linear", "mlp"]


def pool(hidden: Tensor, attention_mask: Tensor | None, pooling: Pooling) -> Tensor:
    """One vector per sequence: the [CLS] state, or the mean over real tokens."""
    if pooling == "cls":
        return hidden[:, 0]
    if attention_mask is None:
        return hidden.mean(dim=1)
    weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1)


class SequencePredictor(nn.Module):
    """Encoder -> pooling -> dropout -> head with one output per task (or class): a linear layer, or with ``head``
    "mlp" a hidden layer of the encoder's width, GELU and dropout before it. With ``n_features``, that many
    per-sequence features (``forward``'s ``features``) join the pooled vector before the head."""

    def __init__(self, encoder: Encoder, n_outputs: int, pooling: Pooling = "mean", dropout: float = 0.1,
                 n_features: int = 0, head: HeadKind = "linear") -> None:
        super().__init__()
        self.encoder = encoder
        self.pooling = pooling
        self.n_features = n_features
        self.n_outputs = n_outputs
        self.dropout = nn.Dropout(dropout)
        width, hidden = encoder.config.d_model + n_features, encoder.config.d_model
        output = nn.Linear(hidden if head == "mlp" else width, n_outputs)
        nn.init.normal_(output.weight, std=0.02)
        nn.init.zeros_(output.bias)
        self.head: nn.Module = (nn.Sequential(nn.Linear(width, hidden), nn.GELU(), nn.Dropout(dropout), output)
                                if head == "mlp" else output)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None, features: Tensor | None = None) -> Tensor:
        pooled = pool(self.encoder(input_ids, attention_mask=attention_mask), attention_mask, self.pooling)
        if self.n_features:
            if features is None or features.shape != (pooled.shape[0], self.n_features):
                raise ValueError(f"this predictor takes {self.n_features} features per sequence")
            pooled = torch.cat([pooled, features.to(pooled.dtype)], dim=-1)
        return self.head(self.dropout(pooled)).float()


class SpanPredictor(nn.Module):
    """Encoder -> one linear layer giving a start and an end score per token; disallowed positions masked."""

    def __init__(self, encoder: Encoder) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(encoder.config.d_model, 2)
        nn.init.normal_(self.head.weight, std=0.02)
        nn.init.zeros_(self.head.bias)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None, allowed: Tensor) -> tuple[Tensor, Tensor]:
        logits = self.head(self.encoder(input_ids, attention_mask=attention_mask)).float()
        logits = logits.masked_fill(~allowed.unsqueeze(-1), torch.finfo(torch.float32).min / 2)
        return logits[..., 0], logits[..., 1]
