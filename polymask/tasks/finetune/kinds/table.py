"""What the table kinds share: examples are rows of a table (``tasks.data.loading``), a pooled linear head
(``SequencePredictor``) is fine-tuned on them by the table loop (``tasks.finetune.tables``), and a saved model
predicts row by row. A table kind adds its problem type, loss, prediction rule and prediction columns.

The loaders, loops and torch are imported inside the methods, so that registering a kind loads none of them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polymask.tasks.data.task_kind import TaskKind

if TYPE_CHECKING:
    import numpy as np
    from polymask.checkpoints.finetuned_meta import SavedTask
    from polymask.model.encoder import Encoder
    from polymask.model.heads import HeadKind, SequencePredictor
    from polymask.modalities.base import Modality
    from polymask.tasks.data.loading import TaskData
    from polymask.tasks.data.spec import TaskSpec


class TableTaskKind(TaskKind):
    """A kind whose examples are table rows with label columns (binary, multiclass, regression)."""

    table = True

    @classmethod
    def load(cls, spec: "TaskSpec", modality: "Modality", data_dir: Any) -> "TaskData":
        from polymask.tasks.data.loading import load_task

        return load_task(spec, modality, data_dir)

    @classmethod
    def finetune(cls, task: "TaskData", encoder: "Encoder", tokenizer: Any, modality: "Modality", config: Any,
                 seed: int, save_to: Any, reporter: Any) -> dict[str, Any]:
        from polymask.tasks.finetune.tables import finetune

        return finetune(task, encoder, tokenizer, modality, config, seed, save_to, reporter)

    @classmethod
    def network(cls, encoder: "Encoder", n_outputs: int, pooling: Any, dropout: float, n_features: int = 0,
                head: "HeadKind" = "linear") -> "SequencePredictor":
        from polymask.model.heads import SequencePredictor

        return SequencePredictor(encoder, n_outputs, pooling, dropout, n_features, head)

    @classmethod
    def check_saved(cls, task: "SavedTask") -> None:
        """One output per label column (binary and regression)."""
        if len(task.label_names) != task.n_outputs:
            raise ValueError(f"{task.n_outputs} outputs for {len(task.label_names)} label columns "
                             f"{task.label_names}; a {cls.name} head has one output per label column")


def class_columns(task: "SavedTask", probabilities: np.ndarray) -> dict[str, Any]:
    """``prob_<class>`` per class and ``predicted_<label>``, the most probable class (empty for a rejected row, whose
    probabilities are NaN), of a task with one label column."""
    import numpy as np
    labels, classes = task.label_names, task.class_names
    rejected = np.isnan(probabilities).any(axis=1)
    columns: dict[str, Any] = {f"prob_{name}": probabilities[:, j] for j, name in enumerate(classes)}
    chosen = np.nan_to_num(probabilities).argmax(axis=1)
    columns[f"predicted_{labels[0]}"] = [None if skip else classes[j] for j, skip in zip(chosen, rejected)]
    return columns
