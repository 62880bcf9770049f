"""Read records from corpus files: .txt, .smi, .csv/.tsv, FASTA, .jsonl, .parquet (gzip allowed).

Each record carries its file and line so that a bad one can be reported precisely. A record that
cannot even be read (a malformed JSON line, a missing column value) is yielded with ``error`` set,
so the pipeline reports it like any other invalid record.
"""
from __future__ import annotations

import csv
import gzip
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

from polymask.errors import DataError


@dataclass(frozen=True)
class Record:
    """One raw record and where it came from."""

    source: str
    line: int
    text: str
    error: str | None = None


def open_text(path: Path) -> io.TextIOBase:
    """Open a text file, transparently gunzipping ``*.gz``."""
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def file_kind(path: Path) -> str:
    """The suffix that decides the reader (``.gz`` stripped)."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


def pick_column(available: Sequence[str], wanted: str | None, defaults: Sequence[str], source: str) -> str:
    """The column to read: the one asked for, else the first default present (case-insensitive)."""
    if wanted is not None:
        if wanted not in available:
            raise DataError(f"{source}: no column '{wanted}'; columns are {list(available)}")
        return wanted
    lowered = {name.lower(): name for name in available}
    for candidate in defaults:
        if candidate.lower() in lowered:
            return lowered[candidate.lower()]
    raise DataError(f"{source}: none of the columns {list(available)} is one of {list(defaults)}; "
                    f"name one with --column")


def _read_lines(path: Path, column: str | None, defaults: Sequence[str]) -> Iterator[Record]:
    with open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                yield Record(str(path), number, line.rstrip("\r\n"))


def _read_smi(path: Path, column: str | None, defaults: Sequence[str]) -> Iterator[Record]:
    with open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.split()
            if fields and not fields[0].startswith("#"):
                yield Record(str(path), number, fields[0])


def _read_delimited(path: Path, column: str | None, defaults: Sequence[str]) -> Iterator[Record]:
    delimiter = "\t" if file_kind(path) == ".tsv" else ","
    with open_text(path) as handle:
        reader = csv.DictReader(handle, delimiter=delimiter)
        if reader.fieldnames is None:
            return
        name = pick_column(reader.fieldnames, column, defaults, str(path))
        for row in reader:
            value = row.get(name)
            if value is None:
                yield Record(str(path), reader.line_num, "", error=f"row has no value for column '{name}'")
            else:
                yield Record(str(path), reader.line_num, value)


def _read_fasta(path: Path, column: str | None, defaults: Sequence[str]) -> Iterator[Record]:
    with open_text(path) as handle:
        start, chunks = 0, []
        for number, line in enumerate(handle, start=1):
            if line.startswith(">"):
                if start:
                    yield Record(str(path), start, "".join(chunks))
                start, chunks = number, []
            elif line.strip():
                if not start:
                    raise DataError(f"{path}:{number}: sequence data before the first '>' header; not FASTA")
                chunks.append(line.strip())
        if start:
            yield Record(str(path), start, "".join(chunks))


def jsonl_objects(path: Path) -> Iterator[tuple[int, dict | None, str | None]]:
    """(line, object, error) for each non-blank line of a JSON-lines file; object None where unreadable."""
    with open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                yield number, None, f"not valid JSON ({exc.msg})"
                continue
            if isinstance(item, dict):
                yield number, item, None
            else:
                yield number, None, "JSON line is not an object"


def _read_jsonl(path: Path, column: str | None, defaults: Sequence[str]) -> Iterator[Record]:
    for number, item, error in jsonl_objects(path):
        if item is None:
            yield Record(str(path), number, "", error=error)
        else:
            name = pick_column(list(item), column, defaults, f"{path}:{number}")
            yield Record(str(path), number, str(item[name]))


def _read_parquet(path: Path, column: str | None, defaults: Sequence[str]) -> Iterator[Record]:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    name = pick_column(table.column_names, column, defaults, str(path))
    for row, value in enumerate(table.column(name).to_pylist(), start=1):
        if value is None:
            yield Record(str(path), row, "", error=f"null value in column '{name}'")
        else:
            yield Record(str(path), row, str(value))


READERS: dict[str, Callable[[Path, str | None, Sequence[str]], Iterator[Record]]] = {
    ".txt": _read_lines, ".text": _read_lines,
    ".smi": _read_smi, ".smiles": _read_smi,
    ".csv": _read_delimited, ".tsv": _read_delimited,
    ".fa": _read_fasta, ".fasta": _read_fasta, ".fna": _read_fasta, ".ffn": _read_fasta, ".faa": _read_fasta,
    ".jsonl": _read_jsonl, ".parquet": _read_parquet,
}


def read_records(path: Path, column: str | None = None, default_columns: Sequence[str] = ()) -> Iterator[Record]:
    """Records of one corpus file, dispatched on its suffix."""
    if not path.is_file():
        raise DataError(f"corpus file not found: {path}")
    kind = file_kind(path)
    reader = READERS.get(kind)
    if reader is None:
        raise DataError(f"{path}: unsupported file type '{kind}'; supported: {', '.join(sorted(READERS))} "
                        f"(optionally .gz)")
    try:
        yield from reader(path, column, default_columns)
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except csv.Error as exc:
        raise DataError(f"{path}: malformed CSV ({exc})") from None
