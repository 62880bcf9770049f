"""Merge benchmark results.json files run with the same tasks and seeds into one, for welch_table.py and
gue_table.py: rows of every file side by side.

    python benchmarks/merge_results.py runs/bench-6mer/results.json runs/bench-3mer/results.json \
        --labels 6-mers 3-mers --out runs/merged.json

A row name that two files share keeps one row when their cells are the same (a deterministic reference),
and otherwise becomes one row per file, named "<row> (<label>)" (each file's untrained encoder, say).
"""
from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from polymask.jsonio import write_json


def _scores(results: dict[str, Any], system: str) -> list[tuple[str, int, Any, Any]]:
    return sorted((c["task"], c["seed"], c["valid"], c["test"]) for c in results["cells"] if c["system"] == system)


def merge(parts: list[dict[str, Any]], labels: list[str]) -> dict[str, Any]:
    """One results dict with every part's rows (see the module docstring)."""
    if len({tuple(part["seeds"]) for part in parts}) != 1:
        raise SystemExit("the files were run with different seeds")
    if len({tuple(part["task_order"]) for part in parts}) != 1:
        raise SystemExit("the files were run on different tasks")
    if any(part.get("unfinished") for part in parts):
        raise SystemExit("a file is a partial report (--finished-only, cells still to run): merge finished ones")
    counts = Counter(system for part in parts for system in part["systems"])
    # per-row summaries are the first file's alone: leave them out (the scripts read the cells)
    kept = {key: value for key, value in parts[0].items() if key not in ("rows", "valid_rows", "pretraining_tokens",
                                                                           "cells_total", "unfinished")}
    merged: dict[str, Any] = {**kept, "systems": [], "cells": []}
    for part, label in zip(parts, labels):
        for system in part["systems"]:
            shared = counts[system] > 1
            if shared and all(_scores(other, system) == _scores(part, system) for other in parts if system in other["systems"]):
                if system in merged["systems"]:
                    continue
                name = system
            else:
                name = f"{system} ({label})" if shared else system
            merged["systems"].append(name)
            merged["cells"] += [{**cell, "system": name} for cell in part["cells"] if cell["system"] == system]
    return merged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, nargs="+", help="results.json files")
    parser.add_argument("--labels", nargs="+", required=True, help="one label per file, for rows whose names collide")
    parser.add_argument("--out", type=Path, required=True, help="the merged results.json")
    args = parser.parse_args()
    if len(args.labels) != len(args.results):
        raise SystemExit("give one --labels entry per results file")
    parts = [json.loads(path.read_text()) for path in args.results]
    write_json(args.out, merge(parts, args.labels))


if __name__ == "__main__":
    main()
