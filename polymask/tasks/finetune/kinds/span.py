"""span: extractive question answering (SQuAD JSON): the answer is a span of the context, read by a start and an end
score per token over the context's windows. Its own loader, loop and prediction path; not exported."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polymask.tasks.data.task_kind import TaskKind, register_task_kind

if TYPE_CHECKING:
    from polymask.model.encoder import Encoder
    from polymask.model.heads import SpanPredictor
    from polymask.modalities.base import Modality
    from polymask.tasks.data.spec import TaskSpec
    from polymask.tasks.data.squad import SquadTask


@register_task_kind("span")
class Span(TaskKind):
    """Questions over contexts; the span head's loss is ``span_features.span_loss``, its answers are whole texts
    scored by the SQuAD metrics (``tasks.finetune.spans``), and ``predict`` reads them (``inference.span``)."""

    problem_type = "span"

    @classmethod
    def load(cls, spec: "TaskSpec", modality: "Modality", data_dir: Any) -> "SquadTask":
        from polymask.tasks.data.squad import load_squad

        return load_squad(spec, modality, data_dir)

    @classmethod
    def finetune(cls, task: "SquadTask", encoder: "Encoder", tokenizer: Any, modality: "Modality", config: Any,
                 seed: int, save_to: Any, reporter: Any) -> dict[str, Any]:
        from polymask.tasks.finetune.spans import finetune_span

        return finetune_span(task, encoder, tokenizer, modality, config, seed, save_to, reporter)

    @classmethod
    def network(cls, encoder: "Encoder", n_outputs: int, pooling: Any, dropout: float) -> "SpanPredictor":
        from polymask.model.heads import SpanPredictor

        return SpanPredictor(encoder)
