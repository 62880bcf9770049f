"""The rows of a benchmark table: pretrained checkpoints, Hugging Face folders, the same architecture untrained,
references.

A ``System`` turns (task data, seed, model folder) into a result dict with ``valid`` and ``test`` metrics;
pretrained checkpoints save the model chosen on the validation split into the model folder (unless
``FinetuneConfig.save_model`` is off); the reference rows (the untrained encoder, the classical
baselines) keep no model, which halves the disk a one-checkpoint benchmark uses, and nor do Hugging Face
folders (``finetune.hf_folder``: their encoder and tokenizer fit fine-tuning through small adapters).
Benchmark-specific reference baselines (ECFP + random forest for MoleculeNet, k-mer counts +
logistic regression for DNA, ...) register in ``REFERENCES`` under their benchmark's name, from the module
``families.<benchmark>``, which is imported when the benchmark's references are asked for (if there is one).
"""
from __future__ import annotations

import importlib
import importlib.util
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from tokenizers import Tokenizer

from polymask.checkpoints.finetuned import SaveTarget
from polymask.checkpoints.pretrained import CHECKPOINT_NAME, LoadedCheckpoint, read_checkpoint
from polymask.errors import ConfigError
from polymask.finetune_config import FinetuneConfig
from polymask.modalities import MODALITIES, build_modality
from polymask.modalities.base import Modality
from polymask.model.encoder import Encoder
from polymask.registry import Registry
from polymask.tasks.data.loading import TaskData, with_caps
from polymask.tasks.data.spec import TaskSpec, as_task_spec
from polymask.tasks.data.task_kind import table_kinds
from polymask.tasks.finetune.hf_folder import HFEncoder, HFFolder, HFTokenizer, RawInputs, is_hf_folder, load_hf_folder
from polymask.tasks.metrics.scoring import score
from polymask.tracking import TrackedRun, open_reporter, require

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
    #: task name -> what decides the row's cells besides the task data and seed (the encoder's weights, the
    #: fine-tuning settings for that task): a finished cell is reused only when it is the same
    identity: Callable[[str], dict[str, Any]] = lambda task_name: {}


#: Settings that change where a cell's outputs go or how it is watched, not its scores.
NOT_IN_IDENTITY = ("save_model", "report_to", "device", "task_settings")


def finetune_identity(weights: dict[str, Any], config: FinetuneConfig) -> Callable[[str], dict[str, Any]]:
    """A fine-tuned row's identity: ``weights`` (what the encoder starts from) and the settings of each task
    (``task_settings`` resolved for that task)."""
    def of_task(task_name: str) -> dict[str, Any]:
        settings = config.for_task(task_name).model_dump(mode="json", exclude=set(NOT_IN_IDENTITY))
        return {"weights": weights, "finetune": settings}

    return of_task


@dataclass
class Reference:
    """A benchmark-specific baseline: ``run(task, seed)`` trains and scores it; ``fits(spec)``: whether it can."""

    name: str
    run: Callable[[Any, int], dict[str, Any]]
    fits: Callable[[TaskSpec], bool] = lambda spec: True


def one_label_of(kinds: Sequence[str]) -> Callable[[TaskSpec], bool]:
    """A reference's ``fits`` for tasks of one label column and of ``kinds`` (a spec's ``rest`` of the columns is
    known when its file is read: it is let through)."""
    return lambda spec: spec.kind in kinds and (spec.label_columns == "rest" or len(spec.label_columns) == 1)


REFERENCES: Registry[list[Reference]] = Registry("benchmark references")
#: The package of the benchmark families' modules: ``<FAMILIES>.<benchmark>`` registers that benchmark's references.
FAMILIES = "polymask.benchmarking.families"


