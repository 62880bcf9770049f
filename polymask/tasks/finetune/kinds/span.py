"""span: extractive question answering (SQuAD JSON): the answer is a span of the context, read by a start and an end
score per token over the context's windows. Its own loader, loop and prediction path; not exported."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polymask.errors import ConfigError
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
    def refuse_settings(cls, config: Any, task_key: str) -> None:
        """A span task's head reads every token, with one linear layer: no pooled vector to extend."""
        if config.extra_features or config.head != "linear":
            chosen = f"extra_features {config.extra_features}" if config.extra_features else f"head {config.head}"
            raise ConfigError(f"{chosen}: a pooled sequence vector's setting; {task_key} predicts spans per token "
                              f"with one linear layer")

    @classmethod
    def network(cls, encoder: "Encoder", n_outputs: int, pooling: Any, dropout: float, n_features: int = 0,
                head: str = "linear") -> "SpanPredictor":
        from polymask.model.heads import SpanPredictor

        return SpanPredictor(encoder)
