"""The ``polymask compare`` report: pretraining table and curves, benchmark tables with seed-noise
marks, the rank and semantics analyses; Markdown plus the CSV/JSON behind it."""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from polymask.benchmarking.report import average_groups, cell_seconds, duration, saved_models, seed_averages
from polymask.compare.budget import Budget
from polymask.jsonio import atomic_path, number, read_jsonl, write_json, write_text
from polymask.runtime import machine
from polymask.tasks.metrics.scoring import METRICS
from polymask.tasks.metrics.significance import NOISE_P, welch_verdict


def row_label(run: dict[str, Any]) -> str:
    """The report row of a pretraining run: its variant's label (an objective's name for its defaults)."""
    return run.get("variant") or run["objective"]


def _objective_scores(results: dict[str, Any], runs: list[dict[str, Any]],
                      split: str = "test") -> dict[tuple[str, str], list[float]]:
    """(objective, task) -> one ``split`` score per pretraining seed (mean over fine-tuning seeds), or the
    fine-tuning seeds' scores when there is a single pretraining seed."""
    objective_of = {f"{Path(r['run_dir']).name} ({r['objective']})": row_label(r) for r in runs}
    per_run: dict[tuple[str, str, str], list[float]] = {}
    for cell in results["cells"]:
        objective = objective_of.get(cell["system"], cell["system"])
        per_run.setdefault((objective, cell["task"], cell["system"]), []).append(number(cell[split][cell["metric"]]))
    grouped: dict[tuple[str, str], list[list[float]]] = {}
    for (objective, task, _), values in per_run.items():
        grouped.setdefault((objective, task), []).append(values)
    return {key: [float(np.mean(v)) for v in groups] if len(groups) > 1 else groups[0]
            for key, groups in grouped.items()}


def _task_averages(scores: dict[tuple[str, str], list[float]],
                   groups: dict[str, list[str]]) -> dict[tuple[str, str], list[float]]:
    """Per pseudo-task and objective: per seed, the average over its tasks, so its spread and verdict are
    over seeds like a task's."""
    averages = {}
    for name, tasks in groups.items():
        for objective in dict.fromkeys(o for o, _ in scores):
            if all((objective, t) in scores for t in tasks):
                per_seed = seed_averages([scores[(objective, t)] for t in tasks])
                if per_seed is not None:
                    averages[(objective, name)] = per_seed.tolist()
    return averages


COLLAPSED_VERDICT = "no verdict (collapsed pretraining)"
DIVERGED_VERDICT = "no verdict (diverged pretraining)"
NO_BASELINE_VERDICT = "n/a (no baseline score)"


def failed_objectives(runs: list[dict[str, Any]]) -> dict[str, str]:
    """Objectives with a pretraining run that diverged or ended collapsed (the trainer's collapse alarm), with the
    verdict every comparison involving them gets."""
    failed = {row_label(run): COLLAPSED_VERDICT for run in runs if run.get("collapsed")}
    return {**failed, **{row_label(run): DIVERGED_VERDICT for run in runs if run.get("diverged")}}


def benchmark_rows(benchmark: str, results: dict[str, Any], runs: list[dict[str, Any]],
                   baseline: str, split: str = "test") -> list[dict[str, Any]]:
    """Per (objective, task) and per task average on ``split`` (valid or test): mean, std and the verdict against
    ``baseline``; no verdict for a pair in which either pretraining run collapsed."""
    failed = failed_objectives(runs)
    metric_of = {cell["task"]: cell["metric"] for cell in results["cells"]}
    scores = _objective_scores(results, runs, split)
    groups = {f"mean/{name}": members for name, members in average_groups(metric_of).items()}
    scores.update(_task_averages(scores, groups))
    higher_of = {task: METRICS[metric].higher_is_better for task, metric in metric_of.items()}
    higher_of.update({name: higher_of[members[0]] for name, members in groups.items()})
    metric_of.update({name: name.split("/", 1)[1] for name in groups})
    rows = []
    for (objective, task), values in scores.items():
        if objective == baseline:
            verdict, p_value = "baseline", float("nan")
        elif objective in failed or baseline in failed:
            verdict, p_value = failed.get(objective) or failed[baseline], float("nan")
        elif (baseline, task) not in scores:
            verdict, p_value = NO_BASELINE_VERDICT, float("nan")
        else:
            verdict, p_value = welch_verdict(values, scores.get((baseline, task), []), higher_of[task])
        rows.append({"benchmark": benchmark, "split": split, "task": task, "metric": metric_of[task],
                     "objective": objective,
                     "mean": float(np.mean(values)), "std": float(np.std(values)), "n": len(values),
                     "vs_" + baseline: verdict, "p_value": p_value})
    return rows


