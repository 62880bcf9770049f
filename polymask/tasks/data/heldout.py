"""The held-out records of a benchmark: every validation and test input of its tasks, one file per task and split.

Pretraining on the molecules (or sequences) that a benchmark validates and tests on lets the encoder see
them before fine-tuning. These files, passed to a pretraining run as ``data.exclude``, keep them out of
its corpus, and the run's report counts how many it held out per file (so per task and split).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from polymask.data.exclusions import HELDOUT_SUMMARY
from polymask.errors import ConfigError
from polymask.jsonio import make_dir, write_json, write_text
from polymask.modalities import MODALITIES, Modality
from polymask.tasks.data.loading import TaskSplit, load_task
from polymask.tasks.data.spec import load_task_spec

SPLITS = ("train", "valid", "test")


def heldout_file(out: Path, task_key: str, split: str, modality: str) -> Path:
    """``<out>/<task>-<split>.smi`` (``.txt`` for modalities other than SMILES)."""
    return out / f"{task_key.split('/')[-1]}-{split}.{'smi' if modality == 'smiles' else 'txt'}"


def default_modality(name: str) -> Modality:
    """The registered modality ``name`` with its default settings."""
    cls = MODALITIES.get(name)
    return cls(cls.Config.model_validate({"name": name}))


def unique_inputs(split: TaskSplit) -> list[str]:
    """The split's input texts, each once, in order (a newline inside one becomes a space)."""
    return list(dict.fromkeys(text.replace("\n", " ") for inputs in split.inputs for text in inputs))


def write_heldout(task_keys: Sequence[str], splits: Sequence[str], out: Path,
                  data_dir: Path | None = None) -> dict[str, Any]:
    """Write the normalised inputs of ``splits`` of each task under ``out``; returns (and writes as
    ``heldout.json``) the count of unique records per file and the split each task used."""
    make_dir(out)
    files: dict[str, int] = {}
    protocols: dict[str, str] = {}
    for key in task_keys:
        spec = load_task_spec(key)
        if not spec.task_kind.table:
            raise ConfigError(f"{key}: held-out files are written for table tasks, not for {spec.kind} tasks")
        task = load_task(spec, default_modality(spec.modality), data_dir)
        protocols[key] = task.protocol
        for split in splits:
            records = unique_inputs(getattr(task, split))
            path = heldout_file(out, key, split, spec.modality)
            write_text(path, "".join(record + "\n" for record in records))
            files[path.name] = len(records)
    summary = {"tasks": list(task_keys), "splits": list(splits), "split_protocols": protocols, "records": files}
    write_json(out / HELDOUT_SUMMARY, summary)
    return summary
