"""Molecular features beside the encoder, as chemprop's extra features: named sets computed with RDKit from each
molecule's SMILES and concatenated to the pooled embedding before the head (``FinetuneConfig.extra_features``).
Descriptor sets are standardised with the training split's mean and std (kept in a saved model, with the names of
the columns, so that another RDKit release with other descriptors is refused); bit sets are used as they are."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from polymask.checkpoints.finetuned_meta import SavedFeatures
from polymask.errors import CheckpointError

if TYPE_CHECKING:
    import torch

#: Standardised values are clipped to this many standard deviations (RDKit descriptors have heavy tails).
CLIP = 6.0
MORGAN_BITS = 2048


def morgan_columns() -> list[str]:
    return [f"morgan_{bit}" for bit in range(MORGAN_BITS)]


def morgan_bits(smiles: Sequence[str]) -> np.ndarray:
    """ECFP4: Morgan radius-2 bit fingerprints, 2048 bits (N, 2048), as the ECFP + random forest baseline uses."""
    from rdkit import Chem
    from rdkit.Chem import rdFingerprintGenerator

    generator = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=MORGAN_BITS)
    rows = [generator.GetFingerprintAsNumPy(Chem.MolFromSmiles(text)) for text in smiles]
    return np.array(rows, dtype=np.uint8).reshape(len(rows), MORGAN_BITS)


def descriptor_columns() -> list[str]:
    """The 2D descriptors of the installed RDKit, in its order (the list changes between releases)."""
    from rdkit.Chem import Descriptors

    return [name for name, _ in Descriptors._descList]


def rdkit_descriptors(smiles: Sequence[str]) -> np.ndarray:
    """RDKit's 2D descriptors (``Descriptors.CalcMolDescriptors``; NaN where one fails), (N, columns) float64."""
    from rdkit import Chem, RDLogger
    from rdkit.Chem import Descriptors

    RDLogger.DisableLog("rdApp.*")
    rows = [list(Descriptors.CalcMolDescriptors(Chem.MolFromSmiles(text), missingVal=float("nan")).values())
            for text in smiles]
    return np.array(rows, dtype=np.float64).reshape(len(rows), len(descriptor_columns()))


@dataclass(frozen=True)
class FeatureSet:
    """A named feature set: its values for a list of SMILES, its column names, whether it is standardised."""

    compute: Callable[[Sequence[str]], np.ndarray]
    columns: Callable[[], list[str]]
    standardised: bool


FEATURE_SETS: dict[str, FeatureSet] = {
    "morgan": FeatureSet(morgan_bits, morgan_columns, False),
    "rdkit2d": FeatureSet(rdkit_descriptors, descriptor_columns, True),
}


@functools.lru_cache(maxsize=16)  # a task's molecules, for every seed and row of a benchmark
def _raw(names: tuple[str, ...], smiles: tuple[str, ...]) -> np.ndarray:
    """The feature sets' values for each molecule, an infinite one (RDKit's Gasteiger charges of some elements)
    missing (NaN) as a failed one is: one such training molecule would otherwise set its column's statistics."""
    raw = np.concatenate([FEATURE_SETS[name].compute(smiles).astype(np.float64) for name in names], axis=1)
    return np.where(np.isfinite(raw), raw, np.nan)


def _columns(names: Sequence[str]) -> list[str]:
    return [column for name in names for column in FEATURE_SETS[name].columns()]


@dataclass
class MoleculeFeatures:
    """The named feature sets of a fine-tuned model, their columns, and the training statistics that standardise
    them."""

    names: list[str]
    columns: list[str]
    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def fit(cls, names: Sequence[str], smiles: Sequence[str]) -> "MoleculeFeatures":
        """Statistics of the training molecules ``smiles`` (mean 0 and std 1 for sets used as they are)."""
        raw = _raw(tuple(names), tuple(smiles))
        scaled = np.concatenate([np.full(len(FEATURE_SETS[name].columns()), FEATURE_SETS[name].standardised)
                                 for name in names])
        with np.errstate(all="ignore"):
            mean = np.where(scaled, np.nan_to_num(np.nanmean(raw, axis=0)), 0.0)
            std = np.where(scaled, np.nan_to_num(np.nanstd(raw, axis=0)), 1.0)
        return cls(list(names), _columns(names), mean, np.where(std > 1e-12, std, 1.0))

    @property
    def width(self) -> int:
        return len(self.mean)

    def transform(self, smiles: Sequence[str]) -> np.ndarray:
        """(N, width) float32: standardised, clipped to ±``CLIP``, a missing or infinite value 0."""
        if not smiles:
            return np.zeros((0, self.width), dtype=np.float32)
        values = (_raw(tuple(self.names), tuple(smiles)) - self.mean) / self.std
        return np.clip(np.nan_to_num(values, nan=0.0), -CLIP, CLIP).astype(np.float32)

    def saved(self) -> SavedFeatures:
        """What a saved model keeps of them (``finetuned.json``'s ``extra_features``)."""
        return SavedFeatures(names=self.names, columns=self.columns, mean=self.mean.tolist(), std=self.std.tolist())

    @classmethod
    def from_saved(cls, saved: SavedFeatures) -> "MoleculeFeatures":
        """A saved model's features; its columns must be those this RDKit computes."""
        names = list(saved.names)
        here = _columns(names)
        if saved.columns != here:
            changed = next((f"{a} -> {b}" for a, b in zip(saved.columns, here) if a != b),
                           f"{len(saved.columns)} -> {len(here)} columns")
            raise CheckpointError(f"the model's {'+'.join(names)} features were computed by another RDKit release "
                                  f"(first difference: {changed}); predict with the RDKit it was trained with")
        return cls(names, here, np.array(saved.mean, dtype=np.float64), np.array(saved.std, dtype=np.float64))


def molecules(inputs: Sequence[Sequence[str]]) -> list[str]:
    """The molecule of each example: its first input."""
    return [parts[0] for parts in inputs]


def feature_rows(features: np.ndarray | None, indices: np.ndarray, device: "torch.device") -> "torch.Tensor | None":
    """The features of the examples at ``indices`` as a tensor on ``device`` (None without features)."""
    import torch

    return None if features is None else torch.as_tensor(features[indices]).to(device)
