"""Reading the file a model is applied to: every row kept, in order, with the file's own columns.

Tables (.csv, .tsv, .jsonl, .parquet) keep all their columns; delimited files are read as text, so an
id such as ``007`` comes back unchanged. Files with one record per line or entry (.txt, .smi, FASTA) are
read by ``data.readers`` exactly as ``polymask train`` reads them, with a ``line`` column (the record's
line in the file) and, for .smi, the molecule's ``name``; for FASTA, the header's ``id`` and ``description``.
"""
from __future__ import annotations

import csv
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from polymask.data.model_inputs import as_inputs
from polymask.data.readers import (
    check_readable,
    csv_rows,
    file_kind,
    jsonl_objects,
    open_text,
    parquet_table,
    pick_column,
    read_records,
    reader_for,
)
from polymask.errors import DataError

if TYPE_CHECKING:
    import pandas as pd

    from polymask.data.model_inputs import Inputs

TABLES = (".csv", ".tsv", ".jsonl", ".parquet")


@dataclass(frozen=True)
class TableLayout:
    """How a model's own task files were laid out, so that predict reads such a file as fine-tuning did:
    ``tsv_quoting`` false reads quote characters in a .tsv as plain text (GLUE's files); ``column_names`` names the
    columns of a header-less file (CoLA's), used when a delimited file's first row names none of the columns asked
    for."""

    tsv_quoting: bool = True
    column_names: tuple[str, ...] | None = None


@dataclass
class InputTable:
    """The file's rows (``frame``), and per row the model's input strings (None where unreadable) and why not."""

    frame: "pd.DataFrame"
    inputs: list["Inputs"]
    reasons: list[str | None]
    columns: list[str]
    #: whether the file had no header row (its columns named by the model's layout)
    headerless: bool = False


def choose_columns(available: Sequence[str], wanted: Sequence[str] | None, defaults: Sequence[str], count: int,
                   source: str, option: str = "--column") -> list[str]:
    """The ``count`` input columns: those named, else the first default present (one column), else the model's
    own input column names (a pair); defaults match in any case. The errors tell to name them with ``option``."""
    if wanted:
        if len(wanted) != count:
            raise DataError(f"the model reads {count} input column(s); {option} names {len(wanted)}")
        return [pick_column(available, name, (), source) for name in wanted]
    if count == 1:
        return [pick_column(available, None, defaults, source, option)]
    lowered = {name.lower(): name for name in available}
    missing = [name for name in defaults[:count] if name.lower() not in lowered]
    if missing:
        raise DataError(f"{source}: no column {missing} (the model reads {list(defaults[:count])}); columns are "
                        f"{list(available)}; name them with {option}")
    return [name if name in available else lowered[name.lower()] for name in defaults[:count]]


def _is_data_row(first: list[str], layout: TableLayout, named: Sequence[str]) -> bool:
    """Whether ``first`` is a record of a header-less file in the model's layout rather than a header: it has as many
    fields as that layout names and none of them is a column asked for."""
    if layout.column_names is None or len(first) != len(layout.column_names):
        return False
    return not {field.strip().lower() for field in first} & {name.lower() for name in named}


def _delimited(path: Path, layout: TableLayout,
               named: Sequence[str]) -> tuple["pd.DataFrame", list[str | None], bool]:
    """The rows of a .csv/.tsv, the reason a row is malformed, and whether its first line was data (no header)."""
    import pandas as pd

    tsv = file_kind(path) == ".tsv"
    quoting = csv.QUOTE_MINIMAL if layout.tsv_quoting or not tsv else csv.QUOTE_NONE
    with open_text(path) as handle:
        parsed = csv_rows(handle, path, delimiter="\t" if tsv else ",", quoting=quoting)
        first_line, first = next(parsed, (0, None))
        if first is None:
            raise DataError(f"{path}: empty file")
        headerless = _is_data_row(first, layout, named)
        header = list(layout.column_names) if headerless and layout.column_names else [
            name.lstrip("\ufeff") for name in first]
        rows, reasons = [], []
        for line, row in itertools.chain([(first_line, first)] if headerless else [], parsed):
            if not row:
                continue  # a blank line is no row (as in polymask train)
            reasons.append(None if len(row) == len(header) else
                           f"line {line}: {len(row)} fields, the header has {len(header)}")
            rows.append((row + [""] * len(header))[:len(header)])
    return pd.DataFrame(rows, columns=header, dtype=object), reasons, headerless


def _jsonl(path: Path) -> tuple["pd.DataFrame", list[str | None]]:
    import pandas as pd

    objects = list(jsonl_objects(path))
    reasons = [None if error is None else f"line {number}: {error}" for number, _, error in objects]
    # object columns keep each value as the file wrote it (an int id stays an int where another row lacks it)
    return pd.DataFrame([item or {} for _, item, _ in objects], dtype=object), reasons


def _parquet(path: Path) -> tuple["pd.DataFrame", list[str | None]]:
    frame = parquet_table(path).to_pandas()
    return frame, [None] * len(frame)


def _table(path: Path, wanted: Sequence[str] | None, defaults: Sequence[str], count: int,
           layout: TableLayout) -> InputTable:
    kind = file_kind(path)
    headerless = False
    if kind in (".csv", ".tsv"):
        frame, read_errors, headerless = _delimited(path, layout, wanted or defaults[:count])
    else:
        frame, read_errors = {".jsonl": _jsonl, ".parquet": _parquet}[kind](path)
    columns = choose_columns(list(frame.columns), wanted, defaults, count, str(path))
    inputs, reasons, _ = as_inputs(frame, columns)
    reasons = [error or reason for error, reason in zip(read_errors, reasons)]
    inputs = [None if error else parts for error, parts in zip(read_errors, inputs)]
    return InputTable(frame, inputs, reasons, columns, headerless)


def _entry_names(path: Path, lines: list[int]) -> dict[str, list[str]]:
    """The .smi name (after the SMILES) or the FASTA header's id and description of the entries at ``lines``."""
    wanted = set(lines)
    found: dict[int, str] = {}
    with open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            if number in wanted:
                found[number] = line.strip()
    if file_kind(path) == ".smi" or file_kind(path) == ".smiles":
        return {"name": [" ".join(found[n].split()[1:]) for n in lines]}
    headers = [found[n][1:].split(maxsplit=1) + ["", ""] for n in lines]
    return {"id": [h[0] for h in headers], "description": [h[1] for h in headers]}


def read_input_table(path: Path, wanted: Sequence[str] | None, defaults: Sequence[str],
                     count: int = 1, layout: TableLayout = TableLayout()) -> InputTable:
    """Every row of ``path`` and the model's inputs in it; ``defaults`` are the column names tried when
    ``wanted`` names none (the model's own input columns first); ``layout`` is how the model's task files were
    written (quotes, a header-less file's column names)."""
    import pandas as pd

    kind = file_kind(path)
    check_readable(path)
    reader_for(path)  # an unsupported type fails here, naming the supported ones
    try:
        if kind in TABLES:
            return _table(path, wanted, defaults, count, layout)
        if count != 1:
            raise DataError(f"{path}: the model reads {count} columns {list(defaults[:count])}; give a table "
                            f"({', '.join(TABLES)})")
        records = list(read_records(path, None, defaults))
        name = wanted[0] if wanted else defaults[0]
        columns: dict[str, Any] = {"line": [r.line for r in records]}
        if kind not in (".txt", ".text"):
            columns.update(_entry_names(path, columns["line"]))
        columns[name] = [r.text for r in records]
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return InputTable(pd.DataFrame(columns), [None if r.error else (r.text,) for r in records],
                      [r.error for r in records], [name])
