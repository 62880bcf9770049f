"""benchmarks/objective_verdicts.py: rows per pretraining seed across compare folders, pooled-seed intervals."""
import importlib.util
import json
import math
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "objective_verdicts.py"


@pytest.fixture(scope="module")
def verdicts():
    spec = importlib.util.spec_from_file_location("objective_verdicts", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_interval_pools_the_pretraining_seed_variance_of_every_row(verdicts):
    rows = [[0.50, 0.52], [0.40, 0.42], [0.30, 0.30]]
    sd, dof = verdicts.pooled_sd(rows)
    assert dof == 3 and sd == pytest.approx(math.sqrt((0.0002 + 0.0002 + 0) / 3))
    result = verdicts.contrast(([0.50, 0.52], [0.5, 0.51, 0.52]), ([0.40, 0.42], [0.4, 0.41, 0.42]), (sd, dof))
    half = 3.182446 * sd  # t(0.975, 3) x sd x sqrt(1/2 + 1/2)
    assert result["effect"] == pytest.approx(0.10)
    assert (result["ci_low"], result["ci_high"]) == pytest.approx((0.10 - half, 0.10 + half), abs=1e-5)
    assert result["beyond_pretraining_noise"] == "yes" and result["pretraining_seeds"] == [2, 2]
    single = verdicts.contrast(([0.5], [0.5, 0.51, 0.49]), ([0.4], [0.4, 0.41, 0.39]), (sd, dof))
    wide = 3.182446 * sd * math.sqrt(2)  # one seed a side: sqrt(1/1 + 1/1), the spread borrowed from the pool
    assert (single["ci_low"], single["ci_high"]) == pytest.approx((0.10 - wide, 0.10 + wide), abs=1e-5)
    assert single["p_finetuning"] < 0.05 and math.isnan(single["p_pretraining"])
    unpooled = verdicts.contrast(([0.5], [0.5]), ([0.4], [0.4]), (float("nan"), 0))
    assert unpooled["beyond_pretraining_noise"].startswith("n/a") and math.isnan(unpooled["ci_low"])


def _folder(path: Path, steps: int, runs: dict[str, list[float]]) -> Path:
    """A compare folder: each run 'label-seedN' with one score per fine-tuning seed on one task."""
    (path / "benchmark-dna").mkdir(parents=True)
    compare = {"budget": {"kind": "steps", "amount": steps},
               "runs": [{"run_dir": f"x/{name}", "objective": "mlm", "variant": name.rsplit("-seed", 1)[0],
                         "steps": steps, "tokens": 10 * steps, "train_time_s": steps / 10} for name in runs]}
    cells = [{"system": f"{name} (mlm)", "task": "dna/t", "seed": seed, "metric": "mcc", "valid": {"mcc": value},
              "test": {"mcc": value - 0.1}} for name, values in runs.items() for seed, value in enumerate(values)]
    (path / "compare.json").write_text(json.dumps(compare))
    (path / "benchmark-dna" / "results.json").write_text(json.dumps({"cells": cells}))
    return path


def test_rows_gather_their_seeds_across_folders_and_a_shared_run_counts_once(verdicts, tmp_path):
    one = _folder(tmp_path / "a", 100, {"mlm-seed0": [0.5, 0.6], "mlm100-seed0": [0.3, 0.4]})
    two = _folder(tmp_path / "b", 100, {"mlm-seed0": [0.5, 0.6], "mlm-seed1": [0.7, 0.8]})
    scores, costs = verdicts.collect([one, two])
    assert set(scores) == {("mlm", "100 steps"), ("mlm100", "100 steps")}
    assert costs[("mlm", "100 steps")]["seeds"] == [0, 1]
    per_pretraining, per_finetuning = verdicts.seed_means(scores[("mlm", "100 steps")], "valid", ["dna/t"])
    assert per_pretraining == pytest.approx([0.55, 0.75]) and per_finetuning == pytest.approx([0.6, 0.7])


def test_a_running_compare_is_read_from_its_finished_runs_and_cells(verdicts, tmp_path):
    """Before compare.json exists: completed runs only (an interrupted one is not a row), every finished cell."""
    folder = tmp_path / "running"
    for name, status in (("mlm-seed0", "completed"), ("mlm100-seed0", "completed"), ("exlm-seed0", "running")):
        run = folder / "pretrain" / name
        run.mkdir(parents=True)
        (run / "summary.json").write_text(json.dumps({"status": status, "objective": "mlm",
                                                      "steps": 50, "tokens": 500, "train_time_s": 5.0}))
        (run / "plan.json").write_text(json.dumps({"budget": "steps", "amount": 50}))
    for system, value in (("mlm-seed0 (mlm)", 0.5), ("mlm100-seed0 (mlm)", 0.4), ("no pretraining", 0.2)):
        cell = folder / "benchmark-dna" / "cells" / system.split()[0] / "dna-t" / "seed-0.json"
        cell.parent.mkdir(parents=True)
        cell.write_text(json.dumps({"system": system, "task": "dna/t", "seed": 0, "metric": "mcc",
                                    "valid": {"mcc": value}, "test": {"mcc": value}}))
    scores, costs = verdicts.collect([folder])
    assert set(scores) == {("mlm", "50 steps"), ("mlm100", "50 steps"), ("no pretraining", "50 steps")}
    assert set(costs) == {("mlm", "50 steps"), ("mlm100", "50 steps")}
    assert scores[("mlm100", "50 steps")][0]["valid"][0] == {"dna/t": 0.4}
    assert "| mlm | 50 steps | 0.500 (1) |" in "\n".join(verdicts._per_task_table(scores))


def test_one_fine_tuning_seed_has_no_fine_tuning_spread(verdicts, tmp_path, monkeypatch):
    """A screen (one fine-tuning seed per run) writes its fine-tuning sd as null and '–', never 0."""
    folder = _folder(tmp_path / "screen", 100, {"mlm-seed0": [0.5], "mlm-seed1": [0.6], "mlm100-seed0": [0.4]})
    monkeypatch.setattr("sys.argv", ["objective_verdicts.py", str(folder), "--contrast", "H1 mlm100 mlm",
                                     "--out", str(tmp_path / "out")])
    verdicts.main()
    rows = {row["row"]: row for row in json.loads((tmp_path / "out" / "verdicts.json").read_text())["rows"]}
    assert rows["mlm"]["valid_ft_sd"] is None and rows["mlm"]["valid_sd"] == pytest.approx(0.0707, abs=1e-4)
    table = (tmp_path / "out" / "verdicts.md").read_text()
    assert "| mlm | 100 steps | 100 | 2 | 0.0M | 0.2 | 0.550 | 0.071 | – |" in table
    assert "nan" not in (tmp_path / "out" / "verdicts.csv").read_text()  # a missing spread is blank
