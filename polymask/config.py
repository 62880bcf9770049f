"""Run configuration: pydantic models with documented fields, YAML loading, CLI overrides.

A run is ``RunConfig``: which modality and objective (each validated by the config model that the
registered class declares), the encoder size, the data and the training schedule. Every field has
a type, a default and a description; a wrong key or value fails at load time with a message that
names the field.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SerializeAsAny, ValidationError, model_validator

from polymask.encoder_config import EncoderConfig
from polymask.errors import ConfigError, DataError
from polymask.registry import UnknownNameError, did_you_mean
from polymask.resources import builtin_config, builtin_config_names
from polymask.schema import ComponentConfig, StrictModel, validation_messages
from polymask.tracking import Backend
from polymask.yamlio import parse_yaml_value, read_yaml

SCIENTIFIC = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


class DataConfig(StrictModel):
    paths: list[Path] = Field(default_factory=list, description="corpus files; empty: the modality's built-in corpus")
    root: Path | None = Field(
        None, description="folder where a relative corpus path not found from the working directory is looked up; "
                          "default: $POLYMASK_DATA_DIR")
    column: str | None = Field(None, description="column or field holding the sequence (csv/tsv/jsonl/parquet)")
    max_len: int = Field(128, ge=8, le=8192, description="maximum tokens per sequence, specials included")
    val_fraction: float = Field(0.05, ge=0.0, lt=0.5, description="fraction of records held out for validation")
    max_val_records: int = Field(1000, ge=0, description="cap on held-out validation records")
    batching: Literal["bucket", "random"] = Field(
        "bucket", description="bucket: batches of similar length (little padding); random: plain shuffling")
    bucket_pool: int = Field(64, ge=1, description="batches per sorting pool when bucketing")
    cache_dir: Path | None = Field(None, description="tokenised-data cache; default $POLYMASK_CACHE or ~/.cache/polymask")
    strict: bool = Field(False, description="fail on the first invalid record instead of skipping and counting it")
    num_proc: int | None = Field(
        None, ge=1, description="processes that validate, canonicalise and tokenise the corpus (datasets.map); "
                                "null: every available core for corpora of 50,000 records or more, else 1")
    streaming: bool = Field(False, description="read, validate and tokenise on the fly instead of caching the corpus")
    exclude: list[Path] = Field(
        default_factory=list, description="files (or folders of files) of records to keep out of the corpus, compared "
                                          "after normalisation, e.g. a benchmark's held-out molecules from "
                                          "`polymask benchmark-heldout`; counted in the run's report")

    @model_validator(mode="after")
    def _exclude_needs_cache(self) -> "DataConfig":
        if self.exclude and self.streaming:
            raise ValueError("data.exclude needs the cached corpus; it cannot be combined with data.streaming")
        return self

    def corpus_paths(self) -> list[Path]:
        """``paths``, each relative one found from the working directory or else under ``root``."""
        root = self.root or (Path(os.environ["POLYMASK_DATA_DIR"]) if os.environ.get("POLYMASK_DATA_DIR") else None)
        found = []
        for path in self.paths:
            if not path.is_absolute() and not path.exists() and root is not None and (root / path).exists():
                path = root / path
            elif not path.exists():
                where = f" nor under {root}" if root is not None and not path.is_absolute() else ""
                hint = "" if path.is_absolute() or root else " (set data.root or $POLYMASK_DATA_DIR to a data folder)"
                raise DataError(f"corpus file {path} not found from {Path.cwd()}{where}{hint}")
            found.append(path)
        return found

    def resolved_cache_dir(self) -> Path:
        if self.cache_dir is not None:
            return self.cache_dir
        return Path(os.environ.get("POLYMASK_CACHE", Path.home() / ".cache" / "polymask"))


class CollapseConfig(StrictModel):
    """When the trainer warns that a run has collapsed (``training/collapse.py``)."""

    enabled: bool = Field(True, description="measure unigram accuracy and effective rank at each evaluation")
    accuracy_margin: float = Field(
        0.01, ge=0, description="alarm when val masked accuracy <= unigram accuracy + this margin")
    min_rank: int = Field(3, ge=1, description="alarm when the effective rank (tau 0.9) of final hidden states is lower")
    rank_tokens: int = Field(4096, ge=64, description="validation token vectors the rank is measured on")
    after_step: int | None = Field(
        None, ge=0, description="first step an alarm may fire; default: the end of the warm-up (at least step 1)")


class TrainConfig(StrictModel):
    batch_size: int = Field(32, ge=1, description="sequences per micro-batch")
    grad_accum: int = Field(1, ge=1, description="micro-batches per optimiser step")
    max_steps: int = Field(1500, ge=1, description="optimiser steps; the learning-rate schedule spans them")
    max_time: float | None = Field(
        None, gt=0, description="training-time budget in seconds: stop once the steps have taken this long (evaluations "
                                "and checkpoints not counted, earlier invocations of a resumed run counted); the "
                                "schedule then ends there, re-projected from the step time as the run goes")
    stop_after_steps: int | None = Field(
        None, ge=1, description="stop this invocation after N steps and checkpoint (schedule still follows max_steps)")
    lr: float = Field(1e-3, gt=0, description="peak learning rate")
    min_lr_ratio: float = Field(0.1, ge=0, le=1, description="final learning rate as a fraction of the peak")
    warmup_steps: int = Field(100, ge=0, description="linear warm-up steps")
    schedule: Literal["cosine", "linear", "constant"] = Field("cosine", description="decay after warm-up")
    weight_decay: float = Field(0.01, ge=0, description="AdamW weight decay (matrices only)")
    betas: tuple[float, float] = Field((0.9, 0.98), description="AdamW betas")
    eps: float = Field(1e-6, gt=0, description="AdamW epsilon")
    grad_clip: float | None = Field(1.0, gt=0, description="gradient-norm clipping; null disables")
    absent_token_bias: float | None = Field(
        -10.0, description="initial output bias of the tokens the training split never holds (they are never "
                           "targets; see docs/smiles.md); null: every bias starts at 0. Not applied when streaming")
    max_nonfinite_steps: int = Field(
        5, ge=1, description="a step with a non-finite loss or gradient is skipped and counted; this many in a row "
                             "stop the run")
    eval_every: int = Field(250, ge=1, description="steps between validation passes")
    eval_batches: int | None = Field(None, ge=1, description="cap on validation batches; null: the whole split")
    save_every: int = Field(500, ge=1, description="steps between checkpoints (one is always written at the end)")
    keep_checkpoints: int = Field(2, ge=1, description="checkpoints kept on disk (newest first)")
    log_every: int = Field(10, ge=1, description="steps between metric lines in metrics.jsonl")
    seed: int = Field(0, description="seed for initialisation, data order and masking")
    device: str = Field("auto", description="auto (cuda if available, else cpu), cpu, cuda or cuda:N")
    precision: Literal["auto", "fp32", "bf16"] = Field(
        "auto", description="auto: bf16 autocast where the device has native bf16 (recent GPUs and CPUs), else fp32")
    compile: bool = Field(False, description="torch.compile the encoder")
    shape_multiple: int | None = Field(
        None, ge=1, description="pad each batch's width (and MAE-LM's visible width) to a multiple of this many tokens, "
        "and the rows an LM head scores to 8 times it: a bounded set of tensor shapes, so that the kernels bf16 "
        "caches per shape on CPU stop growing resident memory (docs/results/memory); 1: pad to the longest only; "
        "default: 16 where bf16 autocast runs on a CPU, else 1. ExLM's expanded sequence, and so the states its LM "
        "head scores, is not bounded by it (only the batch width is)")
    parallel: Literal["ddp", "fsdp"] = Field(
        "ddp", description="multi-process strategy under torchrun: DistributedDataParallel or FSDP2 (fully_shard)")
    dist_timeout: float = Field(
        600.0, gt=0, description="seconds a rank under torchrun waits for the others in a collective (gradient "
                                 "all-reduce, barrier) before the run stops with one line naming the last checkpoint")
    threads: int | None = Field(None, ge=1, description="CPU threads for torch; null: torch's default")
    progress: bool = Field(True, description="show a progress bar")
    report_to: list[Backend] = Field(
        default_factory=list, description="experiment trackers that also get metrics.jsonl's numbers and the config "
                                          "(tensorboard, wandb; each an extra: pip install 'polymask[wandb]')")
    collapse: CollapseConfig = Field(default_factory=CollapseConfig, description="the collapse alarm")


class RunConfig(StrictModel):
    modality: SerializeAsAny[ComponentConfig] = Field(description="modality config (name + its options)")
    objective: SerializeAsAny[ComponentConfig] = Field(description="objective config (name + its options)")
    model: EncoderConfig = Field(default_factory=EncoderConfig, description="encoder size")
    data: DataConfig = Field(default_factory=DataConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    out: Path | None = Field(None, description="run folder; default runs/<modality>-<objective>")

    @model_validator(mode="after")
    def _encoder_from_objective(self) -> "RunConfig":
        """The encoder settings the objective decides (``Objective.encoder_overrides``: ``rope_2d``) are its alone:
        ``model`` takes them, validated with the rest of the encoder; ``model`` may only repeat them."""
        if type(self.objective) is ComponentConfig:  # check_run_fields' placeholder: no objective yet
            return self
        from polymask.objectives import OBJECTIVES

        decided = OBJECTIVES.get(self.objective.name).encoder_overrides(self.objective)
        clashes = [f"model.{key}: decided by the objective ({self.objective.name} needs {value}); leave it out"
                   for key, value in decided.items()
                   if key in self.model.model_fields_set and getattr(self.model, key) != value]
        if clashes:
            raise ValueError("; ".join(clashes))
        if any(getattr(self.model, key) != value for key, value in decided.items()):
            try:
                self.model = EncoderConfig.model_validate({**self.model.model_dump(), **decided})
            except ValidationError as exc:
                shown = ", ".join(f"{key}={value}" for key, value in decided.items())
                raise ValueError(f"model: with {shown} (objective {self.objective.name}): "
                                 + "; ".join(validation_messages(exc, EncoderConfig))) from None
        return self

    def out_dir(self) -> Path:
        return self.out or Path("runs") / f"{self.modality.name}-{self.objective.name}"


def _component(raw: Any, field: str, registry: Any, errors: list[str]) -> ComponentConfig | None:
    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, dict) or "name" not in raw:
        errors.append(f"{field}.name: required; choose one of: {', '.join(registry.names())}")
        return None
    try:
        cls = registry.get(raw["name"])
    except UnknownNameError as exc:
        errors.append(f"{field}.name: {exc}")
        return None
    try:
        return cls.Config.model_validate(raw)
    except ValidationError as exc:
        errors.extend(validation_messages(exc, cls.Config, field))
        return None


def check_run_fields(raw: dict[str, Any]) -> None:
    """Validate every field outside the modality's and objective's options, without importing torch (or the
    registries, which do): a wrong key or value fails in a fraction of a second. Raises ``ConfigError``."""
    if not isinstance(raw, dict):
        raise ConfigError(f"a run config must be a mapping, got {type(raw).__name__}")
    rest = {key: value for key, value in raw.items() if key not in ("modality", "objective")}
    placeholder = ComponentConfig(name="?")
    try:
        RunConfig.model_validate({**rest, "modality": placeholder, "objective": placeholder})
    except ValidationError as exc:
        raise ConfigError("invalid config:\n  " + "\n  ".join(validation_messages(exc, RunConfig))) from None


def build_run_config(raw: dict[str, Any]) -> RunConfig:
    """Validate a raw (YAML/CLI) dict into a ``RunConfig``; raises ``ConfigError`` naming each bad field.

    The fields outside the modality and objective are checked first (``check_run_fields``), before the
    registries, and so torch, are imported."""
    check_run_fields(raw)
    from polymask.modalities import MODALITIES
    from polymask.objectives import OBJECTIVES

    errors: list[str] = []
    modality = _component(raw.get("modality"), "modality", MODALITIES, errors)
    objective = _component(raw.get("objective"), "objective", OBJECTIVES, errors)
    if errors:
        raise ConfigError("invalid config:\n  " + "\n  ".join(errors))
    try:
        return RunConfig.model_validate({**raw, "modality": modality, "objective": objective})
    except ValidationError as exc:  # what the parts settle between them (the encoder the objective needs)
        raise ConfigError("invalid config:\n  " + "\n  ".join(validation_messages(exc, RunConfig))) from None


def load_yaml(path_or_name: str | Path) -> dict[str, Any]:
    """Read a YAML recipe from a path, or by name from the built-in ``configs/``."""
    path = Path(path_or_name)
    if not path.is_file():
        builtin = builtin_config(str(path_or_name))
        if builtin is None:
            names = builtin_config_names()
            hint = did_you_mean(str(path_or_name).removesuffix(".yaml"), names) or f" built-in: {', '.join(names)}"
            raise ConfigError(f"config '{path_or_name}' is neither a file nor a built-in recipe;{hint}")
        path = builtin
    return read_yaml(path, "a run config")


def apply_override(raw: dict[str, Any], assignment: str, where: str | None = None) -> None:
    """Apply one ``dotted.key=value`` override in place; the value is parsed as YAML (one that is not is a
    ``ConfigError`` naming ``where``, by default the ``--set``)."""
    key, sep, value = assignment.partition("=")
    if not sep or not key:
        raise ConfigError(f"override '{assignment}' is not of the form key=value")
    parts = key.strip().split(".")
    node = raw
    for part in parts[:-1]:
        child = node.get(part)
        if isinstance(child, str) and part in ("modality", "objective"):
            child = {"name": child}
        if not isinstance(child, dict):
            child = {}
        node[part] = child
        node = child
    parsed = parse_yaml_value(value, where or f"--set {assignment}")
    if isinstance(parsed, str) and SCIENTIFIC.fullmatch(parsed):
        parsed = float(parsed)  # YAML 1.1 reads 3e-4 (no dot) as a string
    node[parts[-1]] = parsed


def merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """Recursive dict merge; ``update`` wins."""
    result = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merge(result[key], value)
        else:
            result[key] = value
    return result