def _finetuned(encoder_factory: Callable[[int], Encoder | HFEncoder], tokenizer: Tokenizer | HFTokenizer,
               modality: Modality, config: FinetuneConfig, source: Path,
               save_target: Callable[[Path], SaveTarget | None]) -> RunCell:
    """Fine-tuning cells of the encoder ``source`` names (``encoder_factory(seed)`` gives a fresh one); each saves
    its chosen model where ``save_target(model_dir)`` says (nowhere when it gives None), and reports to
    ``config.report_to``'s trackers."""
    require(config.report_to, "report_to")  # a missing package fails before any cell runs

    def run(task: Any, seed: int, model_dir: Path, tracked: TrackedRun) -> dict[str, Any]:
        settings = config.for_task(task.spec.name)
        reporter = open_reporter(settings.report_to, tracked, {"task": task.spec.key, "seed": seed,
                                                               "checkpoint": str(source),
                                                               "finetune": settings.model_dump(mode="json")})
        try:
            return task.spec.task_kind.finetune(task, encoder_factory(seed), tokenizer, modality, settings, seed,
                                                save_target(model_dir), reporter)
        finally:
            reporter.close()

    return run


def row_name(name: str, config: FinetuneConfig) -> str:
    """A fine-tuned row's name: ``name``, plus the extra feature sets its head reads ('... + morgan')."""
    return " + ".join([name, *config.extra_features])


def _keeps_none(model_dir: Path) -> None:
    """The save target of rows that keep no fine-tuned model."""
    return None


def _checkpoint_weights(checkpoint: LoadedCheckpoint) -> dict[str, Any]:
    """What a checkpoint's row starts from: the sha256 of its weights and of its tokenizer (from its manifest)."""
    files = checkpoint.manifest["files"]
    return {"sha256": files.get("model.safetensors"), "tokenizer": files.get("tokenizer.json")}


def checkpoint_system(path: Path, config: FinetuneConfig, loaded: LoadedCheckpoint | None = None) -> System:
    """A pretrained checkpoint (read from ``path`` unless ``loaded`` is it already), fine-tuned per task and seed
    (objective modules dropped); each cell keeps its chosen model unless ``config.save_model`` is off."""
    checkpoint = loaded or read_checkpoint(path)
    checkpoint.build_objective()  # refuses mismatched or non-finite weights now, not after the task data is read
    modality = build_modality(checkpoint.run_config.modality)
    objective = checkpoint.run_config.objective.name

    def save_target(model_dir: Path) -> SaveTarget | None:
        return SaveTarget(model_dir, str(checkpoint.folder.resolve()), objective, checkpoint.step) \
            if config.save_model else None

    step = f" {Path(path).name}" if CHECKPOINT_NAME.fullmatch(Path(path).name) else ""  # one run's checkpoints apart
    return System(row_name(f"{checkpoint.name}{step} ({objective})", config),
                  f"{checkpoint.folder} ({objective}, preset {checkpoint.encoder_config.preset})",
                  modality, _finetuned(lambda seed: checkpoint.build_encoder(), checkpoint.tokenizer, modality, config,
                                       checkpoint.folder, save_target),
                  checkpoint.pretraining_tokens(),
                  finetune_identity(_checkpoint_weights(checkpoint), config))


def untrained_system(path: Path, config: FinetuneConfig, loaded: LoadedCheckpoint | None = None) -> System:
    """The same architecture and tokenizer as the checkpoint at ``path`` (read unless ``loaded`` is it already),
    randomly initialised (per seed); a reference row, so its fine-tuned models are not kept."""
    checkpoint = loaded or read_checkpoint(path)
    modality = build_modality(checkpoint.run_config.modality)

    def fresh_encoder(seed: int) -> Encoder:
        torch.manual_seed(10_000 + seed)
        return Encoder(checkpoint.encoder_config, checkpoint.vocab_size)

    return System(row_name("no pretraining", config), f"architecture of {checkpoint.folder}, random initialisation",
                  modality, _finetuned(fresh_encoder, checkpoint.tokenizer, modality, config, checkpoint.folder,
                                       _keeps_none),
                  identity=finetune_identity({"random": checkpoint.encoder_config.model_dump(mode="json"),
                                              "tokenizer": _checkpoint_weights(checkpoint)["tokenizer"]}, config))


