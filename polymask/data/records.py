"""The checks every raw record passes before its modality sees it.

A record made only of whitespace, control or format characters is not a sequence; a record longer
than the modality's ``max_chars`` is rejected before any parser touches it (RDKit's canonicaliser
overflows the stack on a SMILES chain of ~19,000 atoms and kills the process).
"""
from __future__ import annotations

import unicodedata

from polymask.errors import InvalidRecord
from polymask.modalities.base import Modality


def _blank(text: str) -> bool:
    return all(char.isspace() or unicodedata.category(char).startswith("C") for char in text)


def normalize_record(modality: Modality, text: str) -> str:
    """``modality.normalize(text)`` after the shared checks; raises ``InvalidRecord`` with the reason."""
    if text and _blank(text):
        raise InvalidRecord("only whitespace or control characters")
    limit = modality.config.max_chars
    if limit is not None and len(text) > limit:
        raise InvalidRecord(f"{len(text):,} characters, over the {modality.name} limit of {limit:,} "
                            f"(modality.max_chars)")
    return modality.normalize(text)
