"""benchmarks/moleculenet_recipe.py: the validation score that adopts a setting weighs ROC-AUC and RMSE tasks alike."""
import json

import pytest

from tests.test_rxnfp_folder import load_script

recipe = load_script("moleculenet_recipe")


def test_a_setting_is_scored_by_relative_validation_change_on_both_scales():
    metrics = {"esol": "rmse", "bace": "roc_auc"}
    best = {"esol": 1.0, "bace": 0.8}
    assert recipe.relative_score({"esol": 0.9, "bace": 0.8}, best, metrics) == pytest.approx(0.05)  # RMSE down 10%
    assert recipe.relative_score({"esol": 1.0, "bace": 0.72}, best, metrics) == pytest.approx(-0.05)  # AUC down 10%
    assert recipe.relative_score(best, best, metrics) == 0


def test_each_axis_starts_from_the_settings_used_so_far():
    named = [values for values in recipe.AXES.values() if values[0].keys() <= recipe.START.keys()]
    assert len(named) == 6 and all({**recipe.START, **values[0]} == recipe.START for values in named)
    assert recipe.AXES["augment"] == [{"augment": True, "test_time_average": True}]  # only a change from START
    assert recipe.row_name({"lr": 1e-3, "pooling": "cls"}) == "lr0.001-poolingcls"


def test_a_row_with_test_time_averaging_is_scored_by_its_averaged_predictions(tmp_path):
    rows = [{"system": "enc (mlm)", "task": "moleculenet/bace", "metric": "roc_auc", "roc_auc_mean": 0.70},
            {"system": "enc (mlm) + test-time average", "task": "moleculenet/bace", "metric": "roc_auc",
             "roc_auc_mean": 0.74}]
    (tmp_path / "results.json").write_text(json.dumps({"valid_rows": rows}))
    assert recipe.validation_means(tmp_path) == {"moleculenet/bace": 0.70}
    assert recipe.validation_means(tmp_path, averaged=True) == {"moleculenet/bace": 0.74}
