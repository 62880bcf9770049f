"""The checks every raw record passes before its modality sees it, on every path that reads records
(training, task data, predict, embed, span prediction, export samples): call ``normalize_record``, never
``Modality.normalize`` directly.

A record made only of whitespace, control or format characters is not a sequence; a string that is not
valid Unicode (a lone surrogate, as ``surrogateescape`` decoding leaves) cannot reach a tokenizer; a record
longer than the modality's ``max_chars`` is rejected before any parser touches it (RDKit's canonicaliser
overflows the stack on a SMILES chain of ~19,000 atoms and kills the process).
"""
from __future__ import annotations

import re
import unicodedata

from polymask.errors import InvalidRecord
from polymask.modalities.base import Modality

LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _blank(text: str) -> bool:
    if text.isprintable():  # no control, format or separator characters but the space (the common case, fast)
        return not text.strip()
    return all(char.isspace() or unicodedata.category(char).startswith("C") for char in text)


def _check(modality: Modality, text: str) -> None:
    if text and _blank(text):
        raise InvalidRecord("only whitespace or control characters")
    surrogate = None if text.isprintable() else LONE_SURROGATE.search(text)
    if surrogate:
        raise InvalidRecord(f"not valid Unicode (lone surrogate {surrogate.group()!r} at position {surrogate.start()}; "
                            f"undecodable bytes?)", kind="not valid Unicode")
    limit = modality.config.max_chars
    if limit is not None and len(text) > limit:
        raise InvalidRecord(f"{len(text):,} characters, over the {modality.name} limit of {limit:,} "
                            f"(modality.max_chars)", kind=f"longer than modality.max_chars ({limit:,})")


def normalize_record(modality: Modality, text: str) -> str:
    """``modality.normalize(text)`` after the shared checks; raises ``InvalidRecord`` with the reason."""
    _check(modality, text)
    return modality.normalize(text)


def normalize_record_with_changes(modality: Modality, text: str) -> tuple[str, tuple[str, ...]]:
    """``normalize_record``, and the optional normalisation steps that changed the record."""
    _check(modality, text)
    return modality.normalize_with_changes(text)