def _plot_curves(runs: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.5, 4))
    for run in runs:
        lines = read_jsonl(Path(run["run_dir"]) / "metrics.jsonl")
        points = [(line["step"], line["val_loss"]) for line in lines if "val_loss" in line]
        if points:
            axis.plot(*zip(*points), marker="o", markersize=3, label=Path(run["run_dir"]).name)
    axis.set_xlabel("step")
    axis.set_ylabel("validation loss (objective's own)")
    axis.legend(fontsize=8)
    figure.tight_layout()
    with atomic_path(path) as tmp:
        figure.savefig(tmp, dpi=120)
    plt.close(figure)


def _column(task: str, metric: str) -> str:
    return f"mean ({metric})" if task.startswith("mean/") else f"{task.split('/')[-1]} ({metric})"


def _score_cell(row: dict[str, Any] | None, baseline: str) -> str:
    if row is None:
        return "–"
    if math.isnan(row["mean"]):
        return "n/a (undefined score)"
    return f"{row['mean']:.3f} ± {row['std']:.3f} ({row['vs_' + baseline]})"


def _optional(value: Any, spec: str) -> str:
    return "–" if value is None else ("yes" if value is True else "no" if value is False else format(value, spec))


def _failure_warning(runs: list[dict[str, Any]]) -> list[str]:
    failed = failed_objectives(runs)
    collapsed = sorted(name for name, verdict in failed.items() if verdict == COLLAPSED_VERDICT)
    diverged = sorted(name for name, verdict in failed.items() if verdict == DIVERGED_VERDICT)
    lines = []
    if collapsed:
        lines += ["", f"**Collapsed pretraining: {', '.join(collapsed)}.** The collapse alarm fired at the end of "
                  "pretraining (masked accuracy at the unigram level or a near-rank-1 encoder): such an encoder has "
                  "not learned from context, so this report calls no ordering involving it."]
    if diverged:
        lines += ["", f"**Diverged pretraining: {', '.join(diverged)}.** The loss went non-finite and the run "
                  "stopped at its last finite checkpoint, before its budget was spent: this report calls no ordering "
                  "involving it (a lower learning rate, `--set train.lr=...`, in another --out)."]
    return lines


def _steps(run: dict[str, Any]) -> str:
    """A run's steps, marked where a time budget ended on its step ceiling instead of the clock."""
    ceiling = (run.get("plan") or {}).get("max_steps")
    return f"{run['steps']} (step ceiling, not the clock)" if ceiling and run["steps"] >= ceiling else str(run["steps"])


def _load(plan: dict[str, Any]) -> str:
    """Threads and the machine's 1-minute load when the run started (what a time budget bought depends on them)."""
    return f"{plan['threads']} / {plan['load_at_start']:.2f}" if "load_at_start" in plan else "–"


def _threads(count: int) -> str:
    return f"{count} thread" + ("" if count == 1 else "s")


SPLIT_NAMES = {"valid": "Validation", "test": "Test"}


