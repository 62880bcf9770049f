"""binary: one or more 0/1 targets per record (BBBP's one, Tox21's twelve), a sigmoid per target."""
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


@register_task_kind("binary")
class Binary(TableTaskKind):
    """One or more binary tasks; missing labels are masked out of the loss."""

    #: One logit per task, each under its own sigmoid: transformers' multi_label_classification (BCE with logits)
    #: even for a single task, where single_label_classification would be a softmax over one logit.
    problem_type = "multi_label_classification"
    metrics = ("roc_auc", ("prc_auc",))
    card_phrase = "a binary classification head (a sigmoid per task)"

    @classmethod
    def check_labels(cls, values: list[float]) -> None:
        """Each target is 0 or 1 (or missing): BCE would take another number, and the metrics fail on it."""
        outside = next((value for value in values if value == value and value not in (0.0, 1.0)), None)
        if outside is not None:
            raise InvalidRecord(f"label {outside:g} is not 0 or 1 (a binary task)")

    @classmethod
    def class_names(cls, spec: "TaskSpec", n_outputs: int) -> list[str]:
        return list(spec.label_values or ["0", "1"])

    @classmethod
    def check_saved(cls, task: "SavedTask") -> None:
        """One output per label column, and the two classes each output tells apart."""
        super().check_saved(task)
        if len(task.class_names) != 2:
            raise ValueError(f"class_names {task.class_names}: a binary task names its two classes")

    def loss(self, logits: "Tensor", labels: "Tensor") -> "Tensor":
        import torch

        present = ~torch.isnan(labels)
        return torch.nn.functional.binary_cross_entropy_with_logits(logits[present], labels[present])

    def predict(self, logits: "Tensor") -> np.ndarray:
        import torch

        return torch.sigmoid(logits).cpu().numpy()

    @classmethod
    def output_names(cls, task: "SavedTask") -> list[str]:
        """Each output's label and the class its sigmoid is the probability of: ``p_np=1``, ``bound=yes``; several
        tasks are 0/1 columns, each output the probability of its column's 1."""
        labels = task.label_names
        if len(labels) > 1:
            return list(labels)
        return [f"{labels[0]}={task.class_names[-1]}"]

    @classmethod
    def prediction_columns(cls, task: "SavedTask", outputs: np.ndarray) -> dict[str, Any]:
        """Several tasks (Tox21, ToxCast, SIDER): ``prob_<task>``, the probability of the positive class, one per
        task; one task: ``prob_<class>`` of both classes and ``predicted_<label>``."""
        import numpy as np

        labels = task.label_names
        if len(labels) > 1:
            return {f"prob_{name}": outputs[:, i] for i, name in enumerate(labels)}
        return class_columns(task, np.concatenate([1 - outputs, outputs], axis=1))
