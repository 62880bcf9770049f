"""The prediction columns of each kind of task, from the model's outputs (probabilities or values), and the table
that applying a model gives (``Applied``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

#: Name of the column that says why a record got no prediction (empty for predicted rows).
REASON = "reason"


def prediction_columns(task: dict[str, Any], outputs: np.ndarray) -> dict[str, Any]:
    """Columns for the rows of ``outputs`` (NaN rows: rejected records, left empty).

    regression: ``predicted_<label>`` in original units, one per target; one binary task or a multiclass
    task: ``prob_<class>`` per class and ``predicted_<label>`` (the most probable class); several binary
    tasks (Tox21, ToxCast, SIDER): ``prob_<task>``, the probability of the positive class, one per task.
    """
    labels, classes = task["label_names"], task["class_names"]
    rejected = np.isnan(outputs).any(axis=1)
    if task["kind"] == "regression":
        return {f"predicted_{name}": outputs[:, i] for i, name in enumerate(labels)}
    if task["kind"] == "binary" and len(labels) > 1:
        return {f"prob_{name}": outputs[:, i] for i, name in enumerate(labels)}
    probabilities = np.concatenate([1 - outputs, outputs], axis=1) if task["kind"] == "binary" else outputs
    columns: dict[str, Any] = {f"prob_{name}": probabilities[:, j] for j, name in enumerate(classes)}
    chosen = np.nan_to_num(probabilities).argmax(axis=1)
    columns[f"predicted_{labels[0]}"] = [None if skip else classes[j] for j, skip in zip(chosen, rejected)]
    return columns


@dataclass
class Applied:
    """What applying a model to records gave: one row per record, and how many were predicted or rejected."""

    frame: "pd.DataFrame"
    predicted: int
    rejected: int
    truncated: int
    unknown: int
