"""Test-time averaging: each record's label-preserving variants (``Modality.variants``: for a strand-free DNA label,
both strands and every k-mer reading frame), predicted one by one and averaged back to one row per record."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Sequence

import numpy as np

from polymask.modalities.base import Modality


@dataclass
class Variants:
    """Every variant of every record, record by record; ``owner[i]``: the record variant ``i`` belongs to."""

    inputs: list[tuple[str, ...]]
    owner: np.ndarray
    records: int

    @property
    def per_record(self) -> float:
        """Variants per record, on average."""
        return len(self.inputs) / max(self.records, 1)

    def average(self, predictions: np.ndarray) -> np.ndarray:
        """Predictions (one row per variant) averaged over each record's variants: one row per record."""
        sums = np.zeros((self.records, predictions.shape[1]), dtype=np.float64)
        np.add.at(sums, self.owner, predictions)
        return sums / np.bincount(self.owner, minlength=self.records)[:, None]


def expand_variants(records: Sequence[tuple[str, ...]], modality: Modality,
                    invariances: Collection[str]) -> Variants:
    """The variants of normalised ``records`` under ``invariances`` (a task spec's ``invariant_to``). The two parts
    of a pair record vary together, variant i of each, as many as the part with fewer has."""
    inputs: list[tuple[str, ...]] = []
    owner: list[int] = []
    for index, parts in enumerate(records):
        varied = list(zip(*(modality.variants(part, invariances) for part in parts)))
        inputs += varied
        owner += [index] * len(varied)
    return Variants(inputs, np.array(owner, dtype=np.int64), len(records))
