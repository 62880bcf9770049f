"""Reading a task's examples: find its files, validate inputs through the modality, split.

Tables are delimited text files (with or without a header row, with or without CSV quoting),
JSON-lines files, parquet files or ``datasets.Dataset`` objects. Invalid inputs (an unparsable SMILES, a non-IUPAC
base) are skipped and reported with file, line and reason; the counts travel into every result table.
"""
from __future__ import annotations

import csv
import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence, Union

import numpy as np

from polymask.data.readers import (
    check_readable,
    csv_rows,
    file_kind,
    jsonl_objects,
    open_text,
    parquet_table,
    tab_hint,
)
from polymask.data.records import normalize_record
from polymask.errors import DataError, InvalidRecord, TaskFileMissing
from polymask.modalities.base import Modality
from polymask.resources import builtin_dir
from polymask.tasks.data import splits
from polymask.tasks.data.spec import OWN_DATA, TaskSpec
from polymask.tasks.metrics.scoring import METRICS

DATA_DIR_ENV = "POLYMASK_DATA_DIR"
TABLE_FILE_TYPES = (".csv", ".tsv", ".txt", ".jsonl", ".parquet")

#: A task table: a file (delimited text, JSON lines or parquet) or an in-memory ``datasets.Dataset``.
TableSource = Union[Path, Any]
#: The word a split column says for each part of a task.
SPLIT_WORD = {"training": "train", "validation": "valid", "test": "test"}
#: Label fields that mean "no value" (lower-cased).
MISSING_LABELS = frozenset({"", "na", "n/a", "nan", "null", "none"})
#: (line, fields) of a table row; an ``InvalidRecord`` in place of the fields when the line is no row (bad JSON).
Row = tuple[int, Union[list[str], InvalidRecord]]


@dataclass
class TaskSplit:
    """Examples of one split: normalised inputs (1 or 2 strings each) and labels (N, T) float, NaN = missing."""

    inputs: list[tuple[str, ...]]
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.inputs)


@dataclass
class TaskData:
    spec: TaskSpec
    label_names: list[str]
    train: TaskSplit
    valid: TaskSplit
    test: TaskSplit
    files: list[str]
    skipped: list[dict] = field(default_factory=list)
    duplicates_removed: int = 0
    protocol: str = ""
    extra_tests: dict[str, TaskSplit] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.protocol = self.protocol or self.spec.split.method

    @property
    def n_outputs(self) -> int:
        """Output units of the head, as the task's kind counts them (one per label column; multiclass: per class)."""
        return self.spec.task_kind.n_outputs(self.spec, self.label_names, self.train.labels)


def data_dirs(data_dir: Path | None, benchmark: str) -> list[Path]:
    """Where task files are looked for: --data-dir, $POLYMASK_DATA_DIR (each also with /<benchmark>), built-in."""
    roots = [Path(p) for p in (data_dir, os.environ.get(DATA_DIR_ENV)) if p]
    found = [candidate for root in roots for candidate in (root / benchmark, root)]
    return found + [builtin_dir("tasks") / benchmark / "data"]


def find_task_file(name: str, benchmark: str, data_dir: Path | None) -> Path:
    """The first of the data folders holding ``name`` (or ``name.gz``), checked to be a readable, non-empty file."""
    searched = data_dirs(data_dir, benchmark)
    for folder in searched:
        for candidate in (folder / name, folder / f"{name}.gz"):
            if candidate.exists():
                check_readable(candidate)
                return candidate
    raise TaskFileMissing(f"task file '{name}' not found; looked in {', '.join(map(str, searched))} "
                          f"(pass --data-dir or set ${DATA_DIR_ENV})")


def missing_label(value: str) -> bool:
    """Whether a label field says "no value": empty, or NA, N/A, NaN, null or None in any case (R, Excel, pandas)."""
    return value.strip().lower() in MISSING_LABELS


def _label(value: str, spec: TaskSpec) -> float:
    value = value.strip()
    if missing_label(value):
        return float("nan")
    if spec.label_values is not None:
        if value not in spec.label_values and spec.other_label is not None:
            value = spec.other_label
        if value not in spec.label_values:
            raise InvalidRecord(f"label {value!r} is not one of {spec.label_values}")
        return float(spec.label_values.index(value))
    try:
        number = float(value)
    except ValueError:
        raise InvalidRecord(f"label {value!r} is not a number") from None
    if not np.isfinite(number):
        raise InvalidRecord(f"label {value!r} is not finite")
    return number


