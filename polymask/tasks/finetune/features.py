"""Molecular features beside the encoder, as chemprop's extra features: named sets computed with RDKit from each
molecule's SMILES and concatenated to the pooled embedding before the head (``FinetuneConfig.extra_features``).
Descriptor sets are standardised with the training split's mean and std (kept in a saved model); bit sets are
used as they are."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

#: Standardised values are clipped to this many standard deviations (RDKit descriptors have heavy tails).
CLIP = 6.0


def morgan_bits(smiles: Sequence[str], radius: int = 2, bits: int = 2048) -> np.ndarray:
    """ECFP4: Morgan radius-2 bit fingerprints, 2048 bits (N, 2048), as the ECFP + random forest baseline uses."""
    from rdkit import Chem
    from rdkit.Chem import rdFingerprintGenerator

    generator = rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=bits)
    return np.array([generator.GetFingerprintAsNumPy(Chem.MolFromSmiles(text)) for text in smiles], dtype=np.uint8)


def rdkit_descriptors(smiles: Sequence[str]) -> np.ndarray:
    """RDKit's 2D descriptors (``Descriptors.CalcMolDescriptors``; NaN where one fails), (N, 217) float64."""
    from rdkit import Chem, RDLogger
    from rdkit.Chem import Descriptors

    RDLogger.DisableLog("rdApp.*")
    rows = [Descriptors.CalcMolDescriptors(Chem.MolFromSmiles(text), missingVal=float("nan")) for text in smiles]
    return np.array([list(row.values()) for row in rows], dtype=np.float64).reshape(len(rows), -1)


#: name -> (features of a list of SMILES, whether they are standardised)
FEATURE_SETS: dict[str, tuple[Callable[[Sequence[str]], np.ndarray], bool]] = {
    "morgan": (morgan_bits, False),
    "rdkit2d": (rdkit_descriptors, True),
}


@dataclass
class MoleculeFeatures:
    """The named feature sets of a fine-tuned model and the training statistics that standardise them."""

    names: list[str]
    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def fit(cls, names: Sequence[str], smiles: Sequence[str]) -> "MoleculeFeatures":
        """Statistics of the training molecules ``smiles`` (mean 0 and std 1 for sets used as they are)."""
        parts = [FEATURE_SETS[name][0](smiles).astype(np.float64) for name in names]
        raw = np.concatenate(parts, axis=1)
        scaled = np.concatenate([np.full(part.shape[1], FEATURE_SETS[name][1]) for name, part in zip(names, parts)])
        with np.errstate(all="ignore"):
            mean = np.where(scaled, np.nan_to_num(np.nanmean(raw, axis=0)), 0.0)
            std = np.where(scaled, np.nan_to_num(np.nanstd(raw, axis=0)), 1.0)
        return cls(list(names), mean, np.where(std > 1e-12, std, 1.0))

    @property
    def width(self) -> int:
        return len(self.mean)

    def transform(self, smiles: Sequence[str]) -> np.ndarray:
        """(N, width) float32: standardised, clipped to ±``CLIP``, a missing or infinite value 0."""
        with np.errstate(all="ignore"):
            values = (_raw(self.names, smiles) - self.mean) / self.std
        return np.clip(np.nan_to_num(values, nan=0.0, posinf=CLIP, neginf=-CLIP), -CLIP, CLIP).astype(np.float32)

    def to_json(self) -> dict[str, Any]:
        return {"names": self.names, "mean": self.mean.tolist(), "std": self.std.tolist()}

    @classmethod
    def from_json(cls, saved: dict[str, Any]) -> "MoleculeFeatures":
        return cls(list(saved["names"]), np.array(saved["mean"], dtype=np.float64),
                   np.array(saved["std"], dtype=np.float64))


def _raw(names: Sequence[str], smiles: Sequence[str]) -> np.ndarray:
    return np.concatenate([FEATURE_SETS[name][0](smiles).astype(np.float64) for name in names], axis=1)
