"""regression: one or more numeric targets per record, learned standardised and predicted in original units."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polymask.tasks.data.task_kind import register_task_kind
from polymask.tasks.finetune.kinds.table import TableTaskKind

if TYPE_CHECKING:
    import numpy as np
    from torch import Tensor

    from polymask.checkpoints.finetuned_meta import SavedTask


@register_task_kind("regression")
class Regression(TableTaskKind):
    """Targets standardised with the training split's mean and std; predictions in original units."""

    problem_type = "regression"
    metrics = ("rmse", ("mae",))
    card_phrase = "a regression head, in the targets' original units"
    export_note = " (the regression targets' mean and std folded into the task head's layer)"

    def __init__(self, train_labels: np.ndarray, normalisation: dict[str, list[float]] | None = None) -> None:
        import numpy as np

        super().__init__(train_labels)
        if normalisation is None:
            self.mean = np.nanmean(train_labels, axis=0)
            self.std = np.nanstd(train_labels, axis=0) + 1e-8
        else:
            self.mean, self.std = np.asarray(normalisation["mean"]), np.asarray(normalisation["std"])

    @classmethod
    def restore(cls, normalisation: dict[str, list[float]] | None) -> "Regression":
        import numpy as np

        return cls(np.empty((0, len(normalisation["mean"]))), normalisation)

    def loss(self, logits: "Tensor", labels: "Tensor") -> "Tensor":
        import torch

        scaled = (labels - torch.as_tensor(self.mean, device=labels.device, dtype=labels.dtype)) / \
            torch.as_tensor(self.std, device=labels.device, dtype=labels.dtype)
        present = ~torch.isnan(scaled)
        return torch.nn.functional.mse_loss(logits[present], scaled[present])

    def predict(self, logits: "Tensor") -> np.ndarray:
        return logits.cpu().numpy() * self.std + self.mean

    def normalisation(self) -> dict[str, list[float]]:
        return {"mean": self.mean.tolist(), "std": self.std.tolist()}

    @classmethod
    def prediction_columns(cls, task: "SavedTask", outputs: np.ndarray) -> dict[str, Any]:
        """``predicted_<label>`` in original units, one per target."""
        return {f"predicted_{name}": outputs[:, i] for i, name in enumerate(task.label_names)}

    @classmethod
    def exported_layer(cls, weight: "Tensor", bias: "Tensor",
                       normalisation: dict[str, list[float]] | None) -> tuple["Tensor", "Tensor"]:
        """The saved mean and std folded into the layer, so that the exported outputs come in original units."""
        import torch

        scale = torch.tensor(normalisation["std"], dtype=torch.float32)
        shift = torch.tensor(normalisation["mean"], dtype=torch.float32)
        return weight * scale[:, None], bias * scale + shift