def _delimited_rows(path: Path, delimiter: str, quoting: bool) -> Iterator[Row]:
    """(line, fields) of each row of a delimited file; quote characters are plain text unless ``quoting``."""
    with open_text(path) as handle:
        yield from csv_rows(handle, path, delimiter=delimiter, quoting=csv.QUOTE_MINIMAL if quoting else csv.QUOTE_NONE)


def _field_text(value: Any) -> str:
    """A stored value as a table field: a null becomes an empty field."""
    return "" if value is None else str(value)


def _column_rows(names: list[str], columns: list[list[Any]]) -> Iterator[Row]:
    """The header, then (row number, fields as text) of a column store."""
    yield 0, names
    for number, values in enumerate(zip(*columns), start=1):
        yield number, [_field_text(value) for value in values]


def _jsonl_rows(path: Path) -> Iterator[Row]:
    """The keys of the first JSON object as the header, then (line, fields) of each line (a missing key: an empty
    field); a line that is not a JSON object is an ``InvalidRecord``."""
    objects = list(jsonl_objects(path))
    header = next((list(item) for _, item, _ in objects if item is not None), None)
    if header is None:
        raise DataError(f"{path}: no line is a JSON object")
    yield 0, header
    for number, item, error in objects:
        if item is None:
            yield number, InvalidRecord(str(error))
        else:
            yield number, [_field_text(item.get(name)) for name in header]


def _stored_rows(source: TableSource) -> Iterator[Row]:
    """Rows of a parquet file or a ``datasets.Dataset`` (first the column names)."""
    if isinstance(source, Path):
        table = parquet_table(source)
        return _column_rows(table.column_names, [table.column(name).to_pylist() for name in table.column_names])
    return _column_rows(list(source.column_names), [source[name] for name in source.column_names])


def table_file_rows(source: TableSource, delimiter: str = ",", quoting: bool = True,
                    column_names: list[str] | None = None) -> tuple[list[str], Iterator[Row]]:
    """The header and the rows of a task table: delimited text (``column_names`` for a header-less file), JSON lines,
    parquet, or a ``datasets.Dataset``; ``DataError`` naming the file for an unsupported type or an empty file."""
    kind = file_kind(source) if isinstance(source, Path) else None
    if kind is not None and kind not in TABLE_FILE_TYPES:
        raise DataError(f"{source}: unsupported task file type '{kind or source.name}'; "
                        f"supported: {', '.join(TABLE_FILE_TYPES)} (optionally .gz)")
    delimited = kind not in (None, ".parquet", ".jsonl")
    rows = (_delimited_rows(source, delimiter, quoting) if delimited else
            _jsonl_rows(source) if kind == ".jsonl" else _stored_rows(source))
    header = column_names if delimited and column_names else next(rows, (0, None))[1]
    if header is None:
        raise DataError(f"{source}: empty file")
    return [name.lstrip("\ufeff") for name in header], rows


def require_columns(source: TableSource, header: Sequence[str], names: Sequence[str]) -> None:
    """``DataError`` naming the file when a column of ``names`` is not in its ``header``, is named twice there (which
    one is meant?) or is asked for twice."""
    missing = [name for name in names if name not in header]
    if missing:
        raise DataError(f"{source}: columns {missing} not found; the file has {list(header)}{tab_hint(header)}")
    twice = next((name for name in names if header.count(name) > 1), None)
    if twice is not None:
        places = [index + 1 for index, name in enumerate(header) if name == twice]
        raise DataError(f"{source}: the header names column '{twice}' {len(places)} times (columns {places}); "
                        f"rename all but one")
    asked_twice = next((name for name in names if list(names).count(name) > 1), None)
    if asked_twice is not None:
        raise DataError(f"{source}: column '{asked_twice}' is asked for twice")


