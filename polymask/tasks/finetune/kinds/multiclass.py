"""multiclass: one column of classes per record, a softmax over the classes."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polymask.errors import InvalidRecord
from polymask.tasks.data.task_kind import register_task_kind
from polymask.tasks.finetune.kinds.table import TableTaskKind, class_columns

if TYPE_CHECKING:
    import numpy as np
    from torch import Tensor

    from polymask.checkpoints.finetuned_meta import SavedTask
    from polymask.tasks.data.spec import TaskSpec


@register_task_kind("multiclass")
class Multiclass(TableTaskKind):
    """One class per example, among the spec's label values (else 0, 1, ... up to the largest in training)."""

    problem_type = "single_label_classification"
    metrics = ("accuracy", ("macro_f1",))
    card_phrase = "a multiclass classification head (a softmax over the classes)"

    @classmethod
    def check_labels(cls, values: list[float]) -> None:
        import numpy as np

        if np.isnan(values).any():
            raise InvalidRecord("missing class label")
        if values[0] < 0 or not float(values[0]).is_integer():
            raise InvalidRecord(f"class label {values[0]:g} is not a class number (0, 1, 2, ...)")

    @classmethod
    def n_outputs(cls, spec: "TaskSpec", label_names: list[str], train_labels: np.ndarray) -> int:
        """One output per class."""
        import numpy as np

        return len(spec.label_values or []) or int(np.nanmax(train_labels)) + 1

    @classmethod
    def class_names(cls, spec: "TaskSpec", n_outputs: int) -> list[str]:
        return list(spec.label_values or [str(i) for i in range(n_outputs)])

    @classmethod
    def check_saved(cls, task: "SavedTask") -> None:
        """One label column, and one output per class."""
        if len(task.label_names) != 1:
            raise ValueError(f"label_names {task.label_names}: a multiclass task has one label column")
        if len(task.class_names) != task.n_outputs:
            raise ValueError(f"{len(task.class_names)} class_names for {task.n_outputs} outputs; a multiclass head "
                             f"has one output per class")

    def loss(self, logits: "Tensor", labels: "Tensor") -> "Tensor":
        import torch

        return torch.nn.functional.cross_entropy(logits, labels[:, 0].long())

    def predict(self, logits: "Tensor") -> np.ndarray:
        import torch

        return torch.softmax(logits, dim=-1).cpu().numpy()

    @classmethod
    def prediction_columns(cls, task: "SavedTask", outputs: np.ndarray) -> dict[str, Any]:
        """``prob_<class>`` per class and ``predicted_<label>``, the most probable class."""
        return class_columns(task, outputs)

    @classmethod
    def output_names(cls, task: "SavedTask") -> list[str]:
        """One output per class."""
        return list(task.class_names)
