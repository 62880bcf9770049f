"""ExLM's state expansion: masked positions (and the start and end tokens) become k states each.

For ``[CLS] a b [MASK] c [SEP]`` with k = 4 the expanded sequence is

    slot      0   1   2   3   4  5  6   7   8   9  10  11  12  13  14
    token     CLS CLS CLS CLS a  b  MASK MASK MASK MASK c SEP SEP SEP SEP
    original  0   0   0   0   1  2  3   3   3   3   4  5   5   5   5
    state     1   2   3   4   0  0  1   2   3   4   0  1   2   3   4

The k copies of a group share one token embedding ([MASK], or [CLS]/[SEP] for the entry and exit
groups, as in the reference implementation) and one original index; the state index 1..k tells
them apart (0 for visible tokens). Each group emits one target of the DAG: [CLS], the masked
tokens left to right, [SEP].
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class Expansion:
    """An expanded batch.

    input_ids (B, L'): expanded token ids, padded with ``pad_id``;
    attention_mask (B, L'): True for real slots, None when no row is padded;
    original_index, state_index (B, L'): the two position coordinates (0 on padding);
    state_slots (B, N): slot of each expanded state, in order (k per group), 0 on padding;
    state_mask (B, N): True for real states;
    targets (B, T): the token each group emits ([CLS], masked tokens, [SEP]), ``pad_id`` on padding;
    target_mask (B, T): True for real targets;
    first_slot (B, L): the slot of each original position (of its first state, for a group).
    """

    input_ids: Tensor
    attention_mask: Tensor | None
    original_index: Tensor
    state_index: Tensor
    state_slots: Tensor
    state_mask: Tensor
    targets: Tensor
    target_mask: Tensor
    first_slot: Tensor
    k: int

    @property
    def state_counts(self) -> Tensor:
        """Expanded states per row (B,): k times the number of targets."""
        return self.state_mask.sum(dim=1)

    @property
    def target_lengths(self) -> Tensor:
        """Targets per row (B,): masked tokens plus the entry and exit tokens."""
        return self.target_mask.sum(dim=1)

    def position_ids(self, two_d: bool) -> Tensor:
        """(B, L', 2) original and state index, or (B, L') slot index 0..L'-1 for 1D rotary positions."""
        if two_d:
            return torch.stack((self.original_index, self.state_index), dim=-1)
        return torch.arange(self.input_ids.shape[1], device=self.input_ids.device).expand_as(self.input_ids)


def left_align(flags: Tensor, values: Tensor, fill: int) -> tuple[Tensor, Tensor]:
    """Left-align ``values`` where ``flags`` is set, row by row: (B, max count) values and mask."""
    rank = flags.long().cumsum(dim=1) - 1
    width = int(flags.sum(dim=1).max()) if flags.numel() else 0
    rank = torch.where(flags, rank, torch.full_like(rank, width))  # unflagged go to a spill column
    out = torch.full((flags.shape[0], width + 1), fill, dtype=values.dtype, device=values.device)
    out.scatter_(1, rank, values)
    mask = torch.arange(width, device=flags.device) < flags.sum(dim=1, keepdim=True)
    return out[:, :width], mask


def expand_states(input_ids: Tensor, selected: Tensor, attention_mask: Tensor | None, k: int,
                  mask_id: int, pad_id: int, shown_ids: Tensor | None = None) -> Expansion:
    """Expand a batch: selected positions and each row's first and last real token become k states.

    input_ids (B, L) with [CLS] ... [SEP] and right padding; selected (B, L) the masked positions;
    shown_ids (B, L), default ``input_ids``: the tokens the other positions show (randomised ones differ).
    """
    batch, length = input_ids.shape
    device = input_ids.device
    real = torch.ones_like(selected) if attention_mask is None else attention_mask.bool()
    lengths = real.sum(dim=1)
    positions = torch.arange(length, device=device)
    is_end = positions == (lengths - 1)[:, None]
    grouped = (selected | (positions == 0) | is_end) & real
    repeats = torch.where(grouped, k, 1) * real
    ends = repeats.cumsum(dim=1)
    totals = ends[:, -1]
    width = int(totals.max())
    slots = torch.arange(width, device=device).expand(batch, width).contiguous()
    valid = slots < totals[:, None]
    original = torch.searchsorted(ends, slots, right=True).clamp(max=length - 1)
    group_start = (ends - repeats).gather(1, original)
    is_state = grouped.gather(1, original) & valid
    state = torch.where(is_state, slots - group_start + 1, 0)
    corrupted = (input_ids if shown_ids is None else shown_ids).masked_fill(selected, mask_id)
    expanded = torch.where(valid, corrupted.gather(1, original), pad_id)
    original = torch.where(valid, original, 0)
    state_slots, state_mask = left_align(is_state, slots, 0)
    targets, target_mask = left_align(grouped, input_ids, pad_id)
    return Expansion(expanded, None if bool(valid.all()) else valid, original, state, state_slots, state_mask,
                     targets, target_mask, ends - repeats, k)
