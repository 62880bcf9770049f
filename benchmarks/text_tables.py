"""Issue 38's committed tables from the ``bench/`` folder of ``benchmarks/text_gpu.py`` (its results.tar.gz).

    python benchmarks/text_tables.py BENCH_DIR --out OUT_DIR

GLUE: each task at the learning rate text_gpu.py chose for it on the validation split (``chosen_lr.json``): the
main row, its untrained twin and the references from ``glue-lr<rate>``, the other rows from ``glue-rows-lr<rate>``,
written by polymask's benchmark report writer to ``OUT_DIR/glue/``, with ``lr-search.md`` (the search),
``bert-mini-gap.md`` (against BERT-Mini's published scores), ``welch-vs-scratch.md`` (every row against no
pretraining) and ``objectives.md`` (the corpus objectives against MLM at 15%). SQuAD: the unit of the learning
rate where the main row's mean validation F1 is best, to ``OUT_DIR/squad/`` with its ``lr-search.md`` and
``welch-vs-scratch.md`` (test F1 and exact match). Cells are read from the cell files, so a unit a deadline
stopped before its results.json still counts with the cells it finished (their seed counts are listed).
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from text_gpu import GLUE_TASKS, LEARNING_RATES, MAIN, best_rate, chosen_rates
from welch_table import welch_table

import numpy as np

from polymask.benchmarking.pretraining_report import BASELINE, pretraining_sections
from polymask.benchmarking.report import ARROW, _cell, write_report
from polymask.benchmarking.runner import aggregate
from polymask.jsonio import make_dir, number, write_text
from polymask.tasks.metrics.significance import welch_verdict

SEARCHED = [MAIN, BASELINE]  # the rows run at every learning rate
SQUAD = "squad/v1"
# BERT-Mini (4 layers, hidden 256), GLUE test-server scores (0-100): Turc et al. 2019, "Well-Read Students Learn
# Better: On the Importance of Pre-training Compact Models" (arXiv:1908.08962), as listed in google-research/bert's
# README. MRPC: F1 (of F1/accuracy), STS-B: Pearson (of Pearson/Spearman). WNLI is not reported there.
BERT_MINI = {"cola": ("mcc", 0.0), "sst2": ("accuracy", 85.9), "mrpc": ("f1", 81.1), "stsb": ("pearson", 75.4),
             "rte": ("accuracy", 57.9)}


def load_unit(folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(results in ``run_cells``' form, settings) of one benchmark folder, its cells read from the cell files;
    descriptions, task details and settings come from its ``results*.json`` (a folder that more than one invocation
    filled, e.g. on a GPU and then on a CPU, keeps each one's as ``results.<where>.json``; their systems and tokens
    are joined, settings come from ``results.json``; empty when there is none).
    ``wall_time_s`` is 0: the report states the wall time of cells run in its invocation, and this one runs none."""
    reports = [json.loads(path.read_text()) for path in sorted(folder.glob("results*.json"))]
    saved = json.loads((folder / "results.json").read_text()) if (folder / "results.json").is_file() else {}
    cells = sorted((json.loads(path.read_text()) for path in folder.glob("cells/*/*/seed-*.json")),
                   key=lambda cell: cell["seed"])
    for cell in cells:  # an undefined score (null) as NaN, as aggregate reads it (welch_table needs numbers)
        cell["valid"], cell["test"] = ({k: number(v) for k, v in cell[part].items()} for part in ("valid", "test"))
    systems = {name: text for report in reports for name, text in report.get("systems", {}).items()}
    for cell in cells:
        systems.setdefault(cell["system"], f"(no description: {folder.name} has no results.json)")
    tasks = list(dict.fromkeys([task for report in reports for task in report.get("task_order", [])] +
                               [cell["task"] for cell in cells]))
    tokens = {name: count for report in reports for name, count in report.get("pretraining_tokens", {}).items()}
    results = {"cells": cells, "missing": saved.get("missing", {}),
               "tasks": {name: task for report in reports for name, task in report.get("tasks", {}).items()},
               "wall_time_s": 0.0, "systems": systems, "seeds": sorted({*saved.get("seeds", []),
                                                                        *(cell["seed"] for cell in cells)}),
               "pretraining_tokens": tokens, "task_order": tasks}
    return results, saved.get("settings", {})