def _reader(modality: Modality) -> dict[str, Any]:
    """The settings a Hugging Face row's records are read and varied with: those of the modality it borrows (the
    first polymask checkpoint's, else the tasks' defaults; DNA's k sets the reading frames that augmentation and
    test-time averaging shift over), as fine-tuning's augmentation sets them (pretraining's switches do not count),
    without the tokenizer (the folder reads with its own)."""
    return modality.augmented().config.model_dump(mode="json", exclude={"tokenizer"})


def hf_system(folder: HFFolder, config: FinetuneConfig, modality: Modality) -> System:
    """A Hugging Face folder's encoder, fine-tuned per task and seed with the same heads and recipe; its records are
    read with ``modality`` and handed to the folder's own tokenizer as plain text. It keeps no fine-tuned model
    (polymask's fine-tuned format holds polymask encoders only)."""
    positions = getattr(folder.model.config, "max_position_embeddings", None)
    if isinstance(positions, int) and config.max_len > positions:
        raise ConfigError(f"{folder.folder}: max_len {config.max_len} is more than the {positions} positions its "
                          f"config.json states; pass a smaller --max-len")
    return System(row_name(folder.name, config), f"{folder.folder} (Hugging Face {folder.model_type}, its own tokenizer)",
                  modality,
                  _finetuned(folder.encoder, folder.tokenizer, RawInputs(modality), config, folder.folder, _keeps_none),
                  # sizes: what cells recorded before the hashes (kept, so that those cells are still reused)
                  identity=finetune_identity({"files": folder.file_sizes(), "sha256": folder.file_hashes(),
                                              "reader": _reader(modality)}, config))


def hf_untrained_system(folder: HFFolder, config: FinetuneConfig, modality: Modality) -> System:
    """The "no pretraining" row of a benchmark of Hugging Face folders only: the first folder's architecture built
    from its config.json, randomly initialised (per seed), with its own tokenizer."""
    return System(row_name("no pretraining", config),
                  f"architecture of {folder.folder} (Hugging Face {folder.model_type}), random initialisation", modality,
                  _finetuned(folder.untrained_encoder, folder.tokenizer, RawInputs(modality), config, folder.folder,
                             _keeps_none),
                  identity=finetune_identity({"random": folder.architecture(),
                                              "tokenizer": folder.file_hashes(weights=False),
                                              "reader": _reader(modality)}, config))


def _tasks_modality(specs: list[TaskSpec]) -> Modality:
    """The modality the tasks name, with its default settings."""
    names = sorted({spec.modality for spec in specs})
    if len(names) != 1:
        raise ConfigError(f"tasks of {len(names)} modalities ({', '.join(names)}): Hugging Face folders need a "
                          f"polymask checkpoint beside them, whose modality reads the tasks, or one modality's tasks")
    return MODALITIES.get(names[0])()


def _one_modality(checkpoints: dict[Path, System]) -> None:
    """Refuse polymask checkpoints of different modalities: each reads the records its own way (a DNA row drops the
    SMILES a text row keeps), so their rows would be scored on different examples."""
    names = {system.modality.name for system in checkpoints.values()}
    if len(names) > 1:
        shown = ", ".join(f"{path} ({system.modality.name})" for path, system in checkpoints.items())
        raise ConfigError(f"checkpoints of {len(names)} modalities: {shown}; their rows would read the tasks' records "
                          f"differently: benchmark one modality's checkpoints together")


def read_polymask_checkpoints(paths: Sequence[Path]) -> dict[Path, LoadedCheckpoint]:
    """The polymask checkpoints among ``paths`` (not the Hugging Face folders), each read and verified once."""
    return {path: read_checkpoint(path) for path in paths if not is_hf_folder(path)}


