"""MAE-LM's compaction: drop the selected positions, keep the visible tokens at their original positions.

``compact_visible`` moves each row's visible tokens to the front (in order) and pads the rows to the
longest visible count, so the encoder runs on a (B, V) batch with V <= L instead of a full-length
batch with a mask. ``scatter_back`` puts encoder outputs back at their original positions.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from polymask.data.batching import round_up


@dataclass
class Compacted:
    """Visible tokens of a batch, front-aligned per row."""

    input_ids: Tensor        # (B, V) visible token ids, pad after each row's visible count
    position_ids: Tensor     # (B, V) original (uncompacted) index of each visible token
    attention_mask: Tensor | None  # (B, V) True for visible tokens; None when no row is padded
    valid: Tensor            # (B, V) True for visible tokens (never None)


def compact_visible(input_ids: Tensor, visible: Tensor, pad_id: int, multiple: int = 1) -> Compacted:
    """Keep the ``visible`` (B, L) positions of ``input_ids``, each at its original position id; the width is
    rounded up to a ``multiple`` (at most L)."""
    counts = visible.sum(dim=1)
    width = min(round_up(max(int(counts.max()), 1), multiple), input_ids.shape[1])
    order = (~visible).to(torch.int8).argsort(dim=1, stable=True)[:, :width]  # visible first, in order
    valid = torch.arange(width, device=input_ids.device)[None, :] < counts[:, None]
    ids = input_ids.gather(1, order).masked_fill(~valid, pad_id)
    positions = order.masked_fill(~valid, 0)
    mask = None if bool(valid.all()) else valid
    return Compacted(ids, positions, mask, valid)


def scatter_back(hidden: Tensor, compacted: Compacted, fill: Tensor, length: int) -> Tensor:
    """Full-length (B, L, D) states: ``hidden`` (B, V, D) at the original positions, ``fill`` (D,) elsewhere."""
    batch, _, width = hidden.shape
    full = fill.to(hidden.dtype).expand(batch, length, width).clone()
    rows = torch.arange(batch, device=hidden.device)[:, None].expand_as(compacted.valid)
    full[rows[compacted.valid], compacted.position_ids[compacted.valid]] = hidden[compacted.valid]
    return full
