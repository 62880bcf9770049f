"""Read records from corpus files: .txt, .smi, .csv/.tsv, FASTA, .jsonl, .parquet (gzip allowed).

Each record carries its file and line so that a bad one can be reported precisely. A record that
cannot be used as read (a malformed JSON line, a value that is not a string, a row with more or
fewer fields than the header) is yielded with ``error`` set, so the pipeline reports it like any
other invalid record. A file that cannot be read at all (missing, a folder, empty, binary, not
UTF-8, a broken gzip stream, an unknown type) raises ``DataError`` naming the file and, where it
applies, the line.
"""
from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from polymask.errors import DataError

GZIP_MAGIC = b"\x1f\x8b"
SNIFF_BYTES = 8192
BINARY_KINDS = (".parquet",)


@dataclass(frozen=True)
class Record:
    """One raw record and where it came from."""

    source: str
    line: int
    text: str
    error: str | None = None


def _decode(raw: bytes, path: Path, number: int) -> str:
    try:
        return raw.decode("utf-8-sig" if number == 1 else "utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}:{number}: not UTF-8 text (byte {raw[exc.start]:#04x} at column {exc.start + 1}); "
                        f"convert the file to UTF-8") from None


def _lines(handle: io.BufferedIOBase, path: Path) -> Iterator[str]:
    """Decoded lines (line endings kept), with a broken gzip stream or a bad byte reported by line."""
    number = 0
    try:
        for number, raw in enumerate(handle, start=1):
            yield _decode(raw, path, number)
    except EOFError:
        raise DataError(f"{path}: the gzip stream ends early (truncated after line {number}); "
                        f"re-create or re-download the file") from None
    except (zlib.error, gzip.BadGzipFile) as exc:
        raise DataError(f"{path}: corrupt gzip data after line {number} ({exc}); re-create the file") from None
    except OSError as exc:
        raise DataError(f"{path}: read error after line {number} ({exc.strerror or exc})") from None


@contextlib.contextmanager
def open_text(path: Path) -> Iterator[Iterator[str]]:
    """The lines of a UTF-8 text file (gunzipping ``*.gz``); decoding and gzip faults name file and line."""
    path = Path(path)
    try:
        handle = gzip.open(path, "rb") if path.suffix.lower() == ".gz" else open(path, "rb")
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    with handle:
        yield _lines(handle, path)


def check_readable(path: Path) -> None:
    """Fail with one line for a file that cannot hold records: missing, a folder, unreadable, empty,
    named ``.gz`` but not gzip, or binary (NUL bytes in a text format)."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: file not found")
    if path.is_dir():
        raise DataError(f"{path}: is a folder, not a file; pass the files inside it")
    if not path.is_file():
        raise DataError(f"{path}: not a regular file")
    try:
        with open(path, "rb") as handle:
            head = handle.read(SNIFF_BYTES)
        if head and path.suffix.lower() == ".gz":
            if head[:2] != GZIP_MAGIC:
                raise DataError(f"{path}: named .gz but not gzip-compressed; compress it or drop the .gz suffix")
            with gzip.open(path, "rb") as handle:
                head = handle.read(SNIFF_BYTES)
    except EOFError:
        raise DataError(f"{path}: the gzip stream ends early (truncated); re-create or re-download the file") from None
    except (zlib.error, gzip.BadGzipFile) as exc:
        raise DataError(f"{path}: corrupt gzip data ({exc}); re-create the file") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not head:
        raise DataError(f"{path}: empty file")
    if file_kind(path) not in BINARY_KINDS and b"\x00" in head:
        raise DataError(f"{path}: binary data (NUL bytes), not a text file of records")


def value_problem(value: Any, name: str) -> str | None:
    """Why a field value read from a structured file is not a record (None when it is a string)."""
    if isinstance(value, str):
        return None
    kind = {type(None): "null", bool: "a boolean", int: "a number", float: "a number", list: "a list",
            dict: "an object"}.get(type(value), type(value).__name__)
    return f"field '{name}' is {kind}, not a string"


def file_kind(path: Path) -> str:
    """The suffix that decides the reader (``.gz`` stripped)."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


