"""Every row of a benchmark's results.json against one baseline row, on the test or the validation split.

    python benchmarks/welch_table.py RUN/results.json --baseline "mlm-seed0 (mlm)" --split valid

Prints a Markdown table: per task, mean ± std over the fine-tuning seeds (ddof 0, as
the benchmark and compare reports give it); per metric, the
mean over its tasks per seed (mean ± std of those per-seed means); and Welch's t-test of those per-seed means
against the baseline row's (``polymask.tasks.metrics.significance.welch_verdict``): a '+ test-time average' row against
the baseline averaged alike where there is one, and against its own plain row with a paired test (the same models).
Only tasks every row finished are used, and the table says which were left out.
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from polymask.benchmarking.report import reference_row
from polymask.tasks.metrics.scoring import METRICS
from polymask.tasks.metrics.significance import welch_verdict


def _scores(results: dict, split: str) -> dict[str, dict[str, dict[int, float]]]:
    """system -> task -> seed -> the task's headline metric on ``split``."""
    scores: dict[str, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for cell in results["cells"]:
        scores[cell["system"]][cell["task"]][cell["seed"]] = cell[split][cell["metric"]]
    return scores


def _mean_std(values: list[float]) -> str:
    return f"{np.mean(values):.3f} ± {np.std(values):.3f}"


def welch_table(results: dict, baseline: str, split: str) -> str:
    """The Markdown table (see the module docstring)."""
    scores, seeds = _scores(results, split), results["seeds"]
    metric_of = {cell["task"]: cell["metric"] for cell in results["cells"]}
    ordered = [task for task in results["task_order"] if task in metric_of]
    tasks = [t for t in ordered if all(len(scores[s][t]) == len(seeds) for s in results["systems"])]
    metrics = list(dict.fromkeys(metric_of[task] for task in tasks))
    header = [t.split("/")[-1] for t in tasks] + [f"mean {m}" for m in metrics] + [f"vs baseline ({m})" for m in metrics]
    lines = [f"{split} split; baseline: {baseline}" + (f"; left out (unfinished): {', '.join(sorted(set(ordered) - set(tasks)))}"
                                                       if len(tasks) < len(ordered) else ""), "",
             "| system | " + " | ".join(header) + " |", "|---|" + "---|" * len(header)]

    def per_seed_means(system: str, metric: str) -> list[float]:
        return [float(np.mean([scores[system][t][seed] for t in tasks if metric_of[t] == metric])) for seed in seeds]

    for system in results["systems"]:
        cells = [_mean_std([scores[system][task][seed] for seed in seeds]) for task in tasks]
        cells += [_mean_std(per_seed_means(system, metric)) for metric in metrics]
        reference, paired = reference_row(system, baseline, results["systems"])
        for metric in metrics:
            if system == baseline:
                cells.append("")
                continue
            verdict, p = welch_verdict(per_seed_means(system, metric), per_seed_means(reference, metric),
                                       METRICS[metric].higher_is_better, paired)
            against = "" if reference == baseline else f" vs {reference}"
            cells.append(f"{verdict}, p = {p:.3f}{' (paired: the same models)' if paired else against}")
        lines.append(f"| {system} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="a benchmark's results.json")
    parser.add_argument("--baseline", required=True, help="the system row every other row is tested against")
    parser.add_argument("--split", choices=["test", "valid"], default="test")
    args = parser.parse_args()
    results = json.loads(args.results.read_text())
    if args.baseline not in results["systems"]:
        parser.error(f"--baseline {args.baseline!r} is not a row of {args.results}: {', '.join(results['systems'])}")
    print(welch_table(results, args.baseline, args.split))


if __name__ == "__main__":
    main()