def pretrained_systems(paths: list[Path], config: FinetuneConfig, tasks: Sequence[str | TaskSpec],
                       untrained: bool = False, loaded: dict[Path, LoadedCheckpoint] | None = None) -> list[System]:
    """One row per ``--checkpoint`` path, in order: a polymask checkpoint, or a Hugging Face folder
    (``is_hf_folder``), whose records are read with the first checkpoint's modality (else the tasks' own, with
    its default settings) so that every row sees the same examples. With ``untrained`` also the "no pretraining"
    row: the first polymask checkpoint's architecture, else the first folder's, randomly initialised. ``loaded``:
    the polymask checkpoints already read (``read_polymask_checkpoints``)."""
    hf_paths = [path for path in paths if is_hf_folder(path)]
    specs = [as_task_spec(task) for task in tasks] if hf_paths else []
    spans = [spec.key for spec in specs if not spec.task_kind.table]
    if spans:
        raise ConfigError(f"{hf_paths[0]}: a Hugging Face folder is fine-tuned on table tasks "
                          f"({', '.join(table_kinds())}) only, not on {', '.join(spans)}")
    folders = [load_hf_folder(path) for path in hf_paths]
    loaded = read_polymask_checkpoints(paths) if loaded is None else loaded  # each read once, for both rows
    ours = {path: checkpoint_system(path, config, checkpoint) for path, checkpoint in loaded.items()}
    _one_modality(ours)
    modality = next(iter(ours.values())).modality if ours else _tasks_modality(specs)
    theirs = {path: hf_system(folder, config, modality) for path, folder in zip(hf_paths, folders)}
    systems = [ours[path] if path in ours else theirs[path] for path in paths]
    if untrained:
        systems.append(untrained_system(next(iter(ours)), config, loaded[next(iter(ours))]) if ours
                       else hf_untrained_system(folders[0], config, modality))
    return systems


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


def _capped(run: Callable[[Any, int], dict[str, Any]], config: FinetuneConfig) -> RunCell:
    """A reference baseline as a benchmark row: trained and scored on the subsets the fine-tuned rows see under
    ``config``'s caps; no model folder is written."""
    caps = (config.max_train_examples, config.max_valid_examples, config.max_test_examples)
    return lambda task, seed, model_dir, tracked: run(with_caps(task, seed, *caps), seed)


def _caps_identity(config: FinetuneConfig) -> dict[str, Any]:
    """A reference row's identity: its training cap, and the validation and test caps where there are some."""
    return {"max_train_examples": config.max_train_examples,
            **{name: value for name in ("max_valid_examples", "max_test_examples")
               if (value := getattr(config, name)) is not None}}


def _import_family(benchmark: str) -> None:
    """Import ``families.<benchmark>`` (its import registers the benchmark's reference baselines), if there is one."""
    module = f"{FAMILIES}.{benchmark}"
    if benchmark.isidentifier() and importlib.util.find_spec(module) is not None:
        importlib.import_module(module)


def reference_systems(benchmark: str | None, modality: Modality, config: FinetuneConfig,
                      also: Sequence[Reference] = (), tasks: Sequence[TaskSpec] | None = None) -> list[System]:
    """The registered reference baselines of a benchmark (none if it registers none, or for no benchmark), then
    those of ``also`` it lacks, trained and scored on the same capped subsets as the fine-tuned rows under
    ``config``; with ``tasks``, only those that fit every one of them."""
    if benchmark is not None:
        _import_family(benchmark)
    references = list(REFERENCES.get(benchmark)) if benchmark in REFERENCES else []
    references += [ref for ref in also if ref.name not in {known.name for known in references}]
    return [System(ref.name, ref.name, modality, _capped(ref.run, config),
                   identity=lambda task_name: _caps_identity(config))
            for ref in references if all(ref.fits(spec) for spec in tasks or [])]
