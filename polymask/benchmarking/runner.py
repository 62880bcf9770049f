"""Run systems x tasks x seeds, cache every finished cell, and aggregate into tables and a chart.

Each (system, task, seed) result is a JSON file under ``<out>/cells/``, and the fine-tuned model it
chose on the validation split a folder next to it (``seed-N.json``, ``seed-N/``, which a rerun of the cell
replaces); a rerun skips finished cells, so an interrupted benchmark resumes where it stopped. Two rows of one
name, or two different tasks of one key, would share cells, so they are refused. Each cell keeps its identity (the encoder's weights,
the fine-tuning settings, a hash of the task's data): a finished cell that would now be run otherwise is an
error naming what changed, never a stale score in a new table. A cell runs under a lock beside its file
(``seed-N.lock``, removed when the cell ends): a second process on the same folder skips the cells
the first is running, runs the rest, then waits for those and reads their results. The report is written as Markdown,
CSV and JSON (mean ± std over seeds), plus a PNG with one panel per task.
"""
from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from polymask.benchmarking.identity import data_identity, reused_cell
from polymask.benchmarking.pretraining_report import pretraining_sections
from polymask.benchmarking.report import AVERAGED, write_report
from polymask.benchmarking.systems import System
from polymask.checkpoints.finetuned import folder_bytes, is_finetuned
from polymask.errors import ConfigError, RunBusy, TaskFileMissing
from polymask.finetune_config import FinetuneConfig
from polymask.jsonio import dumps, make_dir, write_json
from polymask.locks import acquire
from polymask.runtime import inner_progress, progress_bar
from polymask.tasks.data.spec import TaskSpec, as_task_spec
from polymask.tasks.metrics.scoring import METRICS
from polymask.tracking import TrackedRun


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
            if not system.modality.reads_tasks_of(spec.modality):
                raise ConfigError(f"{spec.key} is a {spec.modality} task and {system.name} reads "
                                  f"{system.modality.config.name} records: fine-tune a {spec.modality} checkpoint "
                                  f"on it (polymask models lists the built-in ones)")
            key = (spec.key, system.modality.config.model_dump_json())
            if key in loaded or spec.key in missing:
                continue
            try:
                loaded[key] = spec.task_kind.load(spec, system.modality, data_dir)
            except TaskFileMissing as exc:
                if not missing_ok:
                    raise
                missing[spec.key] = str(exc)
    return loaded, missing


def cell_path(out: Path, system: System, spec: TaskSpec, seed: int) -> Path:
    """Where the (system, task, seed) cell's result is kept; its fine-tuned model is the folder beside it."""
    return out / "cells" / slug(system.name) / slug(spec.key) / f"seed-{seed}.json"


def cell_identity(system: System, task: Any, data: dict[str, Any]) -> dict[str, Any]:
    """What a cell must have been run with to be reused: the system's identity for the task, and the data's."""
    return json.loads(dumps({"system": system.identity(task.spec.name), "data": data}, default=str))


def _reused(path: Path, system: System, identity: dict[str, Any]) -> dict[str, Any]:
    """A finished cell run as this one would be (``reused_cell``), under its row's name now: the name it was run
    under may differ in what its folder's name drops (case, punctuation: a run folder renamed since), and a table
    finds a row's cells by its name."""
    return {**reused_cell(path, identity), "system": system.name}


def _finished_cell(path: Path, system: System, task: Any, data: dict[str, Any]) -> dict[str, Any] | None:
    """The cell's result if it is finished (and was run the same way), else None; never runs it."""
    return _reused(path, system, cell_identity(system, task, data)) if path.is_file() else None


def _cell(system: System, task: Any, seed: int, out: Path, path: Path, wait: bool,
          data: dict[str, Any]) -> dict[str, Any] | None:
    """The cell's result: read when finished (and run the same way: the system's identity for the task and the
    ``data`` identity), else run under the cell's lock (so two benchmark processes on one folder share the cells).
    ``None`` when another process holds the lock and ``wait`` is off."""
    identity = cell_identity(system, task, data)
    if path.is_file():
        return _reused(path, system, identity)
    make_dir(path.parent)
    lock_path = path.with_suffix(".lock")
    try:
        lock = acquire(lock_path, lambda owner: f"cell {path} is run by {owner}", wait=wait)
    except RunBusy:
        return None
    with lock:
        try:
            if path.is_file():  # finished by the process that held the lock
                return _reused(path, system, identity)
            model_dir = path.with_suffix("")
            if model_dir.exists():  # a model left by an earlier run of this cell is not this run's
                shutil.rmtree(model_dir)
            tracked = TrackedRun(out, f"{system.name}/{task.spec.key}/seed-{seed}",
                                 model_dir.relative_to(out / "cells"))  # events: tensorboard/<system>/<task>/seed-N
            cell = {"system": system.name, **system.run(task, seed, model_dir, tracked), "identity": identity}
            if is_finetuned(model_dir):
                cell["model_dir"] = str(model_dir.relative_to(out))
                cell["model_bytes"] = folder_bytes(model_dir)
            write_json(path, cell)
        finally:  # no lock file left behind; a process still waiting on it checks for the result first
            lock_path.unlink(missing_ok=True)
    return cell


