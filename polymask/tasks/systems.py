"""The rows of a benchmark table: pretrained checkpoints, the same architecture untrained, references.

A ``System`` turns (task data, seed, model folder) into a result dict with ``valid`` and ``test`` metrics;
pretrained checkpoints save the model chosen on the validation split into the model folder (unless
``FinetuneConfig.save_model`` is off); the reference rows (the untrained encoder, the classical
baselines) keep no model, which halves the disk a one-checkpoint benchmark uses.
Benchmark-specific reference baselines (ECFP + random forest for MoleculeNet, k-mer counts +
logistic regression for DNA, ...) register in ``REFERENCES`` under their benchmark's name.
"""
from __future__ import annotations

import importlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from polymask.config import build_run_config
from polymask.inference.saved import SaveTarget
from polymask.model.encoder import Encoder
from polymask.modalities import build_modality
from polymask.modalities.base import Modality
from polymask.registry import Registry
from polymask.tasks.data import TaskData, with_train_cap
from polymask.tasks.finetune import FinetuneConfig
from polymask.tasks.kinds import KINDS
from polymask.tasks.metrics import score
from polymask.tracking import TrackedRun, open_reporter, require
from polymask.training.checkpoint import CHECKPOINT_NAME, MANIFEST, LoadedCheckpoint, load_checkpoint

#: (task data of any kind, seed, folder for the fine-tuned model, the cell's name and folder for trackers) -> result.
RunCell = Callable[[Any, int, Path, TrackedRun], dict[str, Any]]


@dataclass
class System:
    """One benchmark row: a name, the modality its inputs are read with, and how to run a cell."""

    name: str
    description: str
    modality: Modality
    run: RunCell
    #: real tokens the encoder was pretrained on (a checkpoint's row), for the scaling plot; None otherwise
    pretraining_tokens: int | None = None


@dataclass
class Reference:
    """A benchmark-specific baseline: ``run(task, seed)`` trains and scores it."""

    name: str
    run: Callable[[Any, int], dict[str, Any]]


REFERENCES: Registry[list[Reference]] = Registry("benchmark references")
#: Modules that register a benchmark's reference baselines, imported when the benchmark runs.
REFERENCE_MODULES = {"moleculenet": "polymask.tasks.moleculenet", "glue": "polymask.tasks.glue",
                     "dna": "polymask.tasks.dna"}


def _finetuned(encoder_factory: Callable[[int], Encoder], checkpoint: LoadedCheckpoint, modality: Modality,
               config: FinetuneConfig, keeps_models: bool) -> RunCell:
    """Fine-tuning cells; with ``keeps_models`` (and ``config.save_model``) each saves its chosen model, and each
    reports to ``config.report_to``'s trackers."""
    require(config.report_to, "report_to")  # a missing package fails before any cell runs
    objective = build_run_config(checkpoint.config).objective.name
    step = json.loads((checkpoint.folder / MANIFEST).read_text()).get("step")

    def run(task: Any, seed: int, model_dir: Path, tracked: TrackedRun) -> dict[str, Any]:
        target = SaveTarget(model_dir, str(checkpoint.folder.resolve()), objective, step) \
            if keeps_models and config.save_model else None
        reporter = open_reporter(config.report_to, tracked, {"task": task.spec.key, "seed": seed,
                                                             "checkpoint": str(checkpoint.folder),
                                                             "finetune": config.model_dump(mode="json")})
        try:
            return KINDS[task.spec.kind].finetune(task, encoder_factory(seed), checkpoint.tokenizer, modality, config,
                                                  seed, target, reporter)
        finally:
            reporter.close()

    return run


def checkpoint_system(path: Path, config: FinetuneConfig) -> System:
    """A pretrained checkpoint, fine-tuned per task and seed (objective modules dropped)."""
    checkpoint = load_checkpoint(path)
    checkpoint.build_objective()  # refuses mismatched or non-finite weights now, not after the task data is read
    run_config = build_run_config(checkpoint.config)
    modality = build_modality(run_config.modality)
    step = f" {Path(path).name}" if CHECKPOINT_NAME.fullmatch(Path(path).name) else ""  # one run's checkpoints apart
    return System(f"{checkpoint.name}{step} ({run_config.objective.name})",
                  f"{checkpoint.folder} ({run_config.objective.name}, preset {checkpoint.encoder_config.preset})",
                  modality, _finetuned(lambda seed: checkpoint.build_encoder(), checkpoint, modality, config, True),
                  checkpoint.pretraining_tokens())


def untrained_system(path: Path, config: FinetuneConfig) -> System:
    """The same architecture and tokenizer as the checkpoint at ``path``, randomly initialised (per seed); a
    reference row, so its fine-tuned models are not kept."""
    checkpoint = load_checkpoint(path)
    modality = build_modality(build_run_config(checkpoint.config).modality)

    def fresh_encoder(seed: int) -> Encoder:
        torch.manual_seed(10_000 + seed)
        return Encoder(checkpoint.encoder_config, checkpoint.vocab_size)

    return System("no pretraining", f"architecture of {checkpoint.folder}, random initialisation",
                  modality, _finetuned(fresh_encoder, checkpoint, modality, config, False))


def reference_result(task: TaskData, seed: int, predictions: dict[str, np.ndarray], started: float) -> dict[str, Any]:
    """A reference baseline's result from its predictions on ``valid``, ``test`` and any extra test sets."""
    names = [task.spec.metric, *task.spec.extra_metrics]
    test = score(names, task.test.labels, predictions["test"])
    for extra, split in task.extra_tests.items():
        test.update({f"{extra}_{metric}": value for metric, value in score(names, split.labels, predictions[extra]).items()})
    return {
        "task": task.spec.key, "seed": seed, "metric": task.spec.metric,
        "valid": score(names, task.valid.labels, predictions["valid"]), "test": test,
        "n_train": len(task.train), "n_valid": len(task.valid), "n_test": len(task.test), "truncated": 0,
        "skipped": len(task.skipped), "duplicates_removed": task.duplicates_removed, "split": task.spec.split.method,
        "time_s": round(time.perf_counter() - started, 2),
    }


def _capped(run: Callable[[Any, int], dict[str, Any]], max_train_examples: int | None) -> RunCell:
    """A reference baseline as a benchmark row: the capped training subset; no model folder is written."""
    return lambda task, seed, model_dir, tracked: run(with_train_cap(task, max_train_examples, seed), seed)


def reference_systems(benchmark: str, modality: Modality, max_train_examples: int | None = None) -> list[System]:
    """The registered reference baselines of a benchmark (none if it registers none), trained on the same
    capped training subset as the fine-tuned rows."""
    if benchmark in REFERENCE_MODULES:
        importlib.import_module(REFERENCE_MODULES[benchmark])
    if benchmark not in REFERENCES:
        return []
    return [System(ref.name, ref.name, modality, _capped(ref.run, max_train_examples)) for ref in REFERENCES.get(benchmark)]
