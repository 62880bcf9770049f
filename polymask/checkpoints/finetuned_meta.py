"""``finetuned.json``, what makes a saved fine-tuned model usable on its own, as one validated object
(``FinetunedMeta``): the task it predicts, the modality and encoder it reads records with, the settings it was
fine-tuned with and the checkpoint its encoder came from. ``tasks.finetune.saved_meta`` builds it,
``checkpoints.finetuned`` writes it into the model's folder and reads it back.

A folder written by an earlier release still loads: the fields added since take what its model was trained with
(no invariances, files read as CSV with quotes, no header names given, no molecular features), settings retired
since (``RETIRED_SETTINGS``) are dropped and encoder settings added since take their legacy values
(``encoder_config.LEGACY_DEFAULTS``) before the file is validated; any other wrong or unknown field is one
``CheckpointError`` naming the file and the field.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SerializeAsAny, ValidationError, model_validator

from polymask.encoder_config import EncoderConfig, fill_legacy_defaults
from polymask.errors import CheckpointError
from polymask.finetune_config import FinetuneConfig, SpanOptions
from polymask.modalities import MODALITIES, ModalityConfig
from polymask.plugins import REGISTER_FIRST
from polymask.schema import StrictModel, validation_messages

FORMAT = "polymask-finetuned"
FORMAT_VERSION = 1
#: fine-tuning settings that earlier releases saved and this one no longer has (per-task values are resolved
#: before a model is saved)
RETIRED_SETTINGS = ("task_lr",)


class SavedTask(StrictModel):
    """The task a saved model predicts."""

    key: str = Field(description="the task's key, e.g. moleculenet/esol")
    kind: str = Field(description="its registered task kind (binary, multiclass, regression, span, ...)")
    problem_type: str = Field(description="the kind's problem type (TaskKind.problem_type)")
    input_columns: list[str] = Field(min_length=1, max_length=2,
                                     description="the columns a record is read from (two: a pair)")
    label_names: list[str] = Field(description="the label columns it predicts")
    class_names: list[str] = Field(description="the classes it predicts ([] when none)")
    n_outputs: int = Field(ge=1, description="output units of its head")
    source: str = Field("", description="where the task's data comes from")
    invariant_to: list[str] = Field(
        default_factory=list, description="what its labels are invariant to (test-time averaging averages over them)")
    delimiter: str = Field(",", description="field delimiter of the task's files")
    quoting: bool = Field(True, description="the task's files quote fields as CSV does")
    column_names: list[str] | None = Field(None, description="the columns of header-less task files")


class SavedEncoder(StrictModel):
    """The encoder under the head."""

    config: EncoderConfig = Field(description="its size and behaviour")
    vocab_size: int = Field(ge=1, description="its vocabulary size")


class SavedSpan(SpanOptions):
    """How a span model windows contexts and decodes answers."""

    allow_no_answer: bool = Field(description="an empty answer may be predicted (SQuAD v2.0)")


class SavedFeatures(StrictModel):
    """Molecular features its head also reads (``extra_features``), standardised as on the training split."""

    names: list[str] = Field(description="the feature sets, e.g. morgan, rdkit2d")
    columns: list[str] = Field(description="the feature columns, in order")
    mean: list[float] = Field(description="each column's training-split mean")
    std: list[float] = Field(description="each column's training-split standard deviation")


class PretrainedSource(StrictModel):
    """The pretraining checkpoint the encoder was fine-tuned from."""

    checkpoint: str | None = Field(description="its folder")
    objective: str | None = Field(description="its objective")
    step: int | None = Field(description="the step it was saved at")


class FinetunedMeta(StrictModel):
    """A saved fine-tuned model's ``finetuned.json``; build it with ``read_finetuned_meta`` from a file's JSON."""

    format: Literal["polymask-finetuned"] = Field(FORMAT, description="marks a fine-tuned model folder")
    format_version: int = Field(FORMAT_VERSION, description="the version of this layout")
    task: SavedTask = Field(description="the task it predicts")
    normalisation: dict[str, list[float]] | None = Field(
        description="the standardisation of regression targets (mean, std) that predictions undo; else null")
    modality: SerializeAsAny[ModalityConfig] = Field(description="the modality's options (its tokenizer is copied in)")
    encoder: SavedEncoder = Field(description="the encoder")
    pooling: Literal["cls", "mean"] = Field(description="how the head pools the final hidden states")
    max_len: int = Field(ge=8, description="tokens per example, fine-tuning's max_len: predict, embed and export read "
                                           "a record's first max_len tokens")
    span: SavedSpan | None = Field(description="a span model's windows and answers; else null")
    extra_features: SavedFeatures | None = Field(None, description="molecular features the head also reads")
    metric: str = Field(description="the headline metric it was chosen on")
    valid: dict[str, float | None] = Field(description="its validation scores (null: undefined)")
    best_epoch: int = Field(description="the epoch chosen on validation")
    seed: int = Field(description="the fine-tuning seed")
    finetune: FinetuneConfig = Field(description="the settings it was fine-tuned with")
    pretrained: PretrainedSource = Field(description="where its encoder came from")

    @model_validator(mode="after")
    def _settings_agree(self) -> "FinetunedMeta":
        """The settings recorded twice, at the top (which predict, embed and export read) and under ``finetune``,
        are one: an edit to one copy would otherwise change nothing, or the model, silently."""
        if self.max_len != self.finetune.max_len:
            raise ValueError(f"max_len {self.max_len} differs from finetune.max_len {self.finetune.max_len}; a model "
                             f"reads records at the one length it was fine-tuned with")
        if self.pooling != self.finetune.pooling:
            raise ValueError(f"pooling {self.pooling} differs from finetune.pooling {self.finetune.pooling}; a model "
                             f"pools the way it was fine-tuned")
        windows = self.span.model_dump(exclude={"allow_no_answer"}) if self.span is not None else None
        if windows is not None and windows != self.finetune.span.model_dump():
            raise ValueError(f"span {windows} differs from finetune.span {self.finetune.span.model_dump()}; a model "
                             f"windows contexts the way it was fine-tuned")
        return self

    @model_validator(mode="after")
    def _normalisation_per_output(self) -> "FinetunedMeta":
        """A standardisation predictions can undo: a finite mean and a positive std for each output."""
        scaling, outputs = self.normalisation, self.task.n_outputs
        if scaling is None:
            return self
        if set(scaling) != {"mean", "std"}:
            raise ValueError(f"normalisation: needs mean and std, got {sorted(scaling)}")
        mean, std = scaling["mean"], scaling["std"]
        if len(mean) != outputs or len(std) != outputs:
            raise ValueError(f"normalisation: {len(mean)} means and {len(std)} stds for {outputs} outputs")
        if not all(math.isfinite(value) for value in mean) or not all(0 < value < math.inf for value in std):
            raise ValueError(f"normalisation: means must be finite numbers and stds positive ones, got mean {mean}, "
                             f"std {std}")
        return self


def read_finetuned_meta(raw: Any, path: Path) -> FinetunedMeta:
    """``raw``, the JSON of the file ``path``, validated into a ``FinetunedMeta`` (earlier releases' fields upgraded);
    a ``CheckpointError`` naming ``path`` and every wrong field."""
    if not isinstance(raw, dict):
        raise CheckpointError(f"{path}: expected a JSON object, got {type(raw).__name__}")
    version = raw.get("format_version", 0)
    if raw.get("format") != FORMAT or not isinstance(version, int) or version > FORMAT_VERSION:
        raise CheckpointError(f"{path}: format {raw.get('format')!r} version {raw.get('format_version')}; this "
                              f"polymask reads {FORMAT} up to {FORMAT_VERSION}")
    raw = _upgraded(raw)
    try:
        return FinetunedMeta.model_validate({**raw, "modality": _modality(raw.get("modality"), path)})
    except ValidationError as exc:
        raise CheckpointError(f"{path}: " + "; ".join(validation_messages(exc, FinetunedMeta))) from None


def _upgraded(raw: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``raw`` without retired settings, its encoder's settings added since filled with their legacy
    values."""
    raw = dict(raw)
    if isinstance(raw.get("finetune"), dict):
        raw["finetune"] = {key: value for key, value in raw["finetune"].items() if key not in RETIRED_SETTINGS}
    encoder = raw.get("encoder")
    if isinstance(encoder, dict) and isinstance(encoder.get("config"), dict):
        config = dict(encoder["config"])
        fill_legacy_defaults(config)
        raw["encoder"] = {**encoder, "config": config}
    return raw


def _modality(raw: Any, path: Path) -> ModalityConfig:
    """The saved modality options, validated by the registered modality they name."""
    name = raw.get("name") if isinstance(raw, dict) else None
    if not isinstance(name, str):
        raise CheckpointError(f"{path}: modality: a mapping with the modality's name is required (got {raw!r})")
    if name not in MODALITIES:
        raise CheckpointError(f"{path}: the model's modality '{name}' is not registered; {REGISTER_FIRST}")
    config = MODALITIES.get(name).Config
    try:
        return config.model_validate(raw)
    except ValidationError as exc:
        raise CheckpointError(f"{path}: " + "; ".join(validation_messages(exc, config, "modality"))) from None