def _score_table(folder: Path, split: str, table: list[dict[str, Any]], results: dict[str, Any],
                 runs: list[dict[str, Any]], objectives: list[str], baseline: str) -> list[str]:
    """One split's scores per objective and task, with each verdict against ``baseline``."""
    tasks = list(dict.fromkeys(r["task"] for r in table))
    seeds = "pretraining" if len(runs) > len(objectives) else "fine-tuning"
    lines = [f"{SPLIT_NAMES[split]} scores per objective: mean ± std over {seeds} seeds; vs {baseline}: Welch's "
             f"t-test, 'within noise' when p >= {NOISE_P}; a mean column averages a metric's tasks per seed. Full "
             f"table with reference rows, and the {saved_models(results['cells'])} it saved: "
             f"[{folder.name}/results.md]({folder.name}/results.md).", "",
             "| objective | " + " | ".join(_column(t, next(r["metric"] for r in table if r["task"] == t))
                                          for t in tasks) + " |",
             "|---|" + "---|" * len(tasks)]
    for objective in dict.fromkeys(r["objective"] for r in table):
        cells = [_score_cell(next((r for r in table if r["objective"] == objective and r["task"] == task), None),
                             baseline) for task in tasks]
        lines.append(f"| {objective} | " + " | ".join(cells) + " |")
    return lines + [""]


def _verdicts(tables: dict[str, list[dict[str, Any]]], baseline: str, pretraining_seeds: int) -> list[str]:
    """One line per objective: its mean over the tasks against ``baseline``'s, on validation (where a choice is
    made) and on test, with Welch's p."""
    unit = ("pretraining seed" if pretraining_seeds > 1 else
            "fine-tuning seed of one pretraining run per objective: the test covers fine-tuning noise, not how "
            "another pretraining seed would differ")
    lines = [f"**Verdicts** (the mean over the tasks of each metric, per {unit}; validation decides):", ""]
    for objective in dict.fromkeys(r["objective"] for r in tables["test"]):
        if objective == baseline:
            continue
        parts = []
        for split, table in tables.items():
            for row in (r for r in table if r["objective"] == objective and r["task"].startswith("mean/")):
                base = next((r for r in table if r["objective"] == baseline and r["task"] == row["task"]), None)
                p_value = "" if math.isnan(row["p_value"]) else f", p = {row['p_value']:.3f}"
                against = f" vs {base['mean']:.3f}" if base else ""
                parts.append(f"{SPLIT_NAMES[split].lower()} {row['metric']} {row['mean']:.3f}{against}: "
                             f"{row['vs_' + baseline]}{p_value}")
        lines.append(f"- **{objective}** against {baseline}: " + "; ".join(parts))
    return lines


def _missing_tasks(results: dict[str, Any]) -> list[str]:
    """The tasks this benchmark could not run (files found nowhere), which no mean above includes."""
    missing = results.get("missing") or {}
    if not missing:
        return []
    return [f"**Not run, and in no mean above: {', '.join(sorted(missing))}** (their files were found nowhere; "
            "give `--data-dir` or set `$POLYMASK_DATA_DIR`; the reasons are in the benchmark's results.md).", ""]


def _objective_cell(run: dict[str, Any]) -> str:
    options = ", ".join(f"{key}={value}" for key, value in (run.get("variant_options") or {}).items())
    return f"{run['objective']} ({options})" if options else run["objective"]


