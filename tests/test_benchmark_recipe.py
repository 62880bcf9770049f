"""A benchmark's fine-tuning recipe (tasks/<benchmark>/recipe.yaml) stands where the command line is silent."""
import pytest

from polymask.benchmarking.cli import given_settings
from polymask.cli import build_parser
from polymask.errors import ConfigError
from polymask.finetune_config import FinetuneConfig
from polymask.tasks.data.spec import task_names
from polymask.tasks.finetune.recipe import benchmark_recipe, recipe_settings


def config(*argv: str, benchmark: str | None = "dna") -> FinetuneConfig:
    args = build_parser().parse_args(["benchmark", "dna", "--checkpoint", "smiles-mlm-1.7m", *argv])
    return recipe_settings(benchmark, given_settings(args))


def test_the_recipe_fills_what_the_command_line_leaves_out_and_yields_to_it():
    recipe = benchmark_recipe("dna")
    assert recipe and "dna/recipe" not in task_names("dna")
    assert config().model_dump() == FinetuneConfig(**recipe).model_dump()
    chosen = config("--lr", "5e-5", "--epochs", "2", "--set", "max_len=32")
    assert (chosen.lr, chosen.epochs, chosen.max_len, chosen.patience) == (5e-5, 2, 32, recipe["patience"])
    assert config(benchmark=None).lr == FinetuneConfig().lr  # no benchmark (a user's own table): the defaults
    moleculenet = config(benchmark="moleculenet")  # chosen on validation: docs/results/moleculenet-recipe/
    assert (moleculenet.lr, moleculenet.epochs, moleculenet.patience) == (1e-3, 30, 8)
    assert moleculenet.for_task("hiv").epochs == 10 and moleculenet.for_task("bace").epochs == 30


def test_a_recipe_setting_per_task_reaches_that_task_and_yields_to_an_explicit_one():
    recipe = benchmark_recipe("glue")
    chosen = config(benchmark="glue")
    assert chosen.for_task("sst2").lr == recipe["task_settings"]["sst2"]["lr"] != recipe["lr"]
    assert chosen.for_task("cola").lr == recipe["lr"] and chosen.for_task("cola") is chosen
    assert config("--lr", "5e-5", benchmark="glue").for_task("sst2").lr == 5e-5
    assert config("--set", "task_settings.cola.lr=2e-5", benchmark="glue").for_task("cola").lr == 2e-5
    longer = config("--set", "task_settings.mouse_0.epochs=40", "--set", "task_settings.mouse_0.patience=8")
    assert (longer.for_task("mouse_0").epochs, longer.for_task("mouse_0").patience) == (40, 8)
    assert config("--epochs", "2", "--set", "task_settings.mouse_0.patience=8").for_task("mouse_0").epochs == 2
    assert config("--epochs", "2").task_settings["tf_0"] == {"patience": 8}  # tasks sharing one YAML anchor
    assert config("--epochs", "40", "--patience", "8").task_settings == {}  # nothing per task is left


@pytest.mark.parametrize("settings, message", [
    ({"sst2": {"lr": -1}}, r"task_settings\.sst2\.lr: Input should be greater than 0"),
    ({"sst2": {"epoch": 3}}, r"task_settings\.sst2\.epoch: Extra inputs are not permitted"),
    ({"sst2": {"task_settings": {}}}, r"task_settings\.sst2: task_settings: set for the whole run"),
])
def test_a_wrong_setting_for_one_task_is_named_before_any_cell_runs(settings, message):
    with pytest.raises(ConfigError, match=message):
        recipe_settings(None, {"task_settings": settings})


def test_each_benchmark_cell_fine_tunes_at_its_task_s_learning_rate(tmp_path):
    from types import SimpleNamespace

    import polymask.benchmarking.systems as systems

    used = {}
    kind = SimpleNamespace(finetune=lambda task, encoder, tokenizer, modality, settings, *rest: used.update(
        {task.spec.name: settings.lr}) or {})
    run = systems._finetuned(lambda seed: None, None, None, config(benchmark="glue"), tmp_path, lambda folder: None)
    for name in ("sst2", "cola"):
        run(SimpleNamespace(spec=SimpleNamespace(name=name, key=f"glue/{name}", task_kind=kind)), 0, tmp_path, None)
    assert used == {"sst2": 1e-4, "cola": 3e-4}


def test_an_unknown_setting_in_a_recipe_names_the_file(tmp_path, monkeypatch):
    import polymask.tasks.finetune.recipe as recipe

    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "recipe.yaml").write_text("finetune: {lr: 1.0e-3, epoch: 3}\n")
    monkeypatch.setattr(recipe, "builtin_dir", lambda name: tmp_path)
    with pytest.raises(ConfigError, match=r"recipe.yaml: unknown fine-tuning settings \['epoch'\]"):
        benchmark_recipe("bench")


def test_a_given_rate_for_one_task_keeps_the_recipe_s_other_task_rates():
    recipe = benchmark_recipe("glue").get("task_settings", {})
    merged = recipe_settings("glue", {"task_settings": {"rte": {"lr": 3e-4}}}).task_settings
    assert merged == {**recipe, "rte": {"lr": 3e-4}}


def test_settings_that_hold_for_the_whole_run_are_refused_per_task():
    with pytest.raises(ConfigError, match=r"task_settings\.esol: extra_features, save_model: set for the whole run"):
        recipe_settings(None, {"task_settings": {"esol": {"save_model": False, "extra_features": ["morgan"]}}})


def test_a_given_per_task_setting_must_name_a_task_of_the_benchmark():
    with pytest.raises(ConfigError, match=r"task_settings names no task of moleculenet: esoll \(its tasks: .*esol"):
        recipe_settings("moleculenet", {"task_settings": {"esoll": {"lr": 1e-3}}})


def test_a_per_task_value_given_beats_a_global_value_given_which_beats_the_recipe_s_per_task_value():
    chosen = recipe_settings("glue", {"lr": 5e-5, "task_settings": {"rte": {"lr": 7e-5}}})
    assert (chosen.for_task("rte").lr, chosen.for_task("sst2").lr, chosen.for_task("cola").lr) == (7e-5, 5e-5, 5e-5)


def test_a_given_nested_field_clears_only_its_own_leaf_of_the_recipe_s_per_task_values(monkeypatch):
    import polymask.tasks.finetune.recipe as recipe

    monkeypatch.setattr(recipe, "benchmark_recipe", lambda name: {
        "task_settings": {"v1": {"span": {"max_answer_len": 10, "doc_stride": 64}, "lr": 1e-4}}})
    chosen = recipe.recipe_settings("squad", {"span": {"doc_stride": 48}}).for_task("v1")
    assert (chosen.span.max_answer_len, chosen.span.doc_stride, chosen.lr) == (10, 48, 1e-4)
