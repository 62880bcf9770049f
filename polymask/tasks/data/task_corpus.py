"""A pretraining corpus from a benchmark's own unlabeled training inputs (DNABERT-2's "pretraining on GUE's
training sequences"), never from its validation or test inputs.

The training inputs of the chosen tasks are written once each (deduplicated within and across tasks, in task
order), after removing every input that is a validation or test input of any task of the benchmark on hand:
tasks share sequences (GUE's promoter sets overlap; a few sequences sit in more than one split of one task).
``corpus.json`` beside the corpus records the counts per task, the bases (characters) and what was removed.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from polymask.errors import ConfigError, TaskFileMissing
from polymask.jsonio import make_dir, write_json, write_text
from polymask.tasks.data.heldout import default_modality, unique_inputs
from polymask.tasks.data.loading import load_task
from polymask.tasks.data.spec import load_task_spec, task_names

CORPUS_FILE = "corpus.txt"
SUMMARY_FILE = "corpus.json"


def _load(key: str, data_dir: Path | None) -> Any:
    spec = load_task_spec(key)
    if not spec.task_kind.table:
        raise ConfigError(f"{key}: a corpus is built from table tasks, not from {spec.kind} tasks")
    return load_task(spec, default_modality(spec.modality), data_dir)


def _tasks_on_hand(benchmark: str, data_dir: Path | None) -> tuple[dict[str, Any], list[str]]:
    """Every task of the benchmark whose files are found (key -> task data), and the keys of those missing."""
    loaded: dict[str, Any] = {}
    missing: list[str] = []
    for key in task_names(benchmark):
        try:
            loaded[key] = _load(key, data_dir)
        except TaskFileMissing:
            missing.append(key)
    return loaded, missing


def write_task_corpus(benchmark: str, task_keys: Sequence[str], out: Path,
                      data_dir: Path | None = None) -> dict[str, Any]:
    """Write ``out/corpus.txt`` (one training input per line) and ``out/corpus.json``; returns the summary."""
    loaded, missing = _tasks_on_hand(benchmark, data_dir)
    held = {text for task in loaded.values() for text in unique_inputs(task.valid) + unique_inputs(task.test)}
    absent = [key for key in task_keys if key in missing]
    if absent:
        raise ConfigError(f"task files not found for {', '.join(absent)}: give --data-dir (or $POLYMASK_DATA_DIR)")
    kept: dict[str, None] = {}
    per_task: dict[str, dict[str, int]] = {}
    for key in task_keys:
        inputs = unique_inputs(loaded[key].train)
        new = [text for text in inputs if text not in held and text not in kept]
        kept.update(dict.fromkeys(new))
        per_task[key] = {"train_inputs": len(inputs), "held_out": sum(text in held for text in inputs),
                         "added": len(new), "added_characters": sum(map(len, new))}
    make_dir(out)
    write_text(out / CORPUS_FILE, "".join(text + "\n" for text in kept))
    summary = {"benchmark": benchmark, "tasks": list(task_keys), "records": len(kept),
               "characters": sum(map(len, kept)), "per_task": per_task,
               "held_out_inputs": len(held), "held_out_from": list(loaded),
               "tasks_not_on_hand": missing}
    write_json(out / SUMMARY_FILE, summary)
    return summary