def read_table(source: TableSource, spec: TaskSpec, modality: Modality, skipped: list[dict],
               parts: list[int] | None = None) -> tuple[list[str], TaskSplit]:
    """All valid examples of one task file (delimited text, JSON lines or parquet) or ``datasets.Dataset``; with
    ``parts``, each kept example's split (``splits.split_part``) from the spec's split column is appended to it."""
    where = str(source) if isinstance(source, Path) else "datasets.Dataset"
    header, rows = table_file_rows(source, spec.delimiter, spec.quoting, spec.column_names)
    split_columns = [spec.split.column] if parts is not None and spec.split.column else []
    if spec.label_columns == "rest":
        label_names = [c for c in header if c not in [*spec.input_columns, *spec.ignore_columns, spec.split.column]]
    else:
        label_names = list(spec.label_columns)
    require_columns(source, header, [*spec.input_columns, *label_names, *split_columns])
    input_at = [header.index(c) for c in spec.input_columns]
    label_at = [header.index(c) for c in label_names]
    split_at = [header.index(c) for c in split_columns]
    inputs, labels = [], []
    kind = spec.task_kind
    for line, row in rows:
        try:
            if isinstance(row, InvalidRecord):
                raise row
            if len(row) != len(header):
                raise InvalidRecord(f"{len(row)} fields, the header has {len(header)}")
            values = [_label(row[i], spec) for i in label_at]
            if all(np.isnan(values)):
                raise InvalidRecord("no label")
            kind.check_labels(values)
            part = [splits.split_part(row[i]) for i in split_at]
            inputs.append(tuple(normalize_record(modality, row[i]) for i in input_at))
            labels.append(values)
            if parts is not None:
                parts += part
        except InvalidRecord as exc:
            skipped.append({"source": where, "line": line, "reason": exc.reason})
    if not inputs:
        first = next((s for s in skipped if s["source"] == where), None)
        detail = f"line {first['line']}: {first['reason']}; " if first else ""
        raise DataError(f"{where}: {detail}no usable example in the file")
    return label_names, TaskSplit(inputs, np.asarray(labels, dtype=np.float64).reshape(len(inputs), len(label_at)))


def deduplicate(split: TaskSplit) -> tuple[TaskSplit, int]:
    """Keep the first copy of each input; drop every copy of an input seen with different labels."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for index, key in enumerate(split.inputs):
        groups.setdefault(key, []).append(index)
    keep = []
    for indices in groups.values():
        rows = split.labels[indices]
        if len(indices) == 1 or np.all(np.isclose(rows, rows[0], equal_nan=True)):
            keep.append(indices[0])
    keep.sort()
    return TaskSplit([split.inputs[i] for i in keep], split.labels[keep]), len(split) - len(keep)


def _subset(split: TaskSplit, indices: np.ndarray) -> TaskSplit:
    return TaskSplit([split.inputs[i] for i in indices], split.labels[indices])


def cap_indices(count: int, limit: int | None, seed: int) -> np.ndarray:
    """Sorted indices of a seeded random subset of ``limit`` of ``count`` items (all of them within the cap)."""
    if limit is None or count <= limit:
        return np.arange(count)
    return np.sort(np.random.default_rng(seed).choice(count, limit, replace=False))


def subset(split: TaskSplit, limit: int | None, seed: int) -> TaskSplit:
    """At most ``limit`` examples of ``split`` (a seeded random subset)."""
    return _subset(split, cap_indices(len(split), limit, seed))


def holdout(count: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted indices (kept, held out) of a fixed-seed random hold-out of ``fraction`` of ``count`` items."""
    order = np.random.default_rng(seed).permutation(count)
    cut = max(1, round(fraction * count))
    return np.sort(order[cut:]), np.sort(order[:cut])


def with_caps(task: TaskData, seed: int, train: int | None = None, valid: int | None = None,
              test: int | None = None) -> TaskData:
    """``task`` cut as fine-tuning cuts it: at most ``train`` training examples (a random subset fixed by
    ``seed``), ``valid`` validation and ``test`` examples of each test set (subsets fixed by the split's seed,
    the same for every row and seed); unchanged without caps."""
    if train is None and valid is None and test is None:
        return task
    fixed = task.spec.split.seed
    capped = dataclasses.replace(task, train=subset(task.train, train, seed), valid=subset(task.valid, valid, fixed),
                                 test=subset(task.test, test, fixed),
                                 extra_tests={name: subset(split, test, fixed) for name, split in task.extra_tests.items()})
    if METRICS[task.spec.metric].needs_both_classes:
        for option, cap, part, split in (("--max-valid-examples", valid, "validation", capped.valid),
                                         ("--max-test-examples", test, "test", capped.test),
                                         *(("--max-test-examples", test, name, split)
                                           for name, split in capped.extra_tests.items())):
            problem = _one_class(task.label_names, split.labels) if cap is not None else None
            if problem:
                raise DataError(f"{option} {cap} leaves {task.spec.key}'s {part} subset with one class: it "
                                f"{problem}, so {task.spec.metric} is undefined there; raise the cap")
    return capped