def with_averaged_rows(cells: list[dict[str, Any]], systems: dict[str, str]) -> tuple[list[dict[str, Any]],
                                                                                      dict[str, str]]:
    """``cells`` plus, for each that fine-tuning also scored with ``test_time_average``, a cell of the row
    '<system> + test-time average': the same model's scores averaged over each example's variants (on a task
    whose examples have none, where the row has other tasks, the plain scores, marked ``no_variants``);
    ``systems`` (name: description) with those rows after their own."""
    shared = ("model_dir", "model_bytes", "averaged")  # the plain row's cell lists its model, counts its time

    def twin(cell: dict[str, Any], **scores: Any) -> dict[str, Any]:
        kept = {key: value for key, value in cell.items() if key not in shared}
        return {**kept, "system": cell["system"] + AVERAGED, "time_s": 0.0, **scores}

    rows = {cell["system"] + AVERAGED: cell["averaged"] for cell in cells if "averaged" in cell}
    # test_time_average holds for a whole run, so a row averaged on some task was averaged on every task; one whose
    # examples have no variants (a promoter: no invariance) it scores exactly as without, marked so, and the row's
    # mean covers every task
    averaged = [twin(cell, valid=cell["averaged"]["valid"], test=cell["averaged"]["test"]) if "averaged" in cell
                else twin(cell, no_variants=True)
                for cell in cells if cell["system"] + AVERAGED in rows]
    described: dict[str, str] = {}
    for name, text in systems.items():
        described[name] = text
        if name + AVERAGED in rows:
            how = rows[name + AVERAGED]
            described[name + AVERAGED] = (f"the models of {name}, each validation and test example scored by the mean "
                                          f"prediction over its variants that keep the label ({', '.join(how['over'])}; "
                                          f"{how['variants_per_example']:.1f} per example)")
    return cells + averaged, described


def require_distinct_rows(systems: list[System]) -> None:
    """Refuse two rows whose cells would share a folder (the same --checkpoint twice, or two folders of one name)."""
    seen: dict[str, System] = {}
    for system in systems:
        other = seen.setdefault(slug(system.name), system)
        if other is not system:
            raise ConfigError(f"two rows named '{system.name}' would share their cells: {other.description} and "
                              f"{system.description}; give each checkpoint once, and rename one of two folders that "
                              f"share a name")


def distinct_tasks(specs: list[TaskSpec]) -> list[TaskSpec]:
    """``specs`` with a task given twice kept once; two different tasks whose cells would share a folder (one key,
    e.g. a task YAML named as a built-in task, or keys that differ only in case or punctuation) are refused."""
    seen: dict[str, TaskSpec] = {}
    for spec in specs:
        other = seen.setdefault(slug(spec.key), spec)
        if other != spec:
            raise ConfigError(f"two different tasks would share their cells: {other.key} (files "
                              f"{', '.join(other.files.values())}) and {spec.key} (files "
                              f"{', '.join(spec.files.values())}); give one another name or benchmark in its YAML")
    return list(seen.values())


