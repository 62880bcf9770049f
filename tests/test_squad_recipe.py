"""benchmarks/squad_recipe.py: one row per recipe folder and system, ranked by validation F1 only."""
import json
from pathlib import Path

import pytest

from tests.test_rxnfp_folder import load_script

recipe = load_script("squad_recipe")


def _cell(folder: Path, system: str, seed: int, valid: float, test: float, max_len: int, lr: float) -> None:
    path = folder / "cells" / system.replace(" ", "-") / "squad-v1" / f"seed-{seed}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    finetune = {"lr": lr, "epochs": 20, "patience": 3, "max_len": max_len,
                "span": {"doc_stride": max_len // 2, "max_query_len": max_len // 4, "max_answer_len": 30}}
    path.write_text(json.dumps({"system": system, "task": "squad/v1", "seed": seed, "metric": "squad_f1",
                                "valid": {"squad_f1": valid}, "test": {"squad_f1": test}, "best_epoch": 4,
                                "epochs_run": 7, "time_s": 600.0, "identity": {"system": {"finetune": finetune}}}))


def test_recipes_rank_by_the_named_systems_validation_f1_and_never_by_test(tmp_path):
    _cell(tmp_path / "w128-lr1e-3", "enc (mlm)", 0, 30.0, 10.0, 128, 1e-3)
    _cell(tmp_path / "w128-lr1e-3", "enc (mlm)", 1, 28.0, 12.0, 128, 1e-3)
    _cell(tmp_path / "w256-lr3e-4", "enc (mlm)", 0, 25.0, 40.0, 256, 3e-4)
    _cell(tmp_path / "w256-lr3e-4", "no pretraining", 0, 35.0, 40.0, 256, 3e-4)
    rows = recipe.recipe_rows(tmp_path)
    assert recipe.ranked(rows, "enc (mlm)") == ["w128-lr1e-3", "w256-lr3e-4"]
    best = next(row for row in rows if row["recipe"] == "w128-lr1e-3")
    assert (best["seeds"], best["valid_f1"], best["valid_f1_std"]) == (2, pytest.approx(29.0), pytest.approx(1.0))
    assert (best["max_len"], best["max_query_len"], best["doc_stride"], best["lr"]) == (128, 32, 64, 1e-3)
    recipe.write_search(rows, recipe.ranked(rows, "enc (mlm)"), "enc (mlm)", tmp_path / "out")
    table = (tmp_path / "out" / "search.md").read_text()
    assert table.index("w128-lr1e-3 | enc (mlm)") < table.index("w256-lr3e-4 | enc (mlm)")
    assert "**29.00 ± 1.00**" in table
    saved = json.loads((tmp_path / "out" / "search.json").read_text())
    assert saved["ranking"] == ["w128-lr1e-3", "w256-lr3e-4"] and len(saved["rows"]) == 3
    assert (tmp_path / "out" / "search.csv").read_text().count("\n") == 4
