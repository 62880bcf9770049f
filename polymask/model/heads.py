"""Prediction heads on the pretrained encoder, and the loss/prediction rule of each task kind."""
from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from polymask.model.encoder import Encoder

Pooling = Literal["cls", "mean"]


def pool(hidden: Tensor, attention_mask: Tensor | None, pooling: Pooling) -> Tensor:
    """One vector per sequence: the [CLS] state, or the mean over real tokens."""
    if pooling == "cls":
        return hidden[:, 0]
    if attention_mask is None:
        return hidden.mean(dim=1)
    weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1)


class SequencePredictor(nn.Module):
    """Encoder -> pooling -> dropout -> linear layer with one output per task (or class)."""

    def __init__(self, encoder: Encoder, n_outputs: int, pooling: Pooling = "mean", dropout: float = 0.1) -> None:
        super().__init__()
        self.encoder = encoder
        self.pooling = pooling
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(encoder.config.d_model, n_outputs)
        nn.init.normal_(self.head.weight, std=0.02)
        nn.init.zeros_(self.head.bias)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None) -> Tensor:
        hidden = self.encoder(input_ids, attention_mask=attention_mask)
        return self.head(self.dropout(pool(hidden, attention_mask, self.pooling))).float()


class TaskHead:
    """Loss and prediction rule of a task kind; ``labels`` are (B, T) float with NaN for missing."""

    kind: ClassVar[str]

    def __init__(self, train_labels: np.ndarray) -> None:
        self.train_labels = train_labels

    @classmethod
    def restore(cls, normalisation: dict[str, list[float]] | None) -> "TaskHead":
        """The prediction rule of a saved model, from its ``normalisation()`` instead of training labels."""
        return cls(np.empty((0, 0)))

    def loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        raise NotImplementedError

    def predict(self, logits: Tensor) -> np.ndarray:
        """Predictions in the metrics' convention (probabilities, or values in original units)."""
        raise NotImplementedError

    def normalisation(self) -> dict[str, list[float]] | None:
        """The target standardisation that ``predict`` undoes (saved with the model), if any."""
        return None


class BinaryHead(TaskHead):
    """One or more binary tasks; missing labels are masked out of the loss."""

    kind = "binary"

    def loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        present = ~torch.isnan(labels)
        return F.binary_cross_entropy_with_logits(logits[present], labels[present])

    def predict(self, logits: Tensor) -> np.ndarray:
        return torch.sigmoid(logits).cpu().numpy()


class MulticlassHead(TaskHead):
    kind = "multiclass"

    def loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        return F.cross_entropy(logits, labels[:, 0].long())

    def predict(self, logits: Tensor) -> np.ndarray:
        return torch.softmax(logits, dim=-1).cpu().numpy()


class RegressionHead(TaskHead):
    """Targets standardised with the training split's mean and std; predictions in original units."""

    kind = "regression"

    def __init__(self, train_labels: np.ndarray, normalisation: dict[str, list[float]] | None = None) -> None:
        super().__init__(train_labels)
        if normalisation is None:
            self.mean = np.nanmean(train_labels, axis=0)
            self.std = np.nanstd(train_labels, axis=0) + 1e-8
        else:
            self.mean, self.std = np.asarray(normalisation["mean"]), np.asarray(normalisation["std"])

    def loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        scaled = (labels - torch.as_tensor(self.mean, device=labels.device, dtype=labels.dtype)) / \
            torch.as_tensor(self.std, device=labels.device, dtype=labels.dtype)
        present = ~torch.isnan(scaled)
        return F.mse_loss(logits[present], scaled[present])

    def predict(self, logits: Tensor) -> np.ndarray:
        return logits.cpu().numpy() * self.std + self.mean

    def normalisation(self) -> dict[str, list[float]]:
        return {"mean": self.mean.tolist(), "std": self.std.tolist()}

    @classmethod
    def restore(cls, normalisation: dict[str, list[float]] | None) -> "RegressionHead":
        return cls(np.empty((0, len(normalisation["mean"]))), normalisation)


TASK_HEADS: dict[str, type[TaskHead]] = {head.kind: head for head in (BinaryHead, MulticlassHead, RegressionHead)}


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
