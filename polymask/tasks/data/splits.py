"""Train/valid/test splits: DeepChem's scaffold and random splitters, stratified, by a column, predefined files."""
from __future__ import annotations

import contextlib
import io
import logging
from typing import Any, Callable, Sequence

import numpy as np

from polymask.errors import InvalidRecord

Indices = tuple[np.ndarray, np.ndarray, np.ndarray]


def deepchem() -> Any:
    """Import DeepChem quietly (it prints notices about optional back-ends on import)."""
    logging.getLogger("deepchem").setLevel(logging.ERROR)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        import deepchem as dc
    return dc


def bemis_murcko_scaffold(smiles: str) -> str:
    """The Bemis-Murcko scaffold DeepChem's ScaffoldSplitter groups by."""
    return deepchem().splits.splitters._generate_scaffold(smiles)


def _dataset(smiles: Sequence[str]) -> Any:
    dc = deepchem()
    return dc.data.NumpyDataset(X=np.zeros((len(smiles), 1)), y=np.zeros((len(smiles), 1)), ids=np.array(smiles))


def _as_arrays(split: tuple[Sequence[int], Sequence[int], Sequence[int]]) -> Indices:
    return tuple(np.sort(np.asarray(part, dtype=np.int64)) for part in split)  # type: ignore[return-value]


def scaffold_split(smiles: Sequence[str], labels: np.ndarray, fractions: Sequence[float], seed: int) -> Indices:
    """DeepChem ``ScaffoldSplitter``: scaffold sets, largest first, fill train then valid then test."""
    splitter = deepchem().splits.ScaffoldSplitter()
    return _as_arrays(splitter.split(_dataset(smiles), *fractions))


def random_scaffold_split(smiles: Sequence[str], labels: np.ndarray, fractions: Sequence[float],
                          seed: int) -> Indices:
    """Balanced random scaffold split (Yang et al. 2019): scaffold sets in random order, the sets too big
    for valid/test first, each set filling train, then valid, then test."""
    groups: dict[str, list[int]] = {}
    for index, molecule in enumerate(smiles):
        groups.setdefault(bemis_murcko_scaffold(molecule), []).append(index)
    count = len(smiles)
    train_size, valid_size = fractions[0] * count, fractions[1] * count
    test_size = count - train_size - valid_size
    sets = list(groups.values())
    big = [g for g in sets if len(g) > valid_size / 2 or len(g) > test_size / 2]
    small = [g for g in sets if not (len(g) > valid_size / 2 or len(g) > test_size / 2)]
    rng = np.random.default_rng(seed)
    ordered = [big[i] for i in rng.permutation(len(big))] + [small[i] for i in rng.permutation(len(small))]
    train, valid, test = [], [], []
    for group in ordered:
        if len(train) + len(group) <= train_size:
            train += group
        elif len(valid) + len(group) <= valid_size:
            valid += group
        else:
            test += group
    return _as_arrays((train, valid, test))


def random_split(inputs: Sequence[str], labels: np.ndarray, fractions: Sequence[float], seed: int) -> Indices:
    """DeepChem ``RandomSplitter``."""
    splitter = deepchem().splits.RandomSplitter()
    return _as_arrays(splitter.split(_dataset(list(inputs)), *fractions, seed=seed))


def stratified_split(inputs: Sequence[str], labels: np.ndarray, fractions: Sequence[float], seed: int) -> Indices:
    """Class-stratified train/valid/test (scikit-learn) on the first label column."""
    from sklearn.model_selection import train_test_split

    labels = labels[:, 0]
    indices = np.arange(len(labels))
    train_fraction, valid_fraction, test_fraction = fractions
    train, rest = train_test_split(indices, train_size=train_fraction, stratify=labels, random_state=seed)
    valid, test = train_test_split(rest, test_size=test_fraction / (valid_fraction + test_fraction),
                                   stratify=labels[rest], random_state=seed)
    return _as_arrays((train, valid, test))


#: Split method name (``SplitSpec.method``) -> function(first inputs, labels, fractions, seed).
SPLITTERS: dict[str, Callable[[Sequence[str], np.ndarray, Sequence[float], int], Indices]] = {
    "scaffold": scaffold_split,
    "random_scaffold": random_scaffold_split,
    "random": random_split,
    "stratified": stratified_split,
}


#: What a split column may say (lower-cased) -> the part: 0 train, 1 valid, 2 test.
SPLIT_WORDS = {"train": 0, "training": 0, "valid": 1, "validation": 1, "val": 1, "dev": 1, "test": 2, "testing": 2}


def split_part(value: str) -> int:
    """The part a split column's field names (``SPLIT_WORDS``, any case); ``InvalidRecord`` for another word."""
    part = SPLIT_WORDS.get(value.strip().lower())
    if part is None:
        raise InvalidRecord(f"split {value.strip()!r} is not train, valid or test")
    return part


def column_split(parts: Sequence[int]) -> Indices:
    """Train / valid / test indices of examples whose parts (``split_part``) a column gave."""
    marks = np.asarray(parts, dtype=np.int64)
    return tuple(np.flatnonzero(marks == part) for part in range(3))  # type: ignore[return-value]
