"""Records kept out of a pretraining corpus (``data.exclude``), such as a benchmark's validation and test molecules.

Each exclusion file is read like a corpus file and normalised by the same modality, so a corpus record is
held out when its normalised form (for SMILES: the canonical SMILES) equals one of them. Held-out records are
not invalid: they leave both splits and are counted, in total and per exclusion file, in the corpus report.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from polymask.data.readers import read_records
from polymask.data.records import normalize_record
from polymask.errors import DataError, InvalidRecord
from polymask.modalities.base import Modality

#: The summary ``polymask benchmark-heldout`` writes beside its files; a folder's expansion passes over it.
HELDOUT_SUMMARY = "heldout.json"

def exclusion_files(paths: Sequence[Path]) -> list[Path]:
    """The files named by ``data.exclude``: files as given, folders expanded to the files directly inside (but
    hidden files and a ``heldout.json`` summary)."""
    files: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            files += sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith(".")
                            and p.name != HELDOUT_SUMMARY)
        elif path.is_file():
            files.append(path)
        else:
            raise DataError(f"data.exclude: {path} is neither a file nor a folder")
    return files


def load_exclusions(modality: Modality, paths: Sequence[Path]) -> dict[str, tuple[str, ...]]:
    """Normalised record -> names of the exclusion files holding it (records the modality rejects cannot
    match a corpus record and are passed over)."""
    held_out: dict[str, tuple[str, ...]] = {}
    for path in exclusion_files(paths):
        for record in read_records(path, None, modality.default_columns):
            if record.error:
                continue
            try:
                text = normalize_record(modality, record.text)
            except InvalidRecord:
                continue
            if path.name not in held_out.get(text, ()):
                held_out[text] = (*held_out.get(text, ()), path.name)
    return held_out


def in_held_out(batch: dict[str, list], held_out: dict[str, tuple[str, ...]], keep: bool) -> list[bool]:
    """``datasets`` filter: with ``keep``, the rows whose text ``held_out`` holds; without, the others."""
    return [(text in held_out) == keep for text in batch["text"]]
