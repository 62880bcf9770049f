"""Effective rank of a set of representations (rows of a matrix)."""
from __future__ import annotations

import torch
from torch import Tensor


def singular_values(states: Tensor) -> Tensor:
    """Singular values (fp64) of the row-centred matrix ``states`` (N, D)."""
    centred = states.double() - states.double().mean(dim=0, keepdim=True)
    return torch.linalg.svdvals(centred)


def variance_rank(values: Tensor, tau: float = 0.9) -> int:
    """Principal components needed to explain a fraction ``tau`` of the variance."""
    variance = values.square()
    if float(variance.sum()) == 0.0:
        return 0
    explained = variance.cumsum(0) / variance.sum()
    return int((explained < tau - 1e-12).sum()) + 1


def entropy_rank(values: Tensor) -> float:
    """Roy & Vetterli's effective rank: exp of the entropy of the normalised singular values."""
    total = values.sum()
    if float(total) == 0.0:
        return 0.0
    p = values / total
    p = p[p > 0]
    return float(torch.exp(-(p * p.log()).sum()))
