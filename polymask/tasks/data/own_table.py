"""A task spec for a user's own table (``polymask finetune --data FILE --target COLUMN``): the input column, the
kind of task read off the target values, the metric and the split, as a task YAML would declare them."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping, Sequence

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
)
from polymask.tasks.data.task_kind import TASK_KINDS


def _number(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def _shown(values: Sequence[str], limit: int = 6) -> str:
    return ", ".join(values[:limit]) + (", ..." if len(values) > limit else "")


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
    distinct = sorted({v for column in columns.values() for v in column},
                      key=(lambda v: (_number(v), v)) if numeric else None)
    zero_one = numeric and all(_number(v) in (0.0, 1.0) for v in distinct)
    if kind is None:
        if not (zero_one or len(distinct) == 2 or numeric or len(values) == 1):
            raise ConfigError(f"target columns {list(values)} hold {len(distinct)} text classes; several targets need "
                              f"numbers, or two classes in all")
        kind = "binary" if zero_one or len(distinct) == 2 else "regression" if numeric else "multiclass"
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
        return kind, None if zero_one else distinct
    if len(values) != 1:
        raise ConfigError(f"--kind multiclass predicts one column, not {len(values)} ({list(values)})")
    fractional = [v for v in distinct if numeric and not float(v).is_integer()]
    if fractional:
        raise ConfigError(f"--kind multiclass needs class labels; column '{next(iter(values))}' holds numbers such "
                          f"as {fractional[0]} (regression?)")
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


def own_task_spec(path: Path, targets: Sequence[str], modality: Modality, input_column: str | None = None,
                  kind: TableKind | None = None, split: OwnDataSplit | None = None) -> TaskSpec:
    """The spec of the task in ``path`` (.csv, .tsv, .jsonl or .parquet, optionally .gz): ``modality``'s records in
    ``input_column`` (default: the first of its usual column names present) and ``targets`` to predict, of ``kind``
    (default: inferred from the values, see ``target_kind``), split 80/10/10 by ``split`` (default: the modality's,
    scaffold for molecules). A problem with the file or the options is one ``DataError``/``ConfigError`` line."""
    path = Path(path)
    check_readable(path)
    delimiter = "\t" if file_kind(path) == ".tsv" else ","
    header, rows = table_file_rows(path, delimiter)
    column = pick_column(header, input_column, modality.default_columns, str(path), option="--input-column")
    require_columns(path, header, targets)
    if column in targets:
        raise ConfigError(f"{path}: column '{column}' is the input; the targets must be other columns")
    try:
        kind, classes = target_kind(_target_values(header, rows, targets), kind)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    method = split or modality.default_split
    if method not in OWN_DATA_SPLITS:
        raise ConfigError(f"unknown split '{method}'; choose from: {', '.join(OWN_DATA_SPLITS)}")
    if method == "scaffold" and modality.default_split != "scaffold":
        raise ConfigError(f"--split scaffold groups molecules by scaffold; {modality.name} records have none "
                          f"(use --split random)")
    metric, extra_metrics = TASK_KINDS.get(kind).metrics  # the kind's headline metric and the further ones
    name = "-".join([Path(path.name.removesuffix(".gz")).stem, *targets])  # another target: another task and cell
    return TaskSpec(name=name, benchmark=OWN_DATA, modality=modality.name,
                    kind=kind, files={"all": str(path.resolve())}, delimiter=delimiter, input_columns=[column],
                    label_columns=list(targets), label_values=classes, metric=metric,
                    extra_metrics=list(extra_metrics),
                    split=SplitSpec(method=method), evaluated_on=f"{method} test split (10%)", source=str(path),
                    in_default_benchmark=False)
