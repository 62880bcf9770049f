"""Test-time averaging: each record's label-preserving variants (``Modality.variants``: for a strand-free DNA label,
both strands and every k-mer reading frame; for a molecule, other atom orders), predicted one by one and averaged
back to one row per record."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Sequence

import numpy as np
from tokenizers import Tokenizer

from polymask.data.model_inputs import tokenize_normalised
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
    """The variants of normalised ``records`` under ``invariances`` (a task spec's ``invariant_to``). The parts of a
    pair record vary together, variant i of each, the part with fewer cycled (a symmetric molecule has few atom
    orders)."""
    inputs: list[tuple[str, ...]] = []
    owner: list[int] = []
    for index, parts in enumerate(records):
        options = [modality.variants(part, invariances) for part in parts]
        count = max(map(len, options))
        inputs += [tuple(each[i % len(each)] for each in options) for i in range(count)]
        owner += [index] * count
    return Variants(inputs, np.array(owner, dtype=np.int64), len(records))


def encode_variants(records: Sequence[tuple[str, ...]], modality: Modality, tokenizer: Tokenizer, max_len: int,
                    invariances: Collection[str]) -> tuple[Variants, list[list[int]]]:
    """``expand_variants`` and the token ids of each variant (``tokenize_normalised``), less, for a modality that
    ``drops_cut_variants`` (SMILES), the variants cut to ``max_len`` where their record is not (a randomised SMILES
    can run longer than the canonical record): a record read whole is never averaged with a cut copy of itself. Each
    record keeps its first variant, itself; an over-long record, cut on every path, keeps all its variants."""
    variants = expand_variants(records, modality, invariances)
    read = tokenize_normalised(variants.inputs, modality, tokenizer, max_len)
    if not modality.drops_cut_variants:
        return variants, read.ids
    cut = np.asarray(read.cut, dtype=bool)
    first = np.diff(variants.owner, prepend=-1) != 0  # owner is sorted: a record's variants are consecutive
    record_cut = np.zeros(variants.records, dtype=bool)
    record_cut[variants.owner[first]] = cut[first]
    kept = np.flatnonzero(first | ~cut | record_cut[variants.owner])
    return (Variants([variants.inputs[i] for i in kept], variants.owner[kept], variants.records),
            [read.ids[i] for i in kept])
