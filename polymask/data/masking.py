"""Choosing and corrupting masked positions, shared by every objective.

All randomness comes from an explicit ``torch.Generator`` (seeded per step by the trainer), so a
resumed run masks exactly as the uninterrupted one would.
"""
from __future__ import annotations

import torch
from torch import Tensor


def maskable_positions(input_ids: Tensor, special_ids: Tensor) -> Tensor:
    """True where a token may be masked: every position that is not a special token."""
    return ~torch.isin(input_ids, special_ids)


def _lowest_ranks(maskable: Tensor, counts: Tensor, generator: torch.Generator) -> Tensor:
    """For each row, ``counts[row]`` maskable positions chosen uniformly without replacement."""
    scores = torch.rand(maskable.shape, generator=generator).to(maskable.device)
    scores = scores.masked_fill(~maskable, 2.0)
    ranks = scores.argsort(dim=1).argsort(dim=1)
    return (ranks < counts[:, None]) & maskable


def sample_mask(maskable: Tensor, ratio: float, generator: torch.Generator, span: int = 1) -> Tensor:
    """Boolean mask over (B, L) with about ``ratio`` of each row's maskable positions set.

    ``span == 1``: exactly round(ratio * n) positions per row (at least one). ``span > 1``: whole
    spans of ``span`` consecutive tokens (overlapping DNA k-mers); span starts are drawn at the rate
    that makes the expected masked fraction ``ratio`` despite overlaps.
    """
    available = maskable.sum(dim=1)
    if span == 1:
        counts = (available.float() * ratio).round().clamp(min=1).long()
        return _lowest_ranks(maskable, counts, generator)
    start_rate = 1.0 - (1.0 - ratio) ** (1.0 / span)
    counts = (available.float() * start_rate).round().clamp(min=1).long()
    starts = _lowest_ranks(maskable, counts, generator)
    mask = starts.clone()
    for shift in range(1, span):
        mask[:, shift:] |= starts[:, :-shift]
    return mask & maskable


def split_selected(selected: Tensor, generator: torch.Generator, mask_prob: float,
                   random_prob: float) -> tuple[Tensor, Tensor]:
    """BERT's split of the ``selected`` positions: (to [MASK], to a random token); the rest keep their token."""
    draw = torch.rand(selected.shape, generator=generator).to(selected.device)
    to_mask = selected & (draw < mask_prob)
    to_random = selected & (draw >= mask_prob) & (draw < mask_prob + random_prob)
    return to_mask, to_random


def replace_at_random(input_ids: Tensor, to_random: Tensor, random_pool: Tensor, generator: torch.Generator) -> Tensor:
    """``input_ids`` with a token drawn uniformly from ``random_pool`` at each ``to_random`` position."""
    choice = torch.randint(len(random_pool), to_random.shape, generator=generator).to(to_random.device)
    return torch.where(to_random, random_pool.to(to_random.device)[choice], input_ids)


def bert_corrupt(input_ids: Tensor, mask: Tensor, mask_id: int, random_pool: Tensor, generator: torch.Generator,
                 mask_prob: float = 0.8, random_prob: float = 0.1) -> Tensor:
    """BERT's corruption of the selected positions: [MASK] / a random token / unchanged."""
    to_mask, to_random = split_selected(mask, generator, mask_prob, random_prob)
    return replace_at_random(input_ids.masked_fill(to_mask, mask_id), to_random, random_pool, generator)
