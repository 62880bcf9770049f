"""Where the trainer's micro-batches come from: an indexed (memory-mapped) corpus or a stream.

Both walk a deterministic, epoch-crossing sequence of micro-batches whose position is
(epoch, batch index), so a resumed run picks up exactly where the interrupted one stopped.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from polymask.data.batching import BatchSampler
from polymask.data.token_store import TokenStore


@dataclass
class MicroBatch:
    """Token sequences of one micro-batch, plus their normalised texts when augmentation needs them."""

    sequences: list[np.ndarray]
    texts: list[str] | None = None


@dataclass
class StreamPosition:
    epoch: int = 0
    batch_index: int = 0


class IndexedBatches:
    """Length-bucketed micro-batches over a memory-mapped ``TokenStore`` (the default)."""

    def __init__(self, store: TokenStore, sampler: BatchSampler) -> None:
        self.store = store
        self.sampler = sampler

    def take(self, count: int, position: StreamPosition) -> list[MicroBatch]:
        """The next ``count`` micro-batches; advances ``position``."""
        taken = []
        while len(taken) < count:
            batches = self.sampler.epoch(position.epoch)
            if position.batch_index >= len(batches):
                position.epoch += 1
                position.batch_index = 0
                continue
            indices = batches[position.batch_index]
            position.batch_index += 1
            texts = self.store.texts(indices) if self.store.has_text else None
            taken.append(MicroBatch([self.store[int(i)] for i in indices], texts))
        return taken

    def batches_per_epoch(self, position: StreamPosition) -> int:
        return len(self.sampler.epoch(position.epoch))


def bucketed(rows: Iterator[dict], batch_size: int, pool_batches: int, seed: tuple[int, ...]) -> Iterator[MicroBatch]:
    """Micro-batches from a row iterator: pools of ``pool_batches`` batches sorted by length, then shuffled."""
    rng = np.random.default_rng(list(seed))
    pool: list[dict] = []
    for row in rows:
        pool.append(row)
        if len(pool) == batch_size * pool_batches:
            yield from _cut(pool, batch_size, rng)
            pool = []
    if pool:
        yield from _cut(pool, batch_size, rng)


def _cut(pool: list[dict], batch_size: int, rng: np.random.Generator) -> Iterator[MicroBatch]:
    pool.sort(key=lambda row: row["length"])
    batches = [pool[i:i + batch_size] for i in range(0, len(pool), batch_size)]
    for index in rng.permutation(len(batches)):
        rows = batches[index]
        texts = [row["text"] for row in rows] if rows and row_has_text(rows[0]) else None
        yield MicroBatch([np.asarray(row["input_ids"]) for row in rows], texts)


def row_has_text(row: dict) -> bool:
    return bool(row.get("text"))
