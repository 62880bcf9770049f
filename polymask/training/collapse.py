"""The collapse alarm: tell the user when pretraining has stopped learning from context.

A masked-LM objective that has collapsed predicts one token everywhere (its masked accuracy sits at
the frequency of the most frequent token, the *unigram accuracy*) or squeezes every token's final
hidden state into a few directions (a low *effective rank*). Learning curves hide both: the loss
still falls a little. At each evaluation the trainer measures both on the validation split and
warns once training is past its warm-up.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np
import torch
from torch import Tensor

from polymask.config import CollapseConfig
from polymask.effective_rank import singular_values, variance_rank


def unigram_accuracy(sequences: Iterable[Sequence[int]], special_ids: Sequence[int]) -> float:
    """Frequency of the most frequent maskable token: the masked accuracy of always predicting it."""
    ids = np.concatenate([np.asarray(sequence, dtype=np.int64) for sequence in sequences] or [np.zeros(0, np.int64)])
    ids = ids[~np.isin(ids, np.asarray(special_ids, dtype=np.int64))]
    return float(np.bincount(ids).max() / ids.size) if ids.size else 0.0


@dataclass
class CollapseMonitor:
    """Compares each evaluation with the unigram accuracy and the rank threshold; collects alarms."""

    config: CollapseConfig
    unigram: float
    first_step: int
    alarms: list[dict[str, Any]] = field(default_factory=list)
    last: dict[str, Any] = field(default_factory=dict)

    def check(self, step: int, val_accuracy: float | None, rank: int | None) -> list[str]:
        """Record this evaluation; return warning lines for whatever is collapsed."""
        self.last = {"step": step, "val_accuracy": val_accuracy, "rank": rank}
        if step < self.first_step:
            return []
        warnings = []
        limit = self.unigram + self.config.accuracy_margin
        if val_accuracy is not None and val_accuracy <= limit:
            self.alarms.append({"step": step, "kind": "unigram", "val_accuracy": val_accuracy, "limit": limit})
            warnings.append(f"collapse alarm at step {step}: val masked accuracy {val_accuracy:.4f} is at the "
                            f"unigram level ({self.unigram:.4f}: predicting the most frequent token everywhere)")
        if rank is not None and rank < self.config.min_rank:
            self.alarms.append({"step": step, "kind": "rank", "rank": rank, "limit": self.config.min_rank})
            warnings.append(f"collapse alarm at step {step}: final hidden states have effective rank {rank} "
                            f"(< {self.config.min_rank}): the encoder maps every token to a few directions")
        return warnings

    @property
    def collapsed(self) -> bool:
        """Whether the last evaluation (past the warm-up) raised an alarm."""
        return any(alarm["step"] == self.last.get("step") for alarm in self.alarms)

    def report(self) -> dict[str, Any]:
        """The summary's ``collapse`` section."""
        return {"unigram_accuracy": self.unigram, "accuracy_margin": self.config.accuracy_margin,
                "min_rank": self.config.min_rank, "first_step": self.first_step,
                "final_rank": self.last.get("rank"), "collapsed": self.collapsed, "alarms": self.alarms}


class FinalStates:
    """Collects, through a forward hook, the encoder's final hidden states of real tokens (not special,
    not [MASK], not padding) while the objective evaluates, whatever the objective feeds the encoder
    (MLM's corrupted input, MAE-LM's visible tokens, ExLM's expanded sequence) and however the model
    is wrapped (DDP, FSDP): no extra forward pass."""

    def __init__(self, encoder: torch.nn.Module, skip_ids: Sequence[int], max_tokens: int) -> None:
        self.encoder = encoder
        self.skip_ids = torch.tensor(list(skip_ids))
        self.max_tokens = max_tokens
        self.parts: list[Tensor] = []
        self.handle: Any = None

    def __enter__(self) -> "FinalStates":
        self.parts = []
        self.handle = self.encoder.register_forward_hook(self._collect, with_kwargs=True)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.handle.remove()

    def _collect(self, module: torch.nn.Module, args: tuple, kwargs: dict[str, Any], output: Any) -> None:
        input_ids = kwargs.get("input_ids", args[0] if args else None)
        if input_ids is None or not isinstance(output, Tensor) or self.gathered >= self.max_tokens:
            return
        keep = ~torch.isin(input_ids, self.skip_ids.to(input_ids.device))
        if kwargs.get("attention_mask") is not None:
            keep &= kwargs["attention_mask"].bool()
        self.parts.append(output.detach()[keep].float().cpu())

    @property
    def gathered(self) -> int:
        return sum(part.shape[0] for part in self.parts)

    def rank(self, tau: float = 0.9) -> int | None:
        """Effective rank (components for ``tau`` of the variance) of what was collected."""
        if self.gathered < 2:
            return None
        return variance_rank(singular_values(torch.cat(self.parts)[:self.max_tokens]), tau)
