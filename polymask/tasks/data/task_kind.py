"""What a task kind is: one registered object per kind of downstream task (binary, multiclass, regression, span,
or one of your own), which every room that meets a task asks instead of testing the kind's name.

A kind is a ``TaskKind`` subclass registered by name (``@register_task_kind("count")``). Its class attributes and
class methods are the kind's facts: the problem type a saved or exported model states, how its examples are read
and a model fine-tuned on them, the network on the encoder, the metrics of a user's own table, the prediction
columns, the exported layer. An instance is the head's loss and prediction rule for one fine-tuning (fitted to the
training labels) or for a saved model (``restore``).

The registry lives here, beside the task specs that name a kind. The built-in kinds live one file each in
``polymask.tasks.finetune.kinds`` (they reach the loaders and the fine-tuning loops), which ``polymask.tasks``
imports first, so that a spec naming one validates. Kind files import torch and the loops inside their methods:
importing them stays light (``polymask --help`` loads no torch).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ClassVar

from polymask.registry import Registry

if TYPE_CHECKING:
    import numpy as np
    from torch import Tensor, nn

    from polymask.checkpoints.finetuned_meta import SavedTask
    from polymask.model.encoder import Encoder
    from polymask.modalities.base import Modality
    from polymask.tasks.data.spec import TaskSpec


class TaskKind:
    """A kind of task. Subclass it (a table kind: ``polymask.tasks.finetune.kinds.TableTaskKind``), set the class
    attributes, override what differs, and register it with ``register_task_kind``."""

    #: The registered name (set by ``register_task_kind``), as task specs and ``finetuned.json`` write it.
    name: ClassVar[str] = ""
    #: ``task.problem_type`` of a saved model (``finetuned.json``) and, for an exported head, the config's
    #: ``problem_type`` in transformers' vocabulary.
    problem_type: ClassVar[str] = ""
    #: Rows of a table with label columns, fine-tuned by the table loop with a pooled linear head and predicted
    #: row by row (held-out files, task corpora, Hugging Face folders and ``predict`` take such kinds); False: the
    #: kind reads, fine-tunes and predicts its own way (span).
    table: ClassVar[bool] = False
    #: The headline metric and the further ones of a user's own table of this kind (``finetune --data``).
    metrics: ClassVar[tuple[str, tuple[str, ...]] | None] = None
    #: What an exported head of this kind is, in the model card's words; None: its models are not exported.
    card_phrase: ClassVar[str | None] = None
    #: What the export did to the head's layer, as the model card says it ("" when nothing).
    export_note: ClassVar[str] = ""

    # --- reading examples ---------------------------------------------------------------------------------------

    @classmethod
    def load(cls, spec: "TaskSpec", modality: "Modality", data_dir: Any) -> Any:
        """The task's examples, read and split (``TaskData`` for table kinds)."""
        raise NotImplementedError(f"task kind '{cls.name}' does not say how its examples are read")

    @classmethod
    def check_labels(cls, values: list[float]) -> None:
        """Refuse (``InvalidRecord``) a table row's label values (NaN: missing) that this kind cannot learn from."""

    @classmethod
    def n_outputs(cls, spec: "TaskSpec", label_names: list[str], train_labels: np.ndarray) -> int:
        """Output units of the head: by default one per label column."""
        return len(label_names)

    @classmethod
    def class_names(cls, spec: "TaskSpec", n_outputs: int) -> list[str]:
        """Names of the classes a saved model predicts (``finetuned.json``'s ``class_names``); [] when none."""
        return []

    # --- fine-tuning --------------------------------------------------------------------------------------------

    @classmethod
    def finetune(cls, task: Any, encoder: "Encoder", tokenizer: Any, modality: "Modality", config: Any, seed: int,
                 save_to: Any, reporter: Any) -> dict[str, Any]:
        """Fine-tune ``encoder`` on ``task`` (what ``load`` gave); a result dict with ``valid`` and ``test`` metrics,
        the chosen model saved to ``save_to`` if given, each epoch's loss and validation metrics sent to
        ``reporter``."""
        raise NotImplementedError(f"task kind '{cls.name}' does not say how it is fine-tuned")

    @classmethod
    def refuse_settings(cls, config: Any, task_key: str) -> None:
        """Raise a ``ConfigError`` naming ``task_key`` when fine-tuning settings ``config`` ask for what this kind
        cannot do (checked before any training, e.g. by ``polymask compare`` before it pretrains); none by default."""

    @classmethod
    def network(cls, encoder: "Encoder", n_outputs: int, pooling: str, dropout: float, n_features: int = 0,
                head: str = "linear") -> "nn.Module":
        """The predictor on ``encoder`` whose weights a saved model holds (``encoder.*`` and ``head.*``), with
        ``n_features`` per-sequence features joining the pooled vector (``extra_features``) and ``head`` "linear"
        or "mlp" (``FinetuneConfig.head``) where the kind has a pooled vector."""
        raise NotImplementedError(f"task kind '{cls.name}' does not say what its network is")

    def __init__(self, train_labels: np.ndarray) -> None:
        self.train_labels = train_labels

    @classmethod
    def restore(cls, normalisation: dict[str, list[float]] | None) -> "TaskKind":
        """The prediction rule of a saved model, from its ``normalisation()`` instead of training labels."""
        import numpy as np

        return cls(np.empty((0, 0)))

    def loss(self, logits: "Tensor", labels: "Tensor") -> "Tensor":
        """The training loss of a batch; ``labels`` are (B, T) float with NaN for missing."""
        raise NotImplementedError

    def predict(self, logits: "Tensor") -> np.ndarray:
        """Predictions in the metrics' convention (probabilities, or values in original units)."""
        raise NotImplementedError

    def normalisation(self) -> dict[str, list[float]] | None:
        """The target standardisation that ``predict`` undoes (saved with the model), if any."""
        return None

    # --- applying and exporting a saved model -------------------------------------------------------------------

    @classmethod
    def check_saved(cls, task: "SavedTask") -> None:
        """Raise ``ValueError`` saying what does not fit when a saved model's outputs, label columns and classes
        (``finetuned.json``'s task, which may have been edited by hand) disagree in number; none checked by default."""

    @classmethod
    def prediction_columns(cls, task: "SavedTask", outputs: np.ndarray) -> dict[str, Any]:
        """``predict``'s columns for the rows of ``outputs`` (``predict``'s values; NaN rows: rejected records,
        left empty); ``task`` is the saved model's task (``finetuned.json``'s)."""
        raise NotImplementedError(f"task kind '{cls.name}' does not say what its prediction columns are")

    @classmethod
    def output_names(cls, task: "SavedTask") -> list[str]:
        """The exported head's label of each output (``id2label``): by default the label columns."""
        return list(task.label_names)

    @classmethod
    def exported_layer(cls, weight: "Tensor", bias: "Tensor",
                       normalisation: dict[str, list[float]] | None) -> tuple["Tensor", "Tensor"]:
        """The head's linear layer as exported (its outputs then mean what ``predict`` gives): by default as it is."""
        return weight, bias


#: Every task kind, by name.
TASK_KINDS: Registry[type[TaskKind]] = Registry("task kind")


def register_task_kind(name: str) -> Callable[[type[TaskKind]], type[TaskKind]]:
    """Class decorator: register a ``TaskKind`` subclass as ``name`` (the ``kind:`` a task spec gives)."""

    def decorate(kind: type[TaskKind]) -> type[TaskKind]:
        TASK_KINDS.register(name)(kind)
        kind.name = name
        return kind

    return decorate


def table_kinds() -> list[str]:
    """Names of the registered kinds read as tables (``TaskKind.table``)."""
    return [name for name in TASK_KINDS if TASK_KINDS.get(name).table]
