"""Reading a task's examples: find its files, validate inputs through the modality, split.

Invalid inputs (an unparsable SMILES, a non-IUPAC base) are skipped and reported with file, line
and reason; the counts travel into every result table.
"""
from __future__ import annotations

import csv
import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from polymask.data.readers import open_text
from polymask.errors import DataError, InvalidRecord
from polymask.modalities.base import Modality
from polymask.resources import builtin_dir
from polymask.tasks import splits
from polymask.tasks.spec import TaskSpec

DATA_DIR_ENV = "POLYMASK_DATA_DIR"


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

    @property
    def n_outputs(self) -> int:
        """Output units of the head: one per binary/regression task, one per class for multiclass."""
        if self.spec.kind == "multiclass":
            return len(self.spec.label_values or []) or int(np.nanmax(self.train.labels)) + 1
        return len(self.label_names)


def data_dirs(data_dir: Path | None, benchmark: str) -> list[Path]:
    """Where task files are looked for: --data-dir, $POLYMASK_DATA_DIR (each also with /<benchmark>), built-in."""
    roots = [Path(p) for p in (data_dir, os.environ.get(DATA_DIR_ENV)) if p]
    found = [candidate for root in roots for candidate in (root / benchmark, root)]
    return found + [builtin_dir("tasks") / benchmark / "data"]


def find_task_file(name: str, benchmark: str, data_dir: Path | None) -> Path:
    searched = data_dirs(data_dir, benchmark)
    for folder in searched:
        for candidate in (folder / name, folder / f"{name}.gz"):
            if candidate.is_file():
                return candidate
    raise DataError(f"task file '{name}' not found; looked in {', '.join(map(str, searched))} "
                    f"(pass --data-dir or set ${DATA_DIR_ENV})")


def _label(value: str, spec: TaskSpec) -> float:
    value = value.strip()
    if value == "":
        return float("nan")
    if spec.label_values is not None:
        if value not in spec.label_values and spec.other_label is not None:
            value = spec.other_label
        if value not in spec.label_values:
            raise InvalidRecord(f"label {value!r} is not one of {spec.label_values}")
        return float(spec.label_values.index(value))
    try:
        return float(value)
    except ValueError:
        raise InvalidRecord(f"label {value!r} is not a number") from None


def read_table(path: Path, spec: TaskSpec, modality: Modality, skipped: list[dict]) -> tuple[list[str], TaskSplit]:
    """All valid examples of one task file."""
    with open_text(path) as handle:
        reader = csv.reader(handle, delimiter=spec.delimiter)
        header = next(reader, None)
        if header is None:
            raise DataError(f"{path}: empty file")
        header = [name.lstrip("\ufeff") for name in header]
        missing = [c for c in spec.input_columns if c not in header]
        if spec.label_columns == "rest":
            label_names = [c for c in header if c not in spec.input_columns and c not in spec.ignore_columns]
        else:
            label_names = list(spec.label_columns)
            missing += [c for c in label_names if c not in header]
        if missing:
            raise DataError(f"{path}: columns {missing} not found; the file has {header}")
        input_at = [header.index(c) for c in spec.input_columns]
        label_at = [header.index(c) for c in label_names]
        inputs, labels = [], []
        for row in reader:
            try:
                if len(row) != len(header):
                    raise InvalidRecord(f"{len(row)} fields, the header has {len(header)}")
                values = [_label(row[i], spec) for i in label_at]
                if all(np.isnan(values)):
                    raise InvalidRecord("no label")
                if spec.kind == "multiclass" and np.isnan(values).any():
                    raise InvalidRecord("missing class label")
                inputs.append(tuple(modality.normalize(row[i]) for i in input_at))
                labels.append(values)
            except InvalidRecord as exc:
                skipped.append({"source": str(path), "line": reader.line_num, "reason": exc.reason})
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


def with_train_cap(task: TaskData, cap: int | None, seed: int) -> TaskData:
    """``task`` with at most ``cap`` training examples: a random subset fixed by ``seed``."""
    if not cap or len(task.train) <= cap:
        return task
    keep = np.sort(np.random.default_rng(seed).choice(len(task.train), cap, replace=False))
    return dataclasses.replace(task, train=_subset(task.train, keep))


def load_task(spec: TaskSpec, modality: Modality, data_dir: Path | None = None) -> TaskData:
    """Read, validate, deduplicate (if asked) and split a task's examples."""
    skipped: list[dict] = []
    files = {part: find_task_file(name, spec.benchmark, data_dir) for part, name in spec.files.items()}
    tables = {part: read_table(path, spec, modality, skipped) for part, path in files.items()}
    label_names = next(iter(tables.values()))[0]
    removed = 0
    if spec.split.method == "predefined":
        parts = {part: table[1] for part, table in tables.items()}
        if "valid" not in parts:
            raise DataError(f"{spec.key}: a predefined split without a validation file is not supported")
        train, valid, test = parts["train"], parts["valid"], parts["test"]
    else:
        examples = tables["all"][1]
        if spec.deduplicate:
            examples, removed = deduplicate(examples)
        splitter = splits.SPLITTERS[spec.split.method]
        parts = splitter([inputs[0] for inputs in examples.inputs], examples.labels, spec.split.fractions,
                         spec.split.seed)
        train, valid, test = (_subset(examples, part) for part in parts)
    return TaskData(spec, label_names, train, valid, test, [str(p) for p in files.values()], skipped, removed)
