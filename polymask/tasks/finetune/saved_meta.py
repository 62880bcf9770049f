"""The ``finetuned.json`` of a saved fine-tuned model: the task, modality, encoder and settings that make the
folder usable on its own (``checkpoints.finetuned`` writes and reads the folder)."""
from __future__ import annotations

from typing import Any

from polymask.checkpoints.finetuned import FORMAT, FORMAT_VERSION, SaveTarget
from polymask.modalities.base import Modality
from polymask.model.encoder import Encoder
from polymask.tasks.data.spec import TaskSpec


def finetuned_meta(spec: TaskSpec, label_names: list[str], n_outputs: int, modality: Modality, encoder: Encoder,
                   finetune_config: dict[str, Any], seed: int, valid: dict[str, float], best_epoch: int,
                   target: SaveTarget, normalisation: dict[str, list[float]] | None = None,
                   span: dict[str, Any] | None = None, extra_features: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON that makes a saved predictor usable on its own: the task's kind with the kind's problem type and
    class names, ``normalisation`` (mean, std) of regression targets, ``span`` options (windows, longest answer,
    whether "no answer" is allowed) of span tasks, ``extra_features`` (``MoleculeFeatures.to_json``) of a model
    whose head also reads molecular features."""
    modality_config = modality.config.model_dump(mode="json")
    modality_config["tokenizer"] = None  # the tokenizer is copied into the folder
    kind = spec.task_kind
    return {
        "format": FORMAT, "format_version": FORMAT_VERSION,
        "task": {"key": spec.key, "kind": spec.kind, "problem_type": kind.problem_type,
                 "input_columns": list(spec.input_columns), "label_names": list(label_names),
                 "class_names": kind.class_names(spec, n_outputs), "n_outputs": n_outputs, "source": spec.source,
                 "invariant_to": modality.invariances(spec.invariant_to),
                 "delimiter": spec.delimiter, "quoting": spec.quoting, "column_names": spec.column_names},
        "normalisation": normalisation,
        "modality": modality_config,
        "encoder": {"config": encoder.config.model_dump(mode="json"), "vocab_size": encoder.vocab_size},
        "pooling": finetune_config["pooling"], "max_len": finetune_config["max_len"],
        "span": span, "extra_features": extra_features,
        "metric": spec.metric, "valid": valid, "best_epoch": best_epoch, "seed": seed,
        "finetune": finetune_config,
        "pretrained": {"checkpoint": target.checkpoint, "objective": target.objective, "step": target.step},
    }