def run_cells(systems: list[System], tasks: Sequence[str | TaskSpec], seeds: list[int], out: Path,
              data_dir: Path | None = None, progress: bool = True, missing_ok: bool = True,
              finished_only: bool = False) -> dict[str, Any]:
    """Run (or reuse) every cell of ``tasks`` (keys, or in-memory specs such as a user's own table's); returns
    {"cells": [...], "missing": {task: reason}, "tasks": {...}, "cells_total": n, "unfinished": [...], ...}.
    ``finished_only``: run no cell; those not finished yet are listed under "unfinished" ({system, task, seed})."""
    require_distinct_rows(systems)
    started = time.perf_counter()
    specs = distinct_tasks([as_task_spec(task) for task in tasks])
    loaded, missing = _load_tasks(specs, systems, data_dir, missing_ok)
    details: dict[str, Any] = {}
    todo = [(s, spec, seed) for spec in specs if spec.key not in missing for s in systems for seed in seeds]
    bar = progress_bar(total=len(todo), disable=not progress, unit="cell", desc="benchmark")
    done: dict[int, dict[str, Any]] = {}
    identities: dict[int, dict[str, Any]] = {}  # the data identity of each loaded task, hashed once
    busy, unfinished = [], []
    for index, (system, spec, seed) in enumerate(todo):
        task = loaded[(spec.key, system.modality.config.model_dump_json())]
        details[spec.key] = {"split": task.protocol, "evaluated_on": spec.evaluated_on, "metric": spec.metric,
                             "files": task.files, "skipped": len(task.skipped), "skipped_examples": task.skipped[:5],
                             "duplicates_removed": task.duplicates_removed, "tasks": len(task.label_names)}
        bar.set_postfix_str(f"{spec.key} | {system.name} | seed {seed}")
        if id(task) not in identities:
            identities[id(task)] = data_identity(task)
        path = cell_path(out, system, spec, seed)
        if finished_only:
            if (finished := _finished_cell(path, system, task, identities[id(task)])) is None:
                unfinished.append({"system": system.name, "task": spec.key, "seed": seed})
            else:
                done[index] = finished
            bar.update(1)
            continue
        cell = _cell(system, task, seed, out, path, False, identities[id(task)])
        if cell is None:
            busy.append((index, task))
            continue
        done[index] = cell
        bar.update(1)
    for index, task in busy:  # cells another process was running: wait for it, then read its result
        system, spec, seed = todo[index]
        bar.set_postfix_str(f"{spec.key} | {system.name} | seed {seed} (another process)")
        done[index] = _cell(system, task, seed, out, cell_path(out, system, spec, seed), True, identities[id(task)])
        bar.update(1)
    bar.close()
    cells, descriptions = with_averaged_rows([done[index] for index in sorted(done)],
                                             {s.name: s.description for s in systems})
    return {"cells": cells, "missing": missing, "tasks": details, "cells_total": len(todo), "unfinished": unfinished,
            "wall_time_s": round(time.perf_counter() - started, 1),
            "systems": descriptions, "seeds": seeds,
            "pretraining_tokens": {name: tokens for s in systems if (tokens := s.pretraining_tokens) is not None
                                   for name in (s.name, s.name + AVERAGED) if name in descriptions},
            "task_order": [spec.key for spec in specs]}


def aggregate(results: dict[str, Any], part: str = "test") -> list[dict[str, Any]]:
    """One row per (system, task): mean and std over seeds of every metric of ``part`` (test or valid)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for cell in results["cells"]:
        groups.setdefault((cell["system"], cell["task"]), []).append(cell)
    rows = []
    for (system, task), cells in groups.items():
        row = {"system": system, "task": task, "metric": cells[0]["metric"], "seeds": len(cells),
               "no_variants": all(cell.get("no_variants", False) for cell in cells),
               **{k: cells[0][k] for k in ("split", "n_train", "n_valid", "n_test", "skipped", "truncated")}}
        for name in cells[0][part]:
            values = np.array([c[part].get(name, float("nan")) for c in cells], dtype=float)
            finite = values[~np.isnan(values)]
            row[f"{name}_mean"] = float(finite.mean()) if finite.size else float("nan")
            row[f"{name}_std"] = float(finite.std()) if finite.size else float("nan")
            row[f"{name}_values"] = values.tolist()
        row["higher_is_better"] = METRICS[row["metric"]].higher_is_better
        rows.append(row)
    return rows


def report_settings(config: FinetuneConfig, data: str) -> dict[str, Any]:
    """What a fine-tuning report lists under its settings: the caps, every fine-tuning field, where the data is."""
    caps = {name: getattr(config, name) for name in ("epochs", "max_train_examples", "max_valid_examples",
                                                     "max_test_examples", "max_len")}
    return {"caps": ", ".join(f"{name} = {value}" for name, value in caps.items()), "fine-tuning": config.model_dump(),
            "data": data}


def run_benchmark(systems: list[System], tasks: Sequence[str | TaskSpec], seeds: list[int], out: Path, title: str,
                  data_dir: Path | None = None, settings: dict[str, Any] | None = None,
                  progress: bool = True, missing_ok: bool = True, finished_only: bool = False) -> Path:
    """Run every cell of ``tasks`` (keys or specs) and write ``<out>/results.{md,csv,json}`` (+ ``results.png``);
    returns the .md path.
    With ``progress``, a bar counts cells and another, under it, the epochs and steps inside the cell.
    ``missing_ok``: a task whose files are found nowhere is listed as not run (else it fails).
    ``finished_only``: run no cell; report the finished ones and list the rest (a benchmark spanning sessions)."""
    if finished_only and not (out / "cells").is_dir():
        raise ConfigError(f"{out} holds no benchmark cells (no {out / 'cells'}): nothing to report; check --out")
    make_dir(out)
    with inner_progress(progress):
        results = run_cells(systems, tasks, seeds, out, data_dir, progress, missing_ok, finished_only)
    rows = aggregate(results)
    return write_report(out, title, rows, results, settings or {}, aggregate(results, "valid"),
                        pretraining_sections(rows, results, out))