def combine(parts: list[tuple[dict[str, Any], list[str]]], task_order: list[str]) -> dict[str, Any]:
    """One results dict holding, of each (results, tasks) part, the cells of those tasks."""
    merged: dict[str, Any] = {"cells": [], "missing": {}, "tasks": {}, "wall_time_s": 0.0, "systems": {},
                              "seeds": set(), "pretraining_tokens": {}, "task_order": task_order}
    for results, tasks in parts:
        cells = [cell for cell in results["cells"] if cell["task"] in tasks]
        merged["cells"] += cells
        merged["systems"].update({s: d for s, d in results["systems"].items() if any(c["system"] == s for c in cells)})
        merged["missing"].update({t: why for t, why in results["missing"].items() if t in tasks})
        merged["tasks"].update({t: detail for t, detail in results["tasks"].items() if t in tasks})
        merged["pretraining_tokens"].update(results["pretraining_tokens"])
        merged["seeds"] |= set(results["seeds"])
    merged["seeds"] = sorted(merged["seeds"])
    return merged


def only(results: dict[str, Any], systems: list[str], metric: str | None = None) -> dict[str, Any]:
    """``results`` restricted to ``systems`` (with ``metric``, that metric as every cell's headline one)."""
    cells = [{**c, "metric": metric or c["metric"]} for c in results["cells"] if c["system"] in systems]
    return {**results, "systems": [s for s in results["systems"] if s in systems], "cells": cells}


