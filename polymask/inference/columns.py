"""The table that applying a model gives (``Applied``), and its ``reason`` column. The prediction columns are the
task kind's (``TaskKind.prediction_columns``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

#: Name of the column that says why a record got no prediction (empty for predicted rows).
REASON = "reason"


@dataclass
class Applied:
    """What applying a model to records gave: one row per record, and how many were predicted or rejected."""

    frame: "pd.DataFrame"
    predicted: int
    rejected: int
    truncated: int
    unknown: int
    #: What ``truncated`` counts, when not records truncated to the model's length (span models: "questions cut").
    cut: str = ""
