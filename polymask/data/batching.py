"""Batches with little padding: length-bucketed sampling and padding collation."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
import torch
from torch import Tensor


@dataclass
class Batch:
    """Padded token ids; ``attention_mask`` is None when no sequence in the batch is padded."""

    input_ids: Tensor
    attention_mask: Tensor | None

    @property
    def real_tokens(self) -> int:
        if self.attention_mask is None:
            return self.input_ids.numel()
        return int(self.attention_mask.sum())

    @property
    def padded_tokens(self) -> int:
        return self.input_ids.numel()

    def pin_memory(self) -> "Batch":
        mask = None if self.attention_mask is None else self.attention_mask.pin_memory()
        return replace(self, input_ids=self.input_ids.pin_memory(), attention_mask=mask)

    def to(self, device: torch.device) -> "Batch":
        mask = None if self.attention_mask is None else self.attention_mask.to(device, non_blocking=True)
        return replace(self, input_ids=self.input_ids.to(device, non_blocking=True), attention_mask=mask)


def round_up(count: int, multiple: int) -> int:
    """``count`` rounded up to a multiple of ``multiple``: the one rule that bounds tensor shapes
    (``train.shape_multiple``: batch widths, MAE-LM's visible widths, the rows an LM head scores)."""
    return -(-count // multiple) * multiple


def collate(sequences: Sequence[Sequence[int]], pad_id: int, multiple: int = 1) -> Batch:
    """Right-pad sequences to the longest one, rounded up to a ``multiple`` of tokens."""
    lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
    width = round_up(int(lengths.max()), multiple)
    ids = np.full((len(sequences), width), pad_id, dtype=np.int64)
    for row, sequence in enumerate(sequences):
        ids[row, :len(sequence)] = sequence
    mask = None
    if lengths.min() != width:
        mask = torch.from_numpy(np.arange(width)[None, :] < lengths[:, None])
    return Batch(torch.from_numpy(ids), mask)


class BatchSampler:
    """Deterministic batches of sequence indices for each epoch.

    ``bucket``: shuffle, cut into pools of ``pool`` batches, sort each pool by length, cut into
    batches and shuffle the batches — similar lengths share a batch, so padding stays small.
    ``random``: plain shuffled batches.
    """

    def __init__(self, lengths: np.ndarray, batch_size: int, seed: int, mode: str = "bucket",
                 pool: int = 64, shuffle: bool = True) -> None:
        self.lengths = lengths
        self.batch_size = batch_size
        self.seed = seed
        self.mode = mode
        self.pool = pool
        self.shuffle = shuffle

    def epoch(self, epoch: int) -> list[np.ndarray]:
        """The batches of ``epoch`` (the same every time it is asked for)."""
        rng = np.random.default_rng([self.seed, epoch])
        count = len(self.lengths)
        order = rng.permutation(count) if self.shuffle else np.arange(count)
        size = self.batch_size
        if self.mode != "bucket":
            return [order[i:i + size] for i in range(0, count, size)]
        pool_size = size * self.pool if self.shuffle else max(count, 1)  # an empty split has no batches
        batches = []
        for start in range(0, count, pool_size):
            chunk = order[start:start + pool_size]
            chunk = chunk[np.argsort(self.lengths[chunk], kind="stable")]
            batches.extend(chunk[i:i + size] for i in range(0, len(chunk), size))
        if self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        return batches
