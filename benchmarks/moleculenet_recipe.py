"""Choose MoleculeNet's fine-tuning recipe on the validation splits (issue 39, item 3).

A coordinate search from the settings every MoleculeNet table so far used (lr 2e-4, 10 epochs, patience 3,
mean pooling, dropout 0.1, full fine-tuning, a linear head, no augmentation): one axis at a time, each of its
values is run as a benchmark row (the given checkpoint, every task, every seed; no reference rows) and adopted
when it raises the validation score of the best settings so far (a row with test-time averaging is scored by
its averaged predictions). The score is the mean over tasks of the relative change of each
task's validation metric against that best row (ROC-AUC up, RMSE down), so that eight tasks on two scales weigh
alike. Test scores are never read. Each row is its own benchmark folder under ``--out``, so the search resumes
cell by cell; it writes ``search.md`` / ``search.json`` and the chosen ``recipe.yaml`` there.

    python benchmarks/moleculenet_recipe.py --checkpoint smiles-mlm-1.7m --data-dir DATA/moleculenet \\
        --out docs/results/moleculenet-recipe
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import yaml

from polymask.benchmarking.api import run_benchmark_verb
from polymask.benchmarking.runner import AVERAGED
from polymask.builtin_models import checkpoint_path

TASKS = ["esol", "freesolv", "lipophilicity", "bbbp", "bace", "clintox", "tox21", "sider"]
START: dict[str, Any] = {"lr": 2e-4, "epochs": 10, "patience": 3, "pooling": "mean", "dropout": 0.1,
                         "freeze_encoder": False, "head": "linear"}
#: axis -> the settings each of its values changes (the first value of an axis START names is START's own)
AXES: dict[str, list[dict[str, Any]]] = {
    "lr": [{"lr": 2e-4}, {"lr": 5e-5}, {"lr": 1e-3}],
    "length": [{"epochs": 10, "patience": 3}, {"epochs": 30, "patience": 8}],
    "pooling": [{"pooling": "mean"}, {"pooling": "cls"}],
    "dropout": [{"dropout": 0.1}, {"dropout": 0.3}],
    "frozen": [{"freeze_encoder": False}, {"freeze_encoder": True}],
    "head": [{"head": "linear"}, {"head": "mlp"}],
    # randomised SMILES in each epoch, scored by the mean over each molecule and 7 other atom orders
    "augment": [{"augment": True, "test_time_average": True}],
}
LOWER_IS_BETTER = {"rmse", "mae"}


def row_name(settings: dict[str, Any]) -> str:
    return "-".join(f"{key}{value}" for key, value in sorted(settings.items()))


def validation_means(folder: Path, averaged: bool = False) -> dict[str, float]:
    """Each task's validation metric, mean over seeds, from a benchmark folder's results.json: of the single
    predictions, or ``averaged`` over each example's variants (the '+ test-time average' row)."""
    rows = json.loads((folder / "results.json").read_text())["valid_rows"]
    return {row["task"]: row[f"{row['metric']}_mean"] for row in rows if row["system"].endswith(AVERAGED) == averaged}


def relative_score(candidate: dict[str, float], best: dict[str, float], metrics: dict[str, str]) -> float:
    """Mean over tasks of the candidate's relative improvement on the best row's validation metric."""
    gains = [(best[t] - candidate[t]) / best[t] if metrics[t] in LOWER_IS_BETTER else (candidate[t] - best[t]) / best[t]
             for t in best]
    return sum(gains) / len(gains)


def run_row(args: argparse.Namespace, settings: dict[str, Any]) -> tuple[dict[str, float], dict[str, str]]:
    """A row's validation means (averaged over variants when it sets ``test_time_average``) and metric names."""
    folder = args.out / "rows" / row_name(settings)
    given = {**settings, "save_model": False}
    run_benchmark_verb("moleculenet", [checkpoint_path(args.checkpoint)], TASKS, args.seeds, False, folder,
                       args.data_dir, not args.quiet, given)
    rows = json.loads((folder / "results.json").read_text())["valid_rows"]
    metrics = {row["task"]: row["metric"] for row in rows}
    return validation_means(folder, settings.get("test_time_average", False)), metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default="smiles-mlm-1.7m")
    parser.add_argument("--data-dir", type=Path, required=True, help="folder with the MoleculeNet CSVs (SIDER)")
    parser.add_argument("--out", type=Path, default=Path("docs/results/moleculenet-recipe"))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--min-gain", type=float, default=0.005, help="relative gain a change must bring")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()

    best = dict(START)
    best_scores, metrics = run_row(args, best)
    trials = [{"axis": "start", "settings": dict(best), "valid": best_scores, "score": 0.0, "adopted": True}]
    for axis, values in AXES.items():
        for change in values:
            settings = {**best, **change}
            if settings == best:
                continue
            scores, _ = run_row(args, settings)
            gain = relative_score(scores, best_scores, metrics)
            adopted = gain > args.min_gain
            trials.append({"axis": axis, "settings": settings, "valid": scores, "score": gain, "adopted": adopted})
            if settings.get("test_time_average"):  # the same models' single predictions, for the record
                single = validation_means(args.out / "rows" / row_name(settings))
                trials.append({"axis": f"{axis} (single predictions)", "settings": settings, "valid": single,
                               "score": relative_score(single, best_scores, metrics), "adopted": False})
            if adopted:
                best, best_scores = settings, scores
    write_outputs(args, trials, best, metrics)


def write_outputs(args: argparse.Namespace, trials: list[dict[str, Any]], best: dict[str, Any],
                  metrics: dict[str, str]) -> None:
    tasks = list(trials[0]["valid"])
    lines = [f"# MoleculeNet fine-tuning recipe, chosen on validation ({args.checkpoint}, {args.seeds} seeds)", "",
             "Coordinate search (benchmarks/moleculenet_recipe.py): each row changes one axis of the best settings "
             "so far; score = mean relative change of the validation metrics against that best row (ROC-AUC up, "
             f"RMSE down); adopted above {args.min_gain:.1%}. Test scores are not read.", "",
             "| axis | settings | " + " | ".join(f"{t.split('/')[-1]} {metrics[t]}" for t in tasks)
             + " | score | adopted |", "|---|---|" + "---:|" * len(tasks) + "---:|---|"]
    for trial in trials:
        cells = " | ".join(f"{trial['valid'][t]:.3f}" for t in tasks)
        lines.append(f"| {trial['axis']} | {row_name(trial['settings'])} | {cells} | {trial['score']:+.4f} | "
                     f"{'yes' if trial['adopted'] else 'no'} |")
    lines += ["", f"Chosen: `{json.dumps(best)}`"]
    (args.out / "search.md").write_text("\n".join(lines) + "\n")
    (args.out / "search.json").write_text(json.dumps({"trials": trials, "chosen": best}, indent=1))
    (args.out / "recipe.yaml").write_text(yaml.safe_dump({"finetune": best}, sort_keys=False))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