def _one_class(label_names: list[str], labels: np.ndarray) -> str | None:
    """Why no label column of a split ranks positives against negatives (each holds one class only), or None."""
    counts = [(name, int(np.nansum(column)), int((~np.isnan(column)).sum()))
              for name, column in zip(label_names, labels.T)]
    if any(0 < positives < present for _, positives, present in counts):
        return None
    shown = ", ".join(f"'{name}' {positives} of {present}" for name, positives, present in counts[:4])
    return f"holds one class only in every label column (positives: {shown}{', ...' if len(counts) > 4 else ''})"


def _check_split(spec: TaskSpec, where: str, label_names: list[str], part: str, split: TaskSplit, total: int) -> None:
    """``DataError`` for a split a run cannot use: an empty one, or a validation or test split where the task's
    metric is undefined (ROC-AUC over one class)."""
    scored = part != "training" and METRICS[spec.metric].needs_both_classes
    problem = "is empty" if not len(split) else _one_class(label_names, split.labels) if scored else None
    if problem:
        own = spec.benchmark == OWN_DATA
        fix = (f"mark rows '{SPLIT_WORD[part]}' in column '{spec.split.column}'"
               if spec.split.column else
               ("add rows" + (" or try --split random" if spec.split.method == "scaffold" else "")) if own else
               "check the task's files")
        undefined = f", so {spec.metric} is undefined there" if problem != "is empty" else ""
        raise DataError(f"{where}: its {spec.split.method} {part} split ({len(split)} of {total} usable rows) "
                        f"{problem}{undefined}: {fix}")


def load_task(spec: TaskSpec, modality: Modality, data_dir: Path | None = None,
              tables: Mapping[str, TableSource] | None = None) -> TaskData:
    """Read, validate, deduplicate (if asked) and split a task's examples.

    ``tables`` supplies parts (``train``, ``valid``, ``test``, ``all`` or an extra test name) as
    ``datasets.Dataset`` objects or paths in place of the spec's files.
    """
    skipped: list[dict] = []
    given = dict(tables or {})
    names = {**spec.files, **spec.extra_test_files}
    sources = {**{part: find_task_file(name, spec.benchmark, data_dir) for part, name in names.items()
                  if part not in given}, **given}
    parts: list[int] = []  # with a split column: each example's split
    read = {part: read_table(source, spec, modality, skipped, parts if part == "all" else None)
            for part, source in sources.items()}
    label_names = read["all" if "all" in read else "train"][0]
    removed, protocol = 0, spec.split.method
    if spec.split.method == "predefined":
        train = read["train"][1]
        if "valid" in read:
            valid = read["valid"][1]
        elif spec.split.valid_from_train:
            kept, held = holdout(len(train), spec.split.valid_from_train, spec.split.seed)
            train, valid = _subset(train, kept), _subset(train, held)
            protocol = f"predefined; valid = {spec.split.valid_from_train:.0%} of train held out (seed {spec.split.seed})"
        else:
            raise DataError(f"{spec.key}: a predefined split needs a validation file or split.valid_from_train")
        test = read["test"][1]
    else:
        examples = read["all"][1]
        if spec.deduplicate:
            examples, removed = deduplicate(examples)
        if spec.split.method == "column":
            indices = splits.column_split(parts)
            protocol = f"column '{spec.split.column}'"
        else:
            indices = splits.SPLITTERS[spec.split.method]([inputs[0] for inputs in examples.inputs], examples.labels,
                                                          spec.split.fractions, spec.split.seed)
        train, valid, test = (_subset(examples, part) for part in indices)
    where = f"{sources['all']}: {spec.key}" if "all" in sources else spec.key
    for part, split in (("training", train), ("validation", valid), ("test", test)):
        _check_split(spec, where, label_names, part, split, len(train) + len(valid) + len(test))
    files = [str(source) if isinstance(source, Path) else f"{part}: datasets.Dataset" for part, source in sources.items()]
    extra = {name: read[name][1] for name in spec.extra_test_files}
    return TaskData(spec, label_names, train, valid, test, files, skipped, removed, protocol, extra)