def pick_column(available: Sequence[str], wanted: str | None, defaults: Sequence[str], source: str,
                option: str = "--column") -> str:
    """The column to read: the one asked for, else the first default present (case-insensitive, a column named
    exactly so first); the error for none present tells to name one with ``option``."""
    if wanted is not None:
        if wanted not in available:
            raise DataError(f"{source}: no column '{wanted}'; columns are {list(available)}{tab_hint(available)}")
        return wanted
    lowered = {name.lower(): name for name in available}
    for candidate in defaults:
        if candidate in available:
            return candidate
        if candidate.lower() in lowered:
            return lowered[candidate.lower()]
    raise DataError(f"{source}: none of the columns {list(available)} is one of {list(dict.fromkeys(defaults))}; "
                    f"name one with {option}{tab_hint(available)}")


def tab_hint(header: Sequence[str]) -> str:
    """What to do when a header read as comma-separated holds tabs ("" when it does not)."""
    return " (the header holds tabs: a tab-separated file is read as one when named .tsv)" \
        if any("\t" in name for name in header) else ""


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


def csv_rows(lines: Iterable[str], path: Path, **options: Any) -> Iterator[tuple[int, list[str]]]:
    """(line, fields) of each row of delimited text (``options`` as ``csv.reader``'s); a row the csv module cannot
    read (a field over its 131,072-character limit, a quoting error) ends in ``DataError`` naming file and line."""
    reader = csv.reader(lines, **options)
    try:
        for row in reader:
            yield reader.line_num, row
    except csv.Error as exc:
        raise DataError(f"{path}:{reader.line_num}: unreadable CSV row ({exc})") from None


def _read_delimited(path: Path, column: str | None, defaults: Sequence[str]) -> Iterator[Record]:
    delimiter = "\t" if file_kind(path) == ".tsv" else ","
    with open_text(path) as handle:
        rows = csv_rows(handle, path, delimiter=delimiter)
        _, header = next(rows, (0, None))
        if header is None:
            return
        name = pick_column(header, column, defaults, str(path))
        at = header.index(name)
        for line, row in rows:
            if not row:
                continue
            if len(row) != len(header):
                yield Record(str(path), line, "", error=f"{len(row)} fields where the header has "
                             f"{len(header)} (a delimiter inside an unquoted field?)")
            else:
                yield Record(str(path), line, row[at])


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
            continue
        try:
            name = pick_column(list(item), column, defaults, "this JSON object")
        except DataError as exc:
            yield Record(str(path), number, "", error=str(exc))
            continue
        problem = value_problem(item[name], name)
        yield Record(str(path), number, item[name] if problem is None else "", error=problem)


def parquet_table(path: Path) -> Any:
    """The ``pyarrow.Table`` of a parquet file; ``DataError`` naming the file when it is not one."""
    import pyarrow
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path)
    except (pyarrow.ArrowException, OSError) as exc:
        raise DataError(f"{path}: not a readable parquet file ({exc})") from None


def _read_parquet(path: Path, column: str | None, defaults: Sequence[str]) -> Iterator[Record]:
    table = parquet_table(path)
    name = pick_column(table.column_names, column, defaults, str(path))
    for row, value in enumerate(table.column(name).to_pylist(), start=1):
        problem = value_problem(value, name)
        yield Record(str(path), row, value if problem is None else "", error=problem)


READERS: dict[str, Callable[[Path, str | None, Sequence[str]], Iterator[Record]]] = {
    ".txt": _read_lines, ".text": _read_lines,
    ".smi": _read_smi, ".smiles": _read_smi,
    ".csv": _read_delimited, ".tsv": _read_delimited,
    ".fa": _read_fasta, ".fasta": _read_fasta, ".fna": _read_fasta, ".ffn": _read_fasta, ".faa": _read_fasta,
    ".jsonl": _read_jsonl, ".parquet": _read_parquet,
}


def reader_for(path: Path) -> Callable[[Path, str | None, Sequence[str]], Iterator[Record]]:
    """The reader of a corpus file's type; ``DataError`` for an unsupported one."""
    kind = file_kind(path)
    reader = READERS.get(kind)
    if reader is None:
        raise DataError(f"{path}: unsupported file type '{kind or path.name}'; supported: "
                        f"{', '.join(sorted(READERS))} (optionally .gz)")
    return reader


def check_corpus_file(path: Path) -> None:
    """Everything that can be checked about a corpus file before reading it (type, readable, not empty)."""
    reader_for(Path(path))
    check_readable(Path(path))


def read_records(path: Path, column: str | None = None, default_columns: Sequence[str] = ()) -> Iterator[Record]:
    """Records of one corpus file, dispatched on its suffix."""
    path = Path(path)
    reader = reader_for(path)
    check_readable(path)
    yield from reader(path, column, default_columns)
