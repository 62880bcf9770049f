"""The fine-tuning settings (``FinetuneConfig``), beside the run config (``polymask.config``): pydantic models
only, so the command line can show their defaults without importing torch."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from polymask.config import merge
from polymask.schema import StrictModel, validated, validation_messages
from polymask.tracking import Backend


class SpanOptions(StrictModel):
    """How contexts are windowed and answers decoded."""

    doc_stride: int = Field(128, ge=1, description="tokens between the starts of consecutive windows of a context")
    max_query_len: int = Field(64, ge=1, description="question tokens kept (longer questions are cut and counted)")
    max_answer_len: int = Field(30, ge=1, description="longest predicted answer, in tokens")


class FinetuneConfig(StrictModel):
    """Fine-tuning hyper-parameters (the same for every checkpoint in a benchmark)."""

    lr: float = Field(2e-4, gt=0, description="peak learning rate")
    task_settings: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="training settings per task name over the others (a benchmark recipe's "
                                          "choice on validation, e.g. {sst2: {lr: 1.0e-4}, mouse_0: {epochs: 40, "
                                          "patience: 8}}); a setting given on the command line holds for every task, "
                                          "unless given per task there too")
    epochs: int = Field(20, ge=1, description="maximum epochs")
    patience: int = Field(5, ge=1, description="stop after this many epochs without validation improvement")
    batch_size: int = Field(32, ge=1, description="examples per batch")
    pooling: Literal["cls", "mean"] = Field("mean", description="sequence representation: [CLS] state or mean of tokens")
    freeze_encoder: bool = Field(False, description="train the head only (linear probe)")
    augment: bool = Field(
        False, description="draw each training example anew each epoch as its task's labels allow (the spec's "
                           "invariant_to; DNA: reverse complement, k-mer reading frame; SMILES: a random atom order; "
                           "text and span tasks have none); validation and test examples are never augmented")
    test_time_average: bool = Field(
        False, description="also score each validation and test example by the mean prediction over its variants "
                           "that keep the label (the spec's invariant_to; DNA: both strands, every k-mer reading "
                           "frame; SMILES: the molecule and 7 randomised atom orders): a second row, '<system> + "
                           "test-time average', from the same fine-tuned models, and a saved model then predicts "
                           "that way; tasks without invariances are unaffected")
    extra_features: list[Literal["morgan", "rdkit2d"]] = Field(
        default_factory=list, description="molecular features concatenated to the pooled embedding before the head, "
                                          "as chemprop's extra features (SMILES tasks): morgan (ECFP4, 2048 bits), "
                                          "rdkit2d (RDKit's 2D descriptors, standardised on the training split); the "
                                          "row is named '<system> + <sets>'")
    head: Literal["linear", "mlp"] = Field(
        "linear", description="the layers on the pooled vector: linear (one layer), or mlp (a hidden layer as wide as "
                              "the encoder, GELU and dropout, then the output layer; chemprop's feed-forward head)")
    dropout: float = Field(0.1, ge=0, lt=1, description="dropout before the head (and inside an mlp head)")
    weight_decay: float = Field(0.01, ge=0, description="AdamW weight decay")
    warmup_fraction: float = Field(0.06, ge=0, lt=1, description="fraction of steps with linear warm-up")
    max_len: int = Field(256, ge=8, description="tokens per example; a longer one is read from its first max_len "
                                                "tokens and counted, here and wherever the saved model is applied")
    max_train_examples: int | None = Field(
        None, ge=1, description="cap on training examples (questions for SQuAD), a random subset; none: all")
    max_valid_examples: int | None = Field(
        None, ge=1, description="cap on validation examples, a fixed random subset, the same for every system and "
                                "seed; none: all")
    max_test_examples: int | None = Field(
        None, ge=1, description="cap on evaluation examples, a fixed random subset, the same for every system and "
                                "seed; none: all")
    span: SpanOptions = Field(default_factory=SpanOptions, description="span-extraction tasks (SQuAD): windows, answers")
    precision: Literal["auto", "fp32", "bf16"] = Field("auto", description="as in pretraining")
    device: str = Field("auto", description="auto, cpu, cuda or cuda:N")
    save_model: bool = Field(
        True, description="keep the model chosen on the validation split of each pretrained checkpoint's cell, for each "
                          "task and seed: cells/<system>/<task>/seed-N/ next to the cell's result, listed in the "
                          "report (reference rows and Hugging Face folders keep none)")
    report_to: list[Backend] = Field(
        default_factory=list, description="experiment trackers that get each fine-tuning cell's per-epoch train loss "
                                          "and validation metrics (tensorboard, wandb), one run per system/task/seed "
                                          "in the benchmark's folder; each an extra: pip install 'polymask[wandb]'")

    @field_validator("extra_features")
    @classmethod
    def _each_set_once(cls, names: list[str]) -> list[str]:
        if len(set(names)) != len(names):
            raise ValueError(f"a feature set is named twice: {names}")
        return names

    @model_validator(mode="after")
    def _each_task_s_settings_valid(self) -> "FinetuneConfig":
        problems = []
        for name, settings in self.task_settings.items():
            per_run = sorted(set(settings) & set(FinetuneConfig.model_fields) - set(PER_TASK_FIELDS))
            if per_run:
                problems.append(f"task_settings.{name}: {', '.join(per_run)}: set for the whole run, not per task "
                                f"(per task: {', '.join(PER_TASK_FIELDS)})")
                continue
            try:
                self.for_task(name)
            except ValidationError as error:
                problems += validation_messages(error, FinetuneConfig, f"task_settings.{name}")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def for_task(self, name: str) -> "FinetuneConfig":
        """The settings task ``name`` runs with: ``task_settings[name]`` over the others (validated), else these."""
        if name not in self.task_settings:
            return self
        return FinetuneConfig.model_validate(merge({**self.model_dump(), "task_settings": {}}, self.task_settings[name]))


#: the settings ``task_settings`` may give per task: how one task's model is trained (the others name rows, outputs
#: and reference baselines, which hold for the whole run)
PER_TASK_FIELDS = ("lr", "epochs", "patience", "batch_size", "pooling", "freeze_encoder", "augment", "head", "dropout",
                   "weight_decay", "warmup_fraction", "max_len", "span", "precision")


def finetune_settings(raw: dict[str, Any]) -> FinetuneConfig:
    """``raw`` as fine-tuning settings; a ``ConfigError`` naming every wrong field."""
    return validated(FinetuneConfig, raw, "fine-tuning option")
