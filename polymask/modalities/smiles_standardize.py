"""Optional RDKit standardisation of molecules (``rdMolStandardize``), each step an option of the SMILES
modality and off by default, applied in RDKit's recommended order: cleanup, largest fragment,
neutralisation, canonical tautomer. Every step reports whether it changed the molecule, so a run can
count what each did to its corpus.
"""
from __future__ import annotations

from functools import cache
from typing import Callable

from pydantic import Field
from rdkit import Chem
from rdkit.Chem.MolStandardize import rdMolStandardize

from polymask.errors import InvalidRecord
from polymask.schema import StrictModel


class StandardizeConfig(StrictModel):
    """Which ``rdMolStandardize`` steps to apply to every molecule before it is written as SMILES."""

    cleanup: bool = Field(False, description="rdMolStandardize.Cleanup: remove explicit Hs, disconnect metals, "
                                             "normalise functional groups (nitro, N-oxides, ...), reionise")
    largest_fragment: bool = Field(False, description="keep the largest organic fragment: strips salts, counter-ions "
                                                      "and solvents")
    neutralize: bool = Field(False, description="rdMolStandardize.Uncharger: neutralise charges where a neutral "
                                                "form exists (keeps zwitterions and quaternary N)")
    canonical_tautomer: bool = Field(False, description="rdMolStandardize.TautomerEnumerator canonical tautomer "
                                                        "(slow: about 10x the cost of parsing)")

    def steps(self) -> list[str]:
        """The enabled steps, in the order they are applied."""
        return [name for name in STEP_ORDER if getattr(self, name)]


STEP_ORDER = ("cleanup", "largest_fragment", "neutralize", "canonical_tautomer")


@cache
def _operations() -> dict[str, Callable[[Chem.Mol], Chem.Mol]]:
    """The RDKit operation of each step (built once per process: they are not picklable)."""
    chooser = rdMolStandardize.LargestFragmentChooser(preferOrganic=True)
    uncharger = rdMolStandardize.Uncharger()
    enumerator = rdMolStandardize.TautomerEnumerator()
    return {"cleanup": rdMolStandardize.Cleanup, "largest_fragment": chooser.choose,
            "neutralize": uncharger.uncharge, "canonical_tautomer": enumerator.Canonicalize}


def standardize(mol: Chem.Mol, steps: list[str]) -> tuple[Chem.Mol, tuple[str, ...]]:
    """Apply ``steps`` to ``mol``; returns the new molecule and the steps that changed it (its canonical
    SMILES differs before and after the step)."""
    changed = []
    before = Chem.MolToSmiles(mol)
    for step in steps:
        try:
            mol = _operations()[step](mol)
        except (RuntimeError, ValueError, Chem.rdchem.MolSanitizeException) as exc:
            raise InvalidRecord(f"RDKit standardisation ({step}) failed: {exc}",
                                kind=f"RDKit standardisation ({step}) failed") from None
        after = Chem.MolToSmiles(mol)
        if after != before:
            changed.append(step)
        before = after
    return mol, tuple(changed)
