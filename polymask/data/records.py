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
import traceback
import unicodedata

from polymask.errors import InvalidRecord, ModalityFailed, PolymaskError, one_line
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
    return normalize_record_with_changes(modality, text)[0]


def normalize_record_with_changes(modality: Modality, text: str) -> tuple[str, tuple[str, ...]]:
    """``normalize_record``, and the optional normalisation steps that changed the record. A modality that fails
    otherwise than with a ``PolymaskError`` (a custom one's bug), or returns no string, raises ``ModalityFailed``."""
    _check(modality, text)
    try:
        normalized, changes = modality.normalize_with_changes(text)
    except PolymaskError:  # InvalidRecord, or a message the modality meant for the user
        raise
    except Exception as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" ({frames[-1].filename}, line {frames[-1].lineno})" if frames else ""
        raise ModalityFailed(f"modality '{modality.name}' failed on the record {text[:40]!r}{where}: "
                             f"{type(exc).__name__}: {one_line(exc)}; a record it cannot use should raise "
                             f"polymask.InvalidRecord") from None
    if not isinstance(normalized, str):
        raise ModalityFailed(f"modality '{modality.name}': normalize returned {type(normalized).__name__}, not a "
                             f"string, for the record {text[:40]!r}")
    return normalized, changes
