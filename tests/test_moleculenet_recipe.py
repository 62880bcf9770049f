"""benchmarks/moleculenet_recipe.py: the validation score that adopts a setting weighs ROC-AUC and RMSE tasks alike."""
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
    assert all({**recipe.START, **values[0]} == recipe.START for values in recipe.AXES.values())
    assert recipe.row_name({"lr": 1e-3, "pooling": "cls"}) == "lr0.001-poolingcls"
