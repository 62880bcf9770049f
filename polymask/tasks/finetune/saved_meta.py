"""The ``finetuned.json`` of a saved fine-tuned model, built from the task spec and the fine-tuning that made it
(``checkpoints.finetuned`` writes and reads the folder)."""
from __future__ import annotations

from polymask.checkpoints.finetuned import SaveTarget
from polymask.checkpoints.finetuned_meta import (
    FinetunedMeta,
    PretrainedSource,
    SavedEncoder,
    SavedFeatures,
    SavedSpan,
    SavedTask,
)
from polymask.finetune_config import FinetuneConfig
from polymask.modalities.base import Modality
from polymask.model.encoder import Encoder
from polymask.tasks.data.spec import TaskSpec


def finetuned_meta(spec: TaskSpec, label_names: list[str], n_outputs: int, modality: Modality, encoder: Encoder,
                   config: FinetuneConfig, seed: int, valid: dict[str, float], best_epoch: int, target: SaveTarget,
                   normalisation: dict[str, list[float]] | None = None, span: SavedSpan | None = None,
                   extra_features: SavedFeatures | None = None) -> FinetunedMeta:
    """What makes a saved predictor usable on its own: the task's kind with the kind's problem type and class
    names, ``normalisation`` (mean, std) of regression targets, ``span`` options of span tasks, ``extra_features``
    of a model whose head also reads molecular features."""
    kind = spec.task_kind
    return FinetunedMeta(
        task=SavedTask(key=spec.key, kind=spec.kind, problem_type=kind.problem_type,
                       input_columns=list(spec.input_columns), label_names=list(label_names),
                       class_names=kind.class_names(spec, n_outputs), n_outputs=n_outputs, source=spec.source,
                       invariant_to=modality.invariances(spec.invariant_to), delimiter=spec.delimiter,
                       quoting=spec.quoting, column_names=spec.column_names),
        normalisation=normalisation,
        modality=modality.config.model_copy(update={"tokenizer": None}),  # the tokenizer is copied into the folder
        encoder=SavedEncoder(config=encoder.config, vocab_size=encoder.vocab_size),
        pooling=config.pooling, max_len=config.max_len, span=span, extra_features=extra_features,
        metric=spec.metric, valid=valid, best_epoch=best_epoch, seed=seed, finetune=config,
        pretrained=PretrainedSource(checkpoint=target.checkpoint, objective=target.objective, step=target.step))
