"""Run systems x tasks x seeds, cache every finished cell, and aggregate into tables and a chart.

Each (system, task, seed) result is a JSON file under ``<out>/cells/``, and the fine-tuned model it
chose on the validation split a folder next to it (``seed-N.json``, ``seed-N/``); a rerun skips finished
cells, so an interrupted benchmark resumes where it stopped. The report is written as Markdown,
CSV and JSON (mean ± std over seeds), plus a PNG with one panel per task.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from polymask.errors import TaskFileMissing
from polymask.inference.saved import folder_bytes, is_finetuned
from polymask.jsonio import make_dir, write_json
from polymask.tasks.kinds import KINDS
from polymask.tasks.metrics import METRICS
from polymask.tasks.report import write_report
from polymask.tasks.spec import TaskSpec, load_task_spec
from polymask.tasks.systems import System
from polymask.training.runtime import inner_progress, progress_bar


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-").lower()


def _load_tasks(specs: list[TaskSpec], systems: list[System], data_dir: Path | None,
                missing_ok: bool = True) -> tuple[dict, dict]:
    """Task data per (task, modality config); tasks whose files are missing are recorded, not faked (or,
    without ``missing_ok``, fail). A file that is there but unusable always fails, naming the file."""
    loaded: dict[tuple[str, str], Any] = {}
    missing: dict[str, str] = {}
    for spec in specs:
        for system in systems:
            key = (spec.key, system.modality.config.model_dump_json())
            if key in loaded or spec.key in missing:
                continue
            try:
                loaded[key] = KINDS[spec.kind].load(spec, system.modality, data_dir)
            except TaskFileMissing as exc:
                if not missing_ok:
                    raise
                missing[spec.key] = str(exc)
    return loaded, missing


def run_cells(systems: list[System], task_keys: list[str], seeds: list[int], out: Path,
              data_dir: Path | None = None, progress: bool = True, missing_ok: bool = True) -> dict[str, Any]:
    """Run (or reuse) every cell; returns {"cells": [...], "missing": {task: reason}, "tasks": {...}}."""
    started = time.perf_counter()
    specs = [load_task_spec(key) for key in task_keys]
    loaded, missing = _load_tasks(specs, systems, data_dir, missing_ok)
    cells, details = [], {}
    todo = [(s, spec, seed) for spec in specs if spec.key not in missing for s in systems for seed in seeds]
    bar = progress_bar(total=len(todo), disable=not progress, unit="cell", desc="benchmark")
    for system, spec, seed in todo:
        task = loaded[(spec.key, system.modality.config.model_dump_json())]
        details[spec.key] = {"split": task.protocol, "evaluated_on": spec.evaluated_on, "metric": spec.metric,
                             "files": task.files, "skipped": len(task.skipped), "skipped_examples": task.skipped[:5],
                             "duplicates_removed": task.duplicates_removed, "tasks": len(task.label_names)}
        path = out / "cells" / slug(system.name) / slug(spec.key) / f"seed-{seed}.json"
        bar.set_postfix_str(f"{spec.key} | {system.name} | seed {seed}")
        if path.is_file():
            cell = json.loads(path.read_text())
        else:
            model_dir = path.with_suffix("")
            cell = {"system": system.name, **system.run(task, seed, model_dir)}
            if is_finetuned(model_dir):
                cell["model_dir"] = str(model_dir.relative_to(out))
                cell["model_bytes"] = folder_bytes(model_dir)
            make_dir(path.parent)
            write_json(path, cell)
        cells.append(cell)
        bar.update(1)
    bar.close()
    return {"cells": cells, "missing": missing, "tasks": details, "wall_time_s": round(time.perf_counter() - started, 1),
            "systems": {s.name: s.description for s in systems}, "seeds": seeds,
            "task_order": [spec.key for spec in specs]}


def aggregate(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (system, task): mean and std over seeds of every test metric."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for cell in results["cells"]:
        groups.setdefault((cell["system"], cell["task"]), []).append(cell)
    rows = []
    for (system, task), cells in groups.items():
        row = {"system": system, "task": task, "metric": cells[0]["metric"], "seeds": len(cells),
               **{k: cells[0][k] for k in ("split", "n_train", "n_valid", "n_test", "skipped", "truncated")}}
        for name in cells[0]["test"]:
            values = np.array([c["test"][name] for c in cells], dtype=float)
            finite = values[~np.isnan(values)]
            row[f"{name}_mean"] = float(finite.mean()) if finite.size else float("nan")
            row[f"{name}_std"] = float(finite.std()) if finite.size else float("nan")
            row[f"{name}_values"] = values.tolist()
        row["higher_is_better"] = METRICS[row["metric"]].higher_is_better
        rows.append(row)
    return rows


def run_benchmark(systems: list[System], task_keys: list[str], seeds: list[int], out: Path, title: str,
                  data_dir: Path | None = None, settings: dict[str, Any] | None = None,
                  progress: bool = True, missing_ok: bool = True) -> Path:
    """Run every cell and write ``<out>/results.{md,csv,json}`` (+ ``results.png``); returns the .md path.
    With ``progress``, a bar counts cells and another, under it, the epochs and steps inside the cell.
    ``missing_ok``: a task whose files are found nowhere is listed as not run (else it fails)."""
    make_dir(out)
    with inner_progress(progress):
        results = run_cells(systems, task_keys, seeds, out, data_dir, progress, missing_ok)
    return write_report(out, title, aggregate(results), results, settings or {})