def write_compare_report(out: Path, modality: str, budget: Budget, runs: list[dict[str, Any]],
                         benchmarks: dict[str, Path], analyses: dict[str, Any], wall_time: float) -> Path:
    objectives = list(dict.fromkeys(row_label(run) for run in runs))
    results = {name: json.loads((folder / "results.json").read_text()) for name, folder in benchmarks.items()}
    finetune_seconds = cell_seconds([cell for result in results.values() for cell in result["cells"]])
    baseline = "mlm" if "mlm" in objectives else objectives[0]
    _plot_curves(runs, out / "loss_curves.png")
    lines = [f"# polymask compare: {modality}, {', '.join(objectives)}", "",
             f"- Budget: {budget.describe()} (matched in {budget.kind}).",
             f"- Pretraining runs: {', '.join(Path(run['run_dir']).name for run in runs)}.",
             f"- Machine: {machine()['device']}, {_threads(machine()['threads'])} in this invocation. Compute: pretraining "
             f"{duration(sum(run['train_time_s'] for run in runs))}, benchmark cells {duration(finetune_seconds)} "
             f"(summed over runs and cells); this invocation {duration(wall_time)}, reusing finished pieces.",
             "- Fine-tuning: each benchmark's recipe without test-time averaging (compare ranks the encoders' own "
             "predictions; `polymask benchmark` reports averaged rows of their own).",
             *_failure_warning(runs),
             "", "## Pretraining", "",
             "| run | objective | steps | real tokens | train time (s) | device, precision | threads / load at start "
             "| tokens/s | final val loss | val accuracy at [MASK] | unigram accuracy | effective rank | collapsed |",
             "|---|---|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---|"]
    for run in runs:
        lines.append(f"| {Path(run['run_dir']).name} | {_objective_cell(run)} | {_steps(run)} | {run['tokens']:,} | "
                     f"{run['train_time_s']} | {run.get('device', '–')}, {run.get('precision', '–')} | "
                     f"{_load(run.get('plan') or {})} | {run['tokens_per_s']:,.0f} | "
                     f"{_optional(run.get('final_val_loss'), '.4f')} | "
                     f"{_optional(run.get('final_val_mask_accuracy', run.get('final_val_accuracy')), '.3f')} | {_optional(run.get('unigram_accuracy'), '.3f')} | "
                     f"{_optional(run.get('final_val_rank'), 'd')} | {_optional(run.get('collapsed'), '')} |")
    lines += ["", "Validation losses are each objective's own loss (MLM cross-entropy, MAE-LM's decoder "
              "cross-entropy, ExLM's DAG loss per target) and are not comparable across objectives, nor across "
              "settings of one (with kept tokens, `mask_prob` + `random_prob` below 1, the loss also counts tokens "
              "the encoder sees and can copy); the accuracy at [MASK] and the benchmarks below are. The unigram "
              "accuracy is what predicting the most frequent token everywhere scores; the effective rank counts the directions holding 90% of the variance of the encoder's final "
              "states on validation tokens (see docs/collapse.md).", "", "![validation loss](loss_curves.png)", ""]
    rows: list[dict[str, Any]] = []
    for benchmark, folder in benchmarks.items():
        tables = {split: benchmark_rows(benchmark, results[benchmark], runs, baseline, split)
                  for split in ("valid", "test")}
        rows += tables["valid"] + tables["test"]
        pretraining_seeds = len(runs) // max(1, len(objectives))
        lines += [f"## {benchmark}", "", *_verdicts(tables, baseline, pretraining_seeds), "",
                  *_missing_tasks(results[benchmark])]
        for split, table in tables.items():
            lines += _score_table(folder, split, table, results[benchmark], runs, objectives, baseline)
        lines += [f"![{benchmark}]({folder.name}/results.png)", ""]
    if "rank" in analyses:
        lines += ["## Representation rank (MAE-LM paper, Figure 1)", "", (out / "rank" / "rank.md").read_text(),
                  "![rank](rank/rank.png)", ""]
    if "semantics" in analyses:
        lines += ["## Semantic multimodality (ExLM paper)", "", "| checkpoint | mean entropy (nats) | top-1 | top-5 |",
                  "|---|---:|---:|---:|"]
        for result in analyses["semantics"]["results"]:
            accuracy = result["top_k_accuracy"]
            lines.append(f"| {result['label']} | {result['mean_entropy_nats']:.3f} | {accuracy['1']:.3f} | {accuracy['5']:.3f} |")
        lines += ["", "![semantics](semantics/semantics.png)", ""]
    write_text(out / "report.md", "\n".join(lines) + "\n")
    write_json(out / "compare.json", {"modality": modality, "budget": vars(budget), "runs": runs,
                                      "benchmark_rows": rows, "wall_time_s": wall_time}, default=str)
    if rows:
        with atomic_path(out / "summary.csv") as tmp, open(tmp, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return out / "report.md"
