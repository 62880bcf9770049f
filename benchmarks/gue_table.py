"""polymask's DNA benchmark rows beside the published GUE rows (MCC x 100), with the gap per task to DNABERT-2 and to
Nucleotide Transformer 2500M multi-species (the published rows the CSV has of the two).

    python benchmarks/gue_table.py runs/benchmark-dna-gue/results.json \
        --published docs/results/dna-gue/published.csv --out docs/results/dna-gue/gue

writes ``gue.md`` (the table) and ``gue.png`` (test MCC per task, one bar per row). polymask rows are
mean ± std (ddof 0, as the benchmark reports) over the fine-tuning seeds of the test MCC; only tasks that every polymask row finished
and that the published table has are shown.
"""
from __future__ import annotations

import argparse
import csv
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from polymask.jsonio import number

REFERENCES = ("DNABERT-2 (117M)", "Nucleotide Transformer 2500M multi-species")


def _ours(results: dict) -> tuple[dict[str, dict[str, list[float]]], list[str]]:
    """(system -> task name -> test MCC x 100 per seed, the tasks a test-time averaged row scores with the single
    predictions: their examples have no variants, ``no_variants`` in the benchmark's cells)."""
    scores: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    plain = set()
    for cell in sorted(results["cells"], key=lambda cell: cell["seed"]):
        task = cell["task"].split("/")[-1]
        scores[cell["system"]][task].append(100 * number(cell["test"]["mcc"]))
        if cell.get("no_variants"):
            plain.add(task)
    return scores, [task for task in (key.split("/")[-1] for key in results["task_order"]) if task in plain]


def gue_table(results: dict, published: dict[str, dict[str, float]]) -> tuple[str, list[str], dict[str, list[float]]]:
    """(the Markdown table, its tasks, each row's per-task means for the plot)."""
    ours, plain_tasks = _ours(results)
    seeds = len(results["seeds"])
    ordered = [task.split("/")[-1] for task in results["task_order"]]
    tasks = [t for t in ordered if all(len(ours[s][t]) == seeds for s in results["systems"])
             and all(t in row for row in published.values())]
    if not tasks:
        raise SystemExit("no task that every row finished with every seed and every published row has")
    header = ["row", *tasks, f"mean ({len(tasks)} tasks)"]
    left_out = [t for t in ordered if t not in tasks]
    lines = ([f"Left out (a row unfinished, or not in every published row): {', '.join(left_out)}.", ""]
             if left_out else [])
    shown = [task for task in plain_tasks if task in tasks]
    if shown:
        lines += [f"A test-time averaged row scores {', '.join(shown)} with its single predictions: those tasks "
                  f"declare no invariance, so their sequences have no variants to average over.", ""]
    lines += ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    means: dict[str, list[float]] = {}
    for system in results["systems"]:
        per_task = [ours[system][t] for t in tasks]
        per_seed_mean = np.mean(per_task, axis=0)
        means[system] = [float(np.mean(values)) for values in per_task]
        cells = [f"{np.mean(v):.1f} ± {np.std(v):.1f}" for v in per_task]
        lines.append(f"| {system} (polymask, {seeds} seeds) | " + " | ".join(cells)
                     + f" | {np.mean(per_seed_mean):.1f} ± {np.std(per_seed_mean):.1f} |")
    for name, row in published.items():
        means[name] = [row[t] for t in tasks]
        lines.append(f"| {name} (published) | " + " | ".join(f"{row[t]:.1f}" for t in tasks)
                     + f" | {np.mean(means[name]):.1f} |")
    for name in [name for name in REFERENCES if name in published]:
        for system in results["systems"]:
            gaps = [means[system][i] - published[name][t] for i, t in enumerate(tasks)]
            lines.append(f"| gap: {system} − {name} | " + " | ".join(f"{g:+.1f}" for g in gaps)
                         + f" | {np.mean(gaps):+.1f} |")
    return "\n".join(lines), tasks, means


def plot(path: Path, tasks: list[str], means: dict[str, list[float]]) -> None:
    """Grouped bars: test MCC x 100 per task, one bar per row."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(1.6 * len(tasks) + 3, 4.5))
    width = 0.8 / len(means)
    for index, (name, values) in enumerate(means.items()):
        axis.bar(np.arange(len(tasks)) + index * width - 0.4 + width / 2, values, width, label=name)
    axis.set_xticks(np.arange(len(tasks)), tasks)
    axis.set_ylabel("test MCC x 100")
    axis.axhline(0, color="black", linewidth=0.5)
    axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="results.json of `polymask benchmark dna`")
    parser.add_argument("--published", type=Path, required=True, help="CSV: model, then one column per task")
    parser.add_argument("--out", type=Path, required=True, help="path stem for the .md and .png")
    args = parser.parse_args()
    with open(args.published, newline="") as handle:
        published = {row.pop("model"): {task: float(value) for task, value in row.items()}
                     for row in csv.DictReader(handle)}
    table, tasks, means = gue_table(json.loads(args.results.read_text()), published)
    args.out.with_suffix(".md").write_text(table + "\n")
    plot(args.out.with_suffix(".png"), tasks, means)
    print(table)


if __name__ == "__main__":
    main()
