"""A task spec for a user's own table (``polymask finetune --data FILE --target COLUMN``): the input column, the
kind of task read off the target values, the metric and the split, as a task YAML would declare them."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from pydantic import ValidationError

from polymask.data.readers import check_readable, file_kind, pick_column
from polymask.errors import ConfigError
from polymask.modalities.base import Modality
from polymask.tasks.data.loading import Row, missing_label, require_columns, table_file_rows
from polymask.tasks.data.spec import (
    OWN_DATA,
    OWN_DATA_SPLITS,
    TABLE_KINDS,
    OwnDataSplit,
    SplitSpec,
    TableKind,
    TaskSpec,
    spec_errors,
)
from polymask.tasks.data.task_kind import TASK_KINDS


#: Class labels that read as the negative class of a binary target (lower-cased), besides non-/not- words and a
#: trailing "-" (BBB-).
NEGATIVE_LABELS = frozenset({"0", "no", "n", "false", "f", "negative", "neg", "inactive", "-"})


def _number(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def _shown(values: Sequence[str], limit: int = 6) -> str:
    return ", ".join(values[:limit]) + (", ..." if len(values) > limit else "")


def _reads_negative(label: str) -> bool:
    """Whether a class label reads as "not": no, false, inactive, non-toxic, not active, BBB-."""
    text = label.strip().lower()
    return text in NEGATIVE_LABELS or re.match(r"non|not[\s_-]", text) is not None \
        or (len(text) > 1 and text.endswith("-"))


def _negative_first(classes: list[str]) -> list[str]:
    """Two class labels as [negative, positive]: the one that reads as negative first (``_reads_negative``), else
    their order as given (sorted)."""
    first, second = classes
    return [second, first] if _reads_negative(second) and not _reads_negative(first) else classes


def _one_spelling(name: str, classes: Sequence[str]) -> None:
    """``ConfigError`` when numeric class labels write one number two ways (1 and 1.0): the file must pick one."""
    seen: dict[float, str] = {}
    for label in classes:
        number = _number(label)
        if number is not None and seen.setdefault(number, label) != label:
            raise ConfigError(f"{name}: one class is written two ways ({seen[number]}, {label}); write each class "
                              f"one way")


def target_kind(values: Mapping[str, Sequence[str]],
                kind: TableKind | None = None) -> tuple[TableKind, list[str] | None]:
    """The task kind and, for classes that are not 0/1, the class labels in index order (``TaskSpec.label_values``)
    of target columns holding ``values`` (fields as read; NA, NaN, null and the like count as missing). Without ``kind`` it is
    inferred: 0/1 in every column, or two classes in all: binary (a task per column); other numbers: regression; one
    column of more than two text classes: multiclass. A ``kind`` the values cannot have is a ``ConfigError``."""
    if kind is not None and kind not in TABLE_KINDS:
        raise ConfigError(f"--kind {kind}: a table's targets are read as one of {', '.join(TABLE_KINDS)}")
    columns = {name: [v for v in column if not missing_label(v)] for name, column in values.items()}
    empty = [name for name, column in columns.items() if not column]
    if empty:
        raise ConfigError(f"target columns {empty} hold no values")
    texts = {name: sorted({v for v in column if _number(v) is None}) for name, column in columns.items()}
    numeric = not any(texts.values())
    mixed = next((name for name, column in columns.items()
                  if texts[name] and len(texts[name]) < len(set(column))), None)
    if mixed is not None and kind is None:
        raise ConfigError(f"column '{mixed}' mixes numbers and text ({_shown(texts[mixed], 3)}); clean those cells "
                          f"(an empty cell is a missing label), or give --kind multiclass if they are all classes")
    distinct = sorted({v for column in columns.values() for v in column},
                      key=(lambda v: (_number(v), v)) if numeric else None)
    zero_one = numeric and all(_number(v) in (0.0, 1.0) for v in distinct)
    if kind is None:
        if not (zero_one or len(distinct) == 2 or numeric or len(values) == 1):
            raise ConfigError(f"target columns {list(values)} hold {len(distinct)} text classes; several targets need "
                              f"numbers, or two classes in all")
        kind = "binary" if zero_one or len(distinct) == 2 else "regression" if numeric else "multiclass"
        rows = len(next(iter(columns.values())))
        if kind == "multiclass" and len(distinct) > max(rows / 2, 10):  # an id or free text, not classes
            raise ConfigError(f"column '{next(iter(values))}' holds {len(distinct)} different texts in {rows} rows: "
                              f"an identifier or free text, not classes to predict; name another --target, or give "
                              f"--kind multiclass if they are classes")
    if kind == "regression":
        if not numeric:
            name = next(name for name, text in texts.items() if text)
            raise ConfigError(f"--kind regression needs numbers; column '{name}' holds {_shown(texts[name])}")
        return kind, None
    if len({_number(v) for v in distinct} if zero_one else distinct) < 2:  # 0/1 as "1" and "1.0" is one class
        raise ConfigError(f"target column(s) {list(values)} hold one class only ({distinct[0]})")
    if kind == "binary":
        if not zero_one and len(distinct) > 2:
            raise ConfigError(f"--kind binary needs two classes (0/1 or two labels); column(s) {list(values)} hold "
                              f"{len(distinct)} values ({_shown(distinct)})")
        if zero_one:
            return kind, None
        _one_spelling(f"target column(s) {list(values)}", distinct)
        return kind, _negative_first(distinct)
    if len(values) != 1:
        raise ConfigError(f"--kind multiclass predicts one column, not {len(values)} ({list(values)})")
    fractional = [v for v in distinct if numeric and not float(v).is_integer()]
    if fractional:
        raise ConfigError(f"--kind multiclass needs class labels; column '{next(iter(values))}' holds numbers such "
                          f"as {fractional[0]} (regression?)")
    _one_spelling(f"column '{next(iter(values))}'", distinct)
    return kind, distinct


def _target_values(header: list[str], rows: Iterable[Row], targets: Sequence[str]) -> dict[str, list[str]]:
    """The non-empty fields of each target column in the rows that are well formed (the others are counted when the
    task is loaded)."""
    at = {name: header.index(name) for name in targets}
    values: dict[str, list[str]] = {name: [] for name in targets}
    for _, row in rows:
        if isinstance(row, list) and len(row) == len(header):
            for name, index in at.items():
                if row[index].strip():
                    values[name].append(row[index].strip())
    return values


def _split(modality: Modality, split: OwnDataSplit | None, split_column: str | None) -> tuple[SplitSpec, str]:
    """How a table is split, and what its test split is (the report's "evaluated on"): by ``split_column``, else
    80/10/10 by ``split`` (default: the modality's, scaffold for molecules)."""
    if split_column is not None:
        if split is not None:
            raise ConfigError(f"--split {split} and --split-column {split_column}: give one (the column names each "
                              f"row's split)")
        return SplitSpec(method="column", column=split_column), f"the rows whose '{split_column}' says test"
    method = split or modality.default_split
    if method not in OWN_DATA_SPLITS:
        raise ConfigError(f"unknown split '{method}'; choose from: {', '.join(OWN_DATA_SPLITS)}")
    if method == "scaffold" and modality.default_split != "scaffold":
        raise ConfigError(f"--split scaffold groups molecules by scaffold; {modality.name} records have none "
                          f"(use --split random)")
    return SplitSpec(method=method), f"{method} test split (10%)"


def own_task_spec(path: Path, targets: Sequence[str], modality: Modality, input_column: str | None = None,
                  kind: TableKind | None = None, split: OwnDataSplit | None = None,
                  invariant_to: Sequence[str] = (), split_column: str | None = None) -> TaskSpec:
    """The spec of the task in ``path`` (.csv, .tsv, .jsonl or .parquet, optionally .gz): ``modality``'s records in
    ``input_column`` (default: the first of its usual column names present) and ``targets`` to predict, of ``kind``
    (default: inferred from the values, see ``target_kind``), split by the train/valid/test words of
    ``split_column``, else 80/10/10 by ``split`` (default: the modality's, scaffold for molecules), its labels
    invariant to ``invariant_to`` (what augmentation and test-time averaging may vary: DNA's ``reverse_complement``,
    ``shift``). A problem with the file or the options is one ``DataError``/``ConfigError`` line."""
    path = Path(path)
    check_readable(path)
    delimiter = "\t" if file_kind(path) == ".tsv" else ","
    header, rows = table_file_rows(path, delimiter)
    column = pick_column(header, input_column, modality.default_columns, str(path), option="--input-column")
    if column in targets:
        raise ConfigError(f"{path}: column '{column}' is the input; the targets must be other columns")
    if split_column is not None and split_column in [column, *targets]:
        raise ConfigError(f"{path}: column '{split_column}' is the input or a target; --split-column names another")
    require_columns(path, header, [column, *targets, *([split_column] if split_column else [])])
    try:
        kind, classes = target_kind(_target_values(header, rows, targets), kind)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    split_spec, evaluated_on = _split(modality, split, split_column)
    name = "-".join([Path(path.name.removesuffix(".gz")).stem, *targets])  # another target: another task and cell
    metric, extra_metrics = TASK_KINDS.get(kind).metrics  # the kind's headline metric and the further ones
    try:
        return TaskSpec(name=name, benchmark=OWN_DATA, modality=modality.name,
                        kind=kind, files={"all": str(path.resolve())}, delimiter=delimiter, input_columns=[column],
                        label_columns=list(targets), label_values=classes, metric=metric,
                        extra_metrics=list(extra_metrics), split=split_spec, evaluated_on=evaluated_on,
                        source=str(path), in_default_benchmark=False, invariant_to=list(invariant_to))
    except ValidationError as exc:  # what the options say (an invariance the modality does not know)
        raise ConfigError(f"{path}: " + "; ".join(spec_errors(exc))) from None


def describe_own_task(spec: TaskSpec) -> str:
    """How a user's table was read, in one line for the terminal and the report: the targets, the kind and its
    classes (which one is positive), the split."""
    targets = ", ".join(f"'{name}'" for name in spec.label_columns)
    if spec.kind == "binary":
        classes = ("0/1, one task per column" if spec.label_values is None else
                   f"{spec.label_values[0]} = 0, {spec.label_values[1]} = 1 (positive)")
        read = f"binary ({classes})"
    elif spec.kind == "multiclass":
        read = f"multiclass ({len(spec.label_values or [])} classes: {_shown(spec.label_values or [])})"
    else:
        read = spec.kind
    split = (f"split by column '{spec.split.column}' (--kind chooses otherwise)" if spec.split.column else
             f"{spec.split.method} split 80/10/10 (--kind and --split choose otherwise)")
    return f"{spec.source}: {targets} read as {read}, scored by {spec.metric}; {split}"


@dataclass(frozen=True)
class OwnTable:
    """A user's own table and how to read it: ``--data FILE --target COLUMN ...`` of ``finetune`` and ``benchmark``
    (the fields as ``own_task_spec`` takes them)."""

    path: Path
    targets: tuple[str, ...]
    input_column: str | None = None
    kind: TableKind | None = None
    split: OwnDataSplit | None = None
    split_column: str | None = None
    invariant_to: tuple[str, ...] = ()

    def spec(self, modality: Modality) -> TaskSpec:
        """The table's task spec, its records read by ``modality``."""
        return own_task_spec(self.path, self.targets, modality, self.input_column, self.kind, self.split,
                             self.invariant_to, self.split_column)
