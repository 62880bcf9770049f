"""The benchmark report's pretraining sections: pretrained rows against no pretraining, and the scaling curve."""
import json

import numpy as np

from polymask.benchmarking.pretraining_report import group_seed_means, pretraining_sections
from polymask.tasks.metrics.significance import welch_verdict


def row(system, task, metric, values, higher):
    return {"system": system, "task": task, "metric": metric, f"{metric}_values": values,
            f"{metric}_mean": float(np.mean(values)), "higher_is_better": higher}


def table(scores):
    """Rows of two ROC-AUC tasks and two RMSE tasks per system, from (auc per seed, rmse per seed)."""
    rows = []
    for system, (auc, rmse) in scores.items():
        rows += [row(system, "moleculenet/bbbp", "roc_auc", auc, True),
                 row(system, "moleculenet/bace", "roc_auc", [a + 0.1 for a in auc], True),
                 row(system, "moleculenet/esol", "rmse", rmse, False),
                 row(system, "moleculenet/freesolv", "rmse", [r + 1 for r in rmse], False)]
    return rows


TASKS = ["moleculenet/esol", "moleculenet/freesolv", "moleculenet/bbbp", "moleculenet/bace"]


def test_mean_columns_average_tasks_per_seed():
    means = group_seed_means(table({"a": ([0.7, 0.8, 0.9], [1.0, 1.2, 1.4])}), TASKS)
    assert np.allclose(means["a"]["roc_auc"], [0.75, 0.85, 0.95])
    assert np.allclose(means["a"]["rmse"], [1.5, 1.7, 1.9])


def test_sections_compare_with_no_pretraining_and_plot_against_tokens(tmp_path):
    rows = table({"run step-000100 (mlm)": ([0.70, 0.71, 0.72], [1.30, 1.31, 1.32]),
                  "run step-001000 (mlm)": ([0.80, 0.81, 0.82], [1.00, 1.01, 1.02]),
                  "no pretraining": ([0.70, 0.71, 0.72], [1.20, 1.21, 1.22]),
                  "ECFP4 + random forest (500 trees)": ([0.75, 0.75, 0.76], [2.0, 2.0, 2.0])})
    results = {"task_order": TASKS, "pretraining_tokens": {"run step-000100 (mlm)": 10_000,
                                                           "run step-001000 (mlm)": 100_000}}
    text = "\n".join(pretraining_sections(rows, results, tmp_path))
    lines = {line.split(" | ")[0]: line for line in text.splitlines() if " vs " in line}
    # mean rmse column first (ESOL comes first), lower is better; then mean roc_auc
    assert "1.510 ± 0.008 vs 1.710 ± 0.008: better, p = " in lines["| run step-001000 (mlm)"]
    assert "0.860 ± 0.008 vs 0.760 ± 0.008: better, p = " in lines["| run step-001000 (mlm)"]
    assert "1.810 ± 0.008 vs 1.710 ± 0.008: worse" in lines["| run step-000100 (mlm)"]
    assert "0.760 ± 0.008 vs 0.760 ± 0.008: within noise" in lines["| run step-000100 (mlm)"]
    assert "| run step-000100 (mlm) | 10,000 |" in text and "| no pretraining | – |" in text
    assert (tmp_path / "scaling.png").stat().st_size > 0
    json.dumps(text)


def test_no_section_without_a_pretrained_row(tmp_path):
    rows = table({"no pretraining": ([0.7, 0.71, 0.72], [1.2, 1.21, 1.22])})
    assert pretraining_sections(rows, {"task_order": TASKS, "pretraining_tokens": {}}, tmp_path) == []
    assert not (tmp_path / "scaling.png").exists()


def test_seed_noise_verdicts_cover_degenerate_scores():
    assert welch_verdict([0.80, 0.81, 0.80], [0.60, 0.61, 0.60], higher_is_better=True)[0] == "better"
    assert welch_verdict([0.80, 0.81, 0.80], [0.60, 0.61, 0.60], higher_is_better=False)[0] == "worse"
    assert welch_verdict([0.70, 0.75], [0.71, 0.74], higher_is_better=True)[0] == "within noise"
    assert welch_verdict([0.8125, 0.8125], [0.8125, 0.8125], higher_is_better=True)[0] == "within noise"
    assert welch_verdict([0.0, 0.0], [0.5, 0.5], higher_is_better=True)[0] == "n/a (no seed variance)"
    assert welch_verdict([float("nan"), float("nan")], [0.1, 0.2], higher_is_better=True)[0] == "n/a (undefined score)"
    assert welch_verdict([0.5], [0.4, 0.6], higher_is_better=True)[0] == "n/a (one seed)"


def test_an_averaged_row_is_tested_against_the_untrained_row_averaged_alike_and_its_twin_paired(tmp_path):
    """Test-time averaging lifts the untrained encoder too: its gain is not pretraining's. A row and its averaged
    twin are the same models read two ways, so their seeds pair."""
    from polymask.benchmarking.report import AVERAGED, reference_row

    rows = table({"ckpt (mlm)": ([0.70, 0.71, 0.72], [1.30, 1.31, 1.32]),
                  "ckpt (mlm)" + AVERAGED: ([0.74, 0.75, 0.76], [1.26, 1.27, 1.28]),
                  "no pretraining": ([0.69, 0.71, 0.72], [1.31, 1.31, 1.33]),
                  "no pretraining" + AVERAGED: ([0.73, 0.75, 0.76], [1.27, 1.27, 1.29])})
    results = {"task_order": TASKS, "pretraining_tokens": {"ckpt (mlm)": 10_000, "ckpt (mlm)" + AVERAGED: 10_000}}
    text = "\n".join(pretraining_sections(rows, results, tmp_path))
    averaged = next(line for line in text.splitlines() if line.startswith(f"| ckpt (mlm){AVERAGED} (vs no pretraining"))
    assert "within noise" in averaged and "better" not in averaged  # against the plain untrained row it would win
    systems = ["ckpt (mlm)", "ckpt (mlm)" + AVERAGED, "no pretraining", "no pretraining" + AVERAGED]
    assert reference_row("ckpt (mlm)" + AVERAGED, "no pretraining", systems) == ("no pretraining" + AVERAGED, False)
    assert reference_row("ckpt (mlm)" + AVERAGED, "ckpt (mlm)", systems) == ("ckpt (mlm)", True)
    assert reference_row("ckpt (mlm)" + AVERAGED, "no pretraining", systems[:3]) == ("no pretraining", False)
    welch_only = welch_verdict([0.70, 0.75, 0.80], [0.71, 0.76, 0.81], True)
    paired = welch_verdict([0.70, 0.75, 0.80], [0.71, 0.76, 0.81], True, paired=True)
    assert welch_only[0] == "within noise" and paired[0] == "worse"  # the same models, consistently 0.01 lower
