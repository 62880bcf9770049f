"""The SQuAD fine-tuning recipe search of issue 59: one benchmark folder per recipe, compared on validation F1.

    python benchmarks/squad_recipe.py runs/squad-recipe --system "text-en-mlm-32m (mlm)" --out docs/results/squad-recipe
    python benchmarks/squad_recipe.py runs/squad-recipe --system "text-en-mlm-32m (mlm)" --best 2   # names only

Each sub-folder of the search folder is a ``polymask benchmark squad`` output (its ``cells/``). A recipe is what the
cells' identity records: window length, question tokens kept, stride, learning rate, epochs and patience. Writes
``search.md``, ``search.csv`` and ``search.json``: per recipe and system the validation F1 (mean ± std over the
seeds run), the epochs the seeds ran and chose, the CPU time, and the test F1 beside it, which chooses nothing.
Recipes are ranked by the named system's mean validation F1; ``--best K`` prints the K best folder names, one per
line (what the next stage of ``docs/results/squad-recipe/run.sh`` reruns with more seeds).
"""
from __future__ import annotations

import argparse
import csv
import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from polymask.jsonio import make_dir, write_json, write_text

COLUMNS = ["recipe", "system", "max_len", "max_query_len", "doc_stride", "lr", "epochs", "patience", "seeds",
           "valid_f1", "valid_f1_std", "test_f1", "test_f1_std", "best_epochs", "epochs_run", "cpu_minutes"]


def read_cells(folder: Path) -> list[dict[str, Any]]:
    """The finished cells of one benchmark folder (SQuAD tasks only)."""
    cells = [json.loads(path.read_text()) for path in sorted(folder.glob("cells/*/*/seed-*.json"))]
    return [cell for cell in cells if cell.get("metric") == "squad_f1"]


def recipe_rows(search: Path) -> list[dict[str, Any]]:
    """One row per (recipe folder, system), seeds pooled."""
    rows = []
    for folder in sorted(path for path in search.iterdir() if path.is_dir()):
        by_system: dict[str, list[dict[str, Any]]] = {}
        for cell in read_cells(folder):
            by_system.setdefault(cell["system"], []).append(cell)
        for system, cells in by_system.items():
            finetune = cells[0]["identity"]["system"]["finetune"]
            valid = [cell["valid"]["squad_f1"] for cell in cells]
            test = [cell["test"]["squad_f1"] for cell in cells]
            rows.append({"recipe": folder.name, "system": system, "max_len": finetune["max_len"],
                         "max_query_len": finetune["span"]["max_query_len"], "doc_stride": finetune["span"]["doc_stride"],
                         "lr": finetune["lr"], "epochs": finetune["epochs"], "patience": finetune["patience"],
                         "seeds": len(cells), "valid_f1": float(np.mean(valid)), "valid_f1_std": float(np.std(valid)),
                         "test_f1": float(np.mean(test)), "test_f1_std": float(np.std(test)),
                         "best_epochs": [cell["best_epoch"] for cell in cells],
                         "epochs_run": [cell["epochs_run"] for cell in cells],
                         "cpu_minutes": round(sum(cell["time_s"] for cell in cells) / 60, 1)})
    return rows


def ranked(rows: list[dict[str, Any]], system: str) -> list[str]:
    """Recipe folders by ``system``'s mean validation F1, best first."""
    mine = [row for row in rows if row["system"] == system]
    return [row["recipe"] for row in sorted(mine, key=lambda row: -row["valid_f1"])]


def markdown(rows: list[dict[str, Any]], order: list[str], system: str) -> str:
    """The search table, recipes in ``order`` (then the rest), chosen on validation."""
    position = {name: i for i, name in enumerate(order)}
    rows = sorted(rows, key=lambda row: (position.get(row["recipe"], len(order)), row["recipe"], row["system"]))
    lines = ["# SQuAD v1.1 fine-tuning recipe search (validation F1 chooses; test F1 is shown, never used)", "",
             f"Recipes ranked by {system}'s mean validation F1 over the seeds run (mean ± std, ddof 0). Window: tokens "
             "per window; query: question tokens kept; stride: tokens between window starts.", "",
             "| recipe | system | window | query | stride | lr | epochs / patience | seeds | valid F1 | test F1 | "
             "best epoch per seed | epochs run | CPU min |", "|---|---|---:|---:|---:|---:|---|---:|---:|---:|---|---|---:|"]
    for row in rows:
        best = "**" if order and row["recipe"] == order[0] and row["system"] == system else ""
        lines.append(f"| {row['recipe']} | {row['system']} | {row['max_len']} | {row['max_query_len']} | "
                     f"{row['doc_stride']} | {row['lr']:g} | {row['epochs']} / {row['patience']} | {row['seeds']} | "
                     f"{best}{row['valid_f1']:.2f} ± {row['valid_f1_std']:.2f}{best} | "
                     f"{row['test_f1']:.2f} ± {row['test_f1_std']:.2f} | {row['best_epochs']} | {row['epochs_run']} | "
                     f"{row['cpu_minutes']} |")
    return "\n".join(lines) + "\n"


def write_search(rows: list[dict[str, Any]], order: list[str], system: str, out: Path) -> None:
    """search.md, search.csv and search.json under ``out``."""
    make_dir(out)
    write_text(out / "search.md", markdown(rows, order, system))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS)
    writer.writeheader()
    writer.writerows({**row, "best_epochs": " ".join(map(str, row["best_epochs"])),
                      "epochs_run": " ".join(map(str, row["epochs_run"]))} for row in rows)
    write_text(out / "search.csv", buffer.getvalue())
    write_json(out / "search.json", {"ranked_by": system, "ranking": order, "rows": rows})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("search", type=Path, help="folder of benchmark folders, one per recipe")
    parser.add_argument("--system", required=True, help="the row whose validation F1 ranks the recipes")
    parser.add_argument("--out", type=Path, help="write search.md/.csv/.json here")
    parser.add_argument("--best", type=int, help="print the names of the K best recipe folders and stop")
    args = parser.parse_args()
    if not args.search.is_dir():
        parser.error(f"{args.search} is not a folder")
    rows = recipe_rows(args.search)
    order = ranked(rows, args.system)
    if not order:
        parser.error(f"no finished SQuAD cell of {args.system!r} under {args.search}")
    if args.best:
        print("\n".join(order[:args.best]))
        return
    if args.out is None:
        parser.error("give --out or --best")
    write_search(rows, order, args.system, args.out)
    print(f"{len(order)} recipes; best on validation: {order[0]} -> {args.out / 'search.md'}")


if __name__ == "__main__":
    main()