def write_tables(out: Path, title: str, results: dict[str, Any], settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The benchmark report of ``results`` under ``out``, as ``run_benchmark`` writes it, plus the rows a deadline
    left short of seeds; returns the test rows."""
    make_dir(out)
    rows, seeds = aggregate(results), results["seeds"]
    short = [f"- {r['system']}, {r['task']}: {r['seeds']} of {len(seeds)} seeds"
             for r in rows if r["seeds"] < len(seeds)]
    sections = pretraining_sections(rows, results, out)
    if short:
        sections += ["", "## Unfinished rows", "", "Scores over fewer seeds (cells a deadline left unrun):", ""] + short
    write_report(out, title, rows, results, settings, aggregate(results, "valid"), sections)
    return rows


def lr_search(valid: dict[str, list[dict[str, Any]]], tasks: list[str], chosen: dict[str, str]) -> str:
    """Markdown: per task and learning rate, the searched rows' validation mean ± std; the chosen rate in bold."""
    by_key = {(lr, r["system"], r["task"]): r for lr, rows in valid.items() for r in rows}
    lines = ["# Learning-rate search on the validation split", "",
             f"Per task, the learning rate where {MAIN}'s mean validation score (over seeds) is best was chosen "
             f"(in bold); every row of that task is reported at it. Mean ± std over seeds.", "",
             "| task | metric | learning rate | " + " | ".join(SEARCHED) + " |",
             "|---|---|---|" + "---|" * len(SEARCHED)]
    for task in tasks:
        for lr in valid:
            present = [by_key.get((lr, system, task)) for system in SEARCHED]
            first = next((r for r in present if r), None)
            if first is None:
                continue
            shown = f"**{lr} (chosen)**" if chosen.get(task) == lr else lr
            cells = [f"{_cell(r, first['metric'])} ({r['seeds']} seed{'s' * (r['seeds'] != 1)})" if r else "–"
                     for r in present]
            lines.append(f"| {task.split('/')[-1]} | {first['metric']} {ARROW[first['higher_is_better']]} | {shown} | "
                         + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def bert_mini_gap(rows: list[dict[str, Any]]) -> tuple[str, float | None]:
    """Markdown: the main row's test mean (x100) beside BERT-Mini's published score per task, and the mean gap."""
    ours = {r["task"].split("/")[-1]: r for r in rows if r["system"] == MAIN}
    lines = ["# text-corpus-mlm15 against BERT-Mini", "",
             "BERT-Mini (4 layers, hidden 256; Turc et al. 2019, \"Well-Read Students Learn Better\", "
             "arXiv:1908.08962, scores as in google-research/bert's README) is scored on the GLUE test sets by the GLUE "
             "server; ours are on the GLUE dev sets (GLUE test labels are hidden), so the gap compares different "
             "evaluation sets. BERT-Mini's scores are on a 0-100 scale (accuracy and MRPC's F1 in %, STS-B's Pearson "
             "and CoLA's MCC x100); ours are converted x100. WNLI is not reported for BERT-Mini.", "",
             f"| task | metric | {MAIN}, GLUE dev (x100) | seeds | BERT-Mini, GLUE test | gap (points) |",
             "|---|---|---:|---:|---:|---:|"]
    gaps = []
    for task in GLUE_TASKS:
        row = ours.get(task)
        if row is None:
            continue
        mean, std = 100 * row[f"{row['metric']}_mean"], 100 * row[f"{row['metric']}_std"]
        published = BERT_MINI.get(task)
        if published and published[0] == row["metric"] and not math.isnan(mean):
            gaps.append(mean - published[1])
            reference, gap = f"{published[1]:.1f}", f"{gaps[-1]:+.1f}"
        else:
            reference, gap = "n/a", "n/a"
        lines.append(f"| {task} | {row['metric']} | {mean:.1f} ± {std:.1f} | {row['seeds']} | {reference} | {gap} |")
    mean_gap = sum(gaps) / len(gaps) if gaps else None
    if mean_gap is not None:
        lines += ["", f"Mean gap over the {len(gaps)} tasks with both scores: {mean_gap:+.1f} points."]
    return "\n".join(lines) + "\n", mean_gap


def glue_scores(results: dict[str, Any]) -> str:
    """Markdown: per row, the GLUE score (mean of the tasks' headline metrics) of each seed on test and validation,
    mean ± std, Welch's t-test against no pretraining, and the per-seed scores against the TF-IDF row's."""
    lines = ["# GLUE score per seed", "",
             "The GLUE score of one fine-tuning seed is the mean of the tasks' headline metrics (MCC, accuracy, F1, "
             "Pearson) for that seed; a row without every task for a seed has no score for it. Welch's t-test "
             f"against {BASELINE} (p < 0.05: beyond seed noise); the TF-IDF row is deterministic, so each seed is "
             "compared with its one score.", ""]
    for split in ("test", "valid"):
        per_seed: dict[str, dict[int, list[float]]] = {}
        for cell in results["cells"]:
            per_seed.setdefault(cell["system"], {}).setdefault(cell["seed"], []).append(cell[split][cell["metric"]])
        tasks = len(results["task_order"])
        scores = {system: [sum(v) / tasks for _, v in sorted(seeds.items()) if len(v) == tasks]
                  for system, seeds in per_seed.items()}
        tfidf = next((v for s, v in scores.items() if s.startswith("TF-IDF")), [])
        lines += [f"{split} split", "", f"| system | per seed | mean ± std | vs {BASELINE} | vs TF-IDF |",
                  "|---|---|---|---|---|"]
        for system, values in scores.items():
            if not values or math.isnan(sum(values)):
                continue
            verdict, p_value = welch_verdict(values, scores.get(BASELINE, []), True)
            versus = f"{verdict}, p = {p_value:.3f}" if system != BASELINE and not math.isnan(p_value) else (
                "" if system == BASELINE else verdict)
            above = (f"{sum(v > tfidf[0] for v in values)} of {len(values)} seeds above {tfidf[0]:.3f}"
                     if tfidf and not system.startswith("TF-IDF") else "")
            lines.append(f"| {system} | {', '.join(f'{v:.3f}' for v in values)} | "
                         f"{np.mean(values):.3f} ± {np.std(values):.3f} | {versus} | {above} |")
        lines.append("")
    return "\n".join(lines)


def pretraining(runs: Path) -> str:
    """Markdown: one row per pretraining run (its summary.json): steps, tokens, time, throughput, memory, accuracy."""
    lines = ["# Pretraining runs", "",
             "| run | objective | steps | tokens | epochs | training s | tokens/s | peak RSS MiB (settled -> last) | "
             "val masked accuracy | unigram accuracy | effective rank | collapsed |",
             "|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|"]
    for path in sorted(runs.glob("*/summary.json")):
        run = json.loads(path.read_text())
        memory = run.get("memory") or {}
        lines.append(f"| {path.parent.name} | {run['objective']} | {run['steps']:,} | {run['tokens']:,} | "
                     f"{run['epochs']:.2f} | {run['train_time_s']:.0f} | {run['tokens_per_s']:,.0f} | "
                     f"{memory.get('peak_rss_mb', float('nan')):,.0f} ({memory.get('rss_mb_settled', float('nan')):,.0f}"
                     f" -> {memory.get('rss_mb_last', float('nan')):,.0f}) | {run['final_val_accuracy']:.3f} | "
                     f"{run['unigram_accuracy']:.3f} | {run['final_val_rank']} | {run['collapsed']} |")
    return "\n".join(lines) + "\n"


def glue(bench: Path, out: Path) -> str:
    """Write OUT/glue/; returns a summary line."""
    units = {f"glue-lr{lr}": load_unit(bench / f"glue-lr{lr}") for lr in LEARNING_RATES}
    for lr in LEARNING_RATES:  # the other rows' folders: glue-rows-lr<rate>, and any glue-rows-lr<rate>-<part>
        folders = sorted(bench.glob(f"glue-rows-lr{lr}")) + sorted(bench.glob(f"glue-rows-lr{lr}-*"))
        loaded = [load_unit(folder)[0] for folder in folders]
        units[f"glue-rows-lr{lr}"] = (combine([(r, r["task_order"]) for r in loaded], []), {})
    keys = [f"glue/{task}" for task in GLUE_TASKS]
    valid = {lr: aggregate(units[f"glue-lr{lr}"][0], "valid") for lr in LEARNING_RATES}
    chosen_file = bench / "chosen_lr.json"
    # chosen_lr.json is absent when the GLUE units did not both finish: then the same rule on their finished cells
    rates = json.loads(chosen_file.read_text()) if chosen_file.is_file() else chosen_rates(bench, MAIN)
    parts = [(units[f"{unit}{rates[task]}"][0], [f"glue/{task}"])
             for task in rates for unit in ("glue-lr", "glue-rows-lr")]
    results = combine(parts, [key for key in keys if key.split("/")[1] in rates])
    settings = next((s for lr in LEARNING_RATES if (s := units[f"glue-lr{lr}"][1])), {})
    settings = {**settings, "learning rate": f"chosen per task on the validation split, where {MAIN}'s mean validation "
                f"score is best among {', '.join(LEARNING_RATES)} (lr-search.md); every row of a task is fine-tuned at "
                f"its rate: {json.dumps(rates)}", "cells": "read from the cell files of "
                + ", ".join(sorted(p.name for p in bench.glob("glue-*lr*") if p.is_dir())) + "; none run by this report"}
    if "fine-tuning" in settings:
        settings["fine-tuning"] = {**settings["fine-tuning"], "lr": "per task (learning rate)"}
    rows = write_tables(out / "glue", "GLUE: text encoders pretrained on the text corpus (issue 38)", results, settings)
    write_text(out / "glue" / "lr-search.md", lr_search(valid, keys, {f"glue/{t}": lr for t, lr in rates.items()}))
    write_text(out / "glue" / "glue-score.md", glue_scores(results))
    gap_text, mean_gap = bert_mini_gap(rows)
    write_text(out / "glue" / "bert-mini-gap.md", gap_text)
    objectives = [s for s in results["systems"] if "text-corpus-" in s and "-10pct" not in s and "-30pct" not in s]
    for name, heading, table, baseline in (
            ("welch-vs-scratch.md", f"Every row against {BASELINE}", results, BASELINE),
            ("objectives.md", f"Pretraining objectives on the text corpus against {MAIN}", only(results, objectives),
             MAIN)):
        text = "\n\n".join(welch_table(table, baseline, split) for split in ("test", "valid"))
        write_text(out / "glue" / name, f"# {heading} (Welch's t-test on per-seed means)\n\n{text}\n")
    short = sum(r["seeds"] < len(results["seeds"]) for r in rows)
    gap = "n/a" if mean_gap is None else f"{mean_gap:+.1f}"
    return (f"GLUE: {len(results['systems'])} rows x {len(results['task_order'])} tasks, learning rates {rates}; "
            f"{short} row/task pairs short of seeds; {MAIN} - BERT-Mini: {gap} points (mean)")


def squad(bench: Path, out: Path) -> str:
    """Write OUT/squad/; returns a summary line."""
    units = {lr: load_unit(bench / f"squad-lr{lr}") for lr in LEARNING_RATES}
    valid = {lr: aggregate(results, "valid") for lr, (results, _) in units.items()}
    lr = best_rate(valid, MAIN, SQUAD)
    if lr is None:
        return "SQuAD: no validation score of the main row; nothing written"
    results, settings = units[lr]
    settings = {**settings, "learning rate": f"{lr}, where {MAIN}'s mean validation F1 is best among "
                f"{', '.join(LEARNING_RATES)} (lr-search.md)", "cells": f"read from the cell files of squad-lr{lr}"}
    write_tables(out / "squad", "SQuAD v1.1: text-corpus-mlm15 against no pretraining (issue 38)", results, settings)
    write_text(out / "squad" / "lr-search.md", lr_search(valid, [SQUAD], {SQUAD: lr}))
    tables = [f"## {metric}\n\n" + welch_table(only(results, SEARCHED, metric), BASELINE, "test")
              for metric in ("squad_f1", "exact_match")]
    write_text(out / "squad" / "welch-vs-scratch.md", f"# {MAIN} against {BASELINE} on SQuAD (Welch's t-test)\n\n"
               + "\n\n".join(tables) + "\n")
    return f"SQuAD: learning rate {lr}; test F1 and exact match against {BASELINE} in squad/welch-vs-scratch.md"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bench", type=Path, help="text_gpu.py's bench/ folder")
    parser.add_argument("--out", type=Path, required=True, help="the folder of the tables")
    parser.add_argument("--runs", type=Path, help="text_gpu.py's runs/ folder (pretraining summaries)")
    args = parser.parse_args()
    if args.runs:
        write_text(make_dir(args.out) / "pretraining.md", pretraining(args.runs))
    print(glue(args.bench, args.out))
    print(squad(args.bench, args.out))
    print(f"written: {', '.join(sorted(str(p.relative_to(args.out)) for p in args.out.rglob('*') if p.is_file()))}")


if __name__ == "__main__":
    main()
