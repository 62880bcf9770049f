"""Verdicts of an objectives experiment from several ``polymask compare`` folders: each row's task mean per
pretraining seed, contrasts with a 95% interval over pretraining seeds, and the mean against the budget.

    python benchmarks/objective_verdicts.py docs/results/dna-gue/objectives-steps/steps-7358 \
        docs/results/dna-gue/objectives-steps/h1-seeds --contrast "H1 mlm100 mlm" --contrast "H1 maelm1010 maelm" \
        --curve mlm maelm exlm --out docs/results/dna-gue/objectives-steps/verdicts

A folder whose compare is still running is read from its finished runs and cells (a screen's first reading).
A row is a compare variant (its label) at a budget (the folder's: N optimiser steps, or a time or a token count);
the untrained and reference rows keep their benchmark names. Per pretraining seed, a row's score is the mean over the tasks every row finished,
averaged over the fine-tuning seeds. A contrast "NAME A B" is A minus B at every budget both have, on validation
(where choices are made) and test:

- over pretraining seeds: the difference of the per-seed means with a 95% interval from the pretraining-seed
  variance pooled over every row that has several seeds at that budget (Student's t on the pooled degrees of
  freedom; a row with one seed is taken to vary as those rows do), and Welch's p over the two rows' seeds (both
  rows with two or more);
- over fine-tuning seeds: Welch's p over the per-fine-tuning-seed task means (averaged over pretraining seeds),
  which tests fine-tuning noise only.

Writes verdicts.md, verdicts.json, verdicts.csv and, with --curve, curve.png (validation mean against steps and
against training time: equal steps and equal time read off one plot).
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import shlex
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from polymask.jsonio import write_json, write_text
from polymask.tasks.metrics.significance import welch_verdict

SPLITS = ("valid", "test")


def _folder(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """A finished compare's ``compare.json`` and benchmark ``results.json``; for a compare still running, the same
    read off its finished runs and cells (``_in_progress``)."""
    if (path / "compare.json").is_file():
        compare = json.loads((path / "compare.json").read_text())
        benchmarks = sorted(path.glob("benchmark-*/results.json"))
        if len(benchmarks) != 1:
            raise SystemExit(f"{path}: {len(benchmarks)} benchmark folders; this script reads compares of one "
                             f"benchmark")
        results = json.loads(benchmarks[0].read_text())
    else:
        compare, results = _in_progress(path)
    metrics = {cell["metric"] for cell in results["cells"]}
    if len(metrics) > 1:  # a mean over tasks would mix higher- and lower-is-better scores
        raise SystemExit(f"{path}: tasks with different metrics ({', '.join(sorted(metrics))}); one metric only")
    return compare, results


def _in_progress(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """What ``compare.json`` and ``results.json`` will hold, from a running compare's finished pretraining runs
    (``pretrain/<label>-seed<N>/summary.json`` and ``plan.json``) and finished cells
    (``benchmark-*/cells/<system>/<task>/seed-<N>.json``): the screen can be read before the compare ends."""
    runs = []
    for summary_path in sorted(path.glob("pretrain/*-seed*/summary.json")):
        summary = json.loads(summary_path.read_text())
        if summary.get("status") != "completed":
            continue
        plan = json.loads((summary_path.parent / "plan.json").read_text())
        runs.append({"run_dir": str(summary_path.parent), "variant": summary_path.parent.name.rsplit("-seed", 1)[0],
                     "objective": summary["objective"], "steps": summary["steps"], "tokens": summary["tokens"],
                     "train_time_s": summary["train_time_s"], "plan": plan})
    if not runs:
        raise SystemExit(f"{path}: neither compare.json nor a finished pretraining run")
    budgets = {(run["plan"]["budget"], run["plan"]["amount"]) for run in runs}
    if len(budgets) != 1:
        raise SystemExit(f"{path}: runs of {len(budgets)} budgets; one compare has one")
    benchmarks = sorted(path.glob("benchmark-*/cells"))
    if len(benchmarks) != 1:
        raise SystemExit(f"{path}: {len(benchmarks)} benchmark folders; this script reads compares of one benchmark")
    cells = [json.loads(cell.read_text()) for cell in sorted(benchmarks[0].glob("*/*/seed-*.json"))]
    (kind, amount), = budgets
    return {"budget": {"kind": kind, "amount": amount}, "runs": runs}, {"cells": cells}


def budget_name(budget: dict[str, Any]) -> str:
    """A compare budget as the tables name it: ``7,358 steps``, ``30 min``, ``5.0M tokens``."""
    amount, kind = budget["amount"], budget["kind"]
    return {"steps": f"{int(amount):,} steps", "time": f"{amount / 60:g} min"}.get(kind, f"{amount / 1e6:.1f}M tokens")


def collect(folders: list[Path]) -> tuple[dict[tuple[str, str], dict[int, dict[str, dict[int, dict[str, float]]]]],
                                          dict[tuple[str, str], dict[str, Any]]]:
    """(row, budget) -> pretraining seed -> split -> fine-tuning seed -> task -> score; and per (row, budget) what its
    runs cost (steps, tokens, training seconds). A cell found in two folders (a run linked into both) is read once."""
    scores: dict[tuple[str, str], dict[int, dict[str, dict[int, dict[str, float]]]]] = defaultdict(
        lambda: defaultdict(lambda: {split: defaultdict(dict) for split in SPLITS}))
    costs: dict[tuple[str, str], dict[str, Any]] = {}
    digests: dict[tuple[str, str, int], str] = {}
    for folder in folders:
        compare, results = _folder(folder)
        steps = budget_name(compare["budget"])
        by_system = {}
        for run in compare["runs"]:
            name = Path(run["run_dir"]).name
            label = run.get("variant") or run["objective"]
            seed = int(name.rsplit("-seed", 1)[1])
            digest = (run.get("plan") or {}).get("settings", "")
            if digests.setdefault((label, steps, seed), digest) != digest:
                raise SystemExit(f"{folder}: run {name} was pretrained with other settings than the {label} run of "
                                 f"seed {seed} at {steps} in an earlier folder; they are not one row")
            by_system[f"{name} ({run['objective']})"] = (label, seed)
            cost = costs.setdefault((label, steps), {"steps": [], "tokens": [], "train_time_s": [], "seeds": []})
            if seed not in cost["seeds"]:
                cost["seeds"].append(seed)
                cost["steps"].append(run["steps"])
                cost["tokens"].append(run["tokens"])
                cost["train_time_s"].append(run["train_time_s"])
        for cell in results["cells"]:
            label, seed = by_system.get(cell["system"], (cell["system"], 0))
            for split in SPLITS:
                scores[(label, steps)][seed][split][cell["seed"]][cell["task"]] = cell[split][cell["metric"]]
    return scores, costs


def common_tasks(scores: dict) -> list[str]:
    """The tasks every row finished for every seed."""
    sets = [set(by_task) for seeds in scores.values() for splits in seeds.values()
            for by_task in splits["valid"].values()]
    return sorted(set.intersection(*sets)) if sets else []


def seed_means(row: dict[int, dict[str, dict[int, dict[str, float]]]], split: str,
               tasks: list[str]) -> tuple[list[float], list[float]]:
    """Per pretraining seed, the task mean averaged over fine-tuning seeds; per fine-tuning seed, the task mean
    averaged over pretraining seeds."""
    table = {pt: {ft: float(np.mean([by_task[t] for t in tasks])) for ft, by_task in splits[split].items()}
             for pt, splits in sorted(row.items())}
    per_pretraining = [float(np.mean(list(fts.values()))) for fts in table.values()]
    ft_seeds = sorted(set.intersection(*(set(fts) for fts in table.values())))
    per_finetuning = [float(np.mean([table[pt][ft] for pt in table])) for ft in ft_seeds]
    return per_pretraining, per_finetuning


def pooled_sd(rows: list[list[float]]) -> tuple[float, int]:
    """Pretraining-seed standard deviation pooled over rows with two or more seeds, and its degrees of freedom."""
    several = [values for values in rows if len(values) > 1]
    dof = sum(len(values) - 1 for values in several)
    if not dof:
        return float("nan"), 0
    return math.sqrt(sum(np.var(values, ddof=1) * (len(values) - 1) for values in several) / dof), dof


def contrast(a: tuple[list[float], list[float]], b: tuple[list[float], list[float]],
             pooled: tuple[float, int]) -> dict[str, Any]:
    """A minus B: the effect, its 95% interval over pretraining seeds (pooled), and both Welch p-values."""
    (a_pt, a_ft), (b_pt, b_ft) = a, b
    effect = float(np.mean(a_pt) - np.mean(b_pt))
    sd, dof = pooled
    low = high = float("nan")
    if dof:  # a row with one seed borrows the spread of the rows with several
        half = stats.t.ppf(0.975, dof) * sd * math.sqrt(1 / len(a_pt) + 1 / len(b_pt))
        low, high = effect - half, effect + half
    _, p_pretraining = welch_verdict(a_pt, b_pt, True)
    _, p_finetuning = welch_verdict(a_ft, b_ft, True)
    beyond = "n/a (no row with several pretraining seeds)" if math.isnan(low) else (
        "yes" if low > 0 or high < 0 else "no")
    return {"effect": effect, "ci_low": low, "ci_high": high, "pooled_sd": sd, "pooled_dof": dof,
            "beyond_pretraining_noise": beyond, "p_pretraining": p_pretraining, "p_finetuning": p_finetuning,
            "pretraining_seeds": [len(a_pt), len(b_pt)]}


def _number(value: float, spec: str = ".3f") -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def _p(value: float) -> str:
    return "–" if math.isnan(value) else ("< 0.001" if value < 0.001 else f"{value:.3f}")


def _per_task_table(scores: dict) -> list[str]:
    """Markdown lines: each row's validation score per task (mean over its pretraining and fine-tuning seeds, with
    how many cells), every task any row has; the means above use only the tasks every row finished."""
    tasks = sorted({task for seeds in scores.values() for splits in seeds.values()
                    for by_task in splits["valid"].values() for task in by_task})
    lines = ["", "Validation score per task (mean over every finished cell of the row, the number of cells in "
             "brackets; – not yet run):", "",
             "| row | budget | " + " | ".join(task.split("/")[-1] for task in tasks) + " |",
             "|---|---|" + "---:|" * len(tasks)]
    for (label, steps), seeds in scores.items():
        values = [[by_task[task] for splits in seeds.values() for by_task in splits["valid"].values()
                   if task in by_task] for task in tasks]
        lines.append(f"| {label} | {steps} | " + " | ".join(
            f"{np.mean(found):.3f} ({len(found)})" if found else "–" for found in values) + " |")
    return lines


def _plot_curve(summary: list[dict[str, Any]], labels: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for label in labels:
        points = sorted((r["steps"], r["mean_train_time_s"], r["valid_mean"], r["valid_sd"]) for r in summary
                        if r["row"] == label and r["train_time_s"])
        if not points:
            continue
        steps, seconds, means, sds = zip(*points)
        for axis, x in zip(axes, (steps, [s / 60 for s in seconds])):
            axis.errorbar(x, means, yerr=[0 if math.isnan(s) else s for s in sds], marker="o", capsize=3, label=label)
    for axis, name in zip(axes, ("optimiser steps", "training time (min, one CPU thread)")):
        axis.set_xlabel(name)
        axis.grid(alpha=0.3)
    axes[0].set_ylabel("validation task mean")
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path, help="polymask compare --out folders")
    parser.add_argument("--contrast", action="append", default=[], metavar="'NAME A B'",
                        help="A minus B at every budget both rows have (repeatable; quote a row name with spaces)")
    parser.add_argument("--curve", nargs="*", default=[], help="rows to plot against steps and training time")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    scores, costs = collect(args.folders)
    tasks = common_tasks(scores)
    means = {key: {split: seed_means(row, split, tasks) for split in SPLITS} for key, row in scores.items()}
    summary = []
    for (label, steps), by_split in means.items():
        cost = costs.get((label, steps), {"steps": [], "tokens": [], "train_time_s": [], "seeds": []})
        entry = {"row": label, "budget": steps, "pretraining_seeds": len(by_split["valid"][0]),
                 "steps": float(np.mean(cost["steps"])) if cost["steps"] else None,
                 "tokens": float(np.mean(cost["tokens"])) if cost["tokens"] else None,
                 "train_time_s": cost["train_time_s"],
                 "mean_train_time_s": float(np.mean(cost["train_time_s"])) if cost["train_time_s"] else None}
        for split in SPLITS:
            per_pt, per_ft = by_split[split]
            entry[f"{split}_mean"] = float(np.mean(per_pt))
            entry[f"{split}_sd"] = float(np.std(per_pt, ddof=1)) if len(per_pt) > 1 else float("nan")
            entry[f"{split}_ft_sd"] = float(np.std(per_ft, ddof=0)) if len(per_ft) > 1 else float("nan")
            entry[f"{split}_per_pretraining_seed"] = per_pt
        summary.append(entry)
    contrasts = []
    for text in args.contrast:
        name, a, b = shlex.split(text)  # a row named with spaces in quotes: 'no pretraining'
        unknown = [row for row in (a, b) if not any(label == row for label, _ in means)]
        if unknown:
            raise SystemExit(f"--contrast '{text}': no row {', '.join(unknown)} (rows: "
                             f"{', '.join(sorted({label for label, _ in means}))})")
        for steps in [s for (label, s) in means if label == a and (b, s) in means]:
            for split in SPLITS:
                rows = [by_split[split][0] for (_, s), by_split in means.items() if s == steps]
                result = contrast(means[(a, steps)][split], means[(b, steps)][split], pooled_sd(rows))
                contrasts.append({"name": name, "a": a, "b": b, "budget": steps, "split": split, **result})
    args.out.mkdir(parents=True, exist_ok=True)
    lines = [f"# Objective verdicts ({len(tasks)} tasks: {', '.join(t.split('/')[-1] for t in tasks)})", "",
             "Per row: the task mean per pretraining seed (each averaged over the fine-tuning seeds); mean, the "
             "standard deviation over pretraining seeds (ddof 1) and over fine-tuning seeds (ddof 0, of the "
             "per-fine-tuning-seed task means averaged over pretraining seeds).", "",
             "| row | budget | steps | pretraining seeds | tokens | train time (min) | valid mean | sd (pretraining) | "
             "sd (fine-tuning) | per pretraining seed | test mean | sd (pretraining) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    for e in summary:
        minutes = "–" if not e["mean_train_time_s"] else f"{e['mean_train_time_s'] / 60:.1f}"
        tokens = "–" if not e["tokens"] else f"{e['tokens'] / 1e6:.1f}M"
        lines.append(f"| {e['row']} | {e['budget']} | {_number(e['steps'], ',.0f')} | {e['pretraining_seeds']} | {tokens} | {minutes} | "
                     f"{e['valid_mean']:.3f} | {_number(e['valid_sd'])} | {_number(e['valid_ft_sd'])} | "
                     f"{', '.join(f'{v:.3f}' for v in e['valid_per_pretraining_seed'])} | {e['test_mean']:.3f} | "
                     f"{_number(e['test_sd'])} |")
    lines += _per_task_table(scores)
    if contrasts:
        lines += ["", "Contrasts (A minus B; 95% interval over pretraining seeds from the pretraining-seed sd pooled "
                  "over the rows with several seeds at that budget, which assumes every row's seeds vary alike; "
                  "Welch's p over pretraining seeds and over fine-tuning seeds; no correction for the number of "
                  "contrasts):", "",
                  "| hypothesis | A − B | budget | split | effect | 95% interval | beyond pretraining noise | "
                  "p (pretraining) | p (fine-tuning) | pooled sd (dof) |", "|---|---|---|---|---:|---|---|---:|---:|---|"]
        for c in contrasts:
            interval = "–" if math.isnan(c["ci_low"]) else f"[{c['ci_low']:+.3f}, {c['ci_high']:+.3f}]"
            lines.append(f"| {c['name']} | {c['a']} − {c['b']} | {c['budget']} | {c['split']} | {c['effect']:+.3f} | "
                         f"{interval} | {c['beyond_pretraining_noise']} | {_p(c['p_pretraining'])} | "
                         f"{_p(c['p_finetuning'])} | {_number(c['pooled_sd'])} ({c['pooled_dof']}) |")
    if args.curve:
        _plot_curve(summary, args.curve, args.out / "curve.png")
        lines += ["", "![validation mean against steps and training time](curve.png)"]
    write_text(args.out / "verdicts.md", "\n".join(lines) + "\n")
    write_json(args.out / "verdicts.json", {"tasks": tasks, "rows": summary, "contrasts": contrasts})
    with open(args.out / "verdicts.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[k for k in summary[0] if not isinstance(summary[0][k], list)],
                                extrasaction="ignore")
        writer.writeheader()
        writer.writerows({key: "" if isinstance(value, float) and math.isnan(value) else value  # blank, not nan
                          for key, value in entry.items()} for entry in summary)
    print(args.out / "verdicts.md")


if __name__ == "__main__":
    main()
