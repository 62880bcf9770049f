"""A benchmark's fine-tuning recipe (tasks/<benchmark>/recipe.yaml) stands where the command line is silent."""
import pytest

from polymask.cli import build_parser
from polymask.errors import ConfigError
from polymask.tasks.cli import finetune_config
from polymask.tasks.data.spec import task_names
from polymask.tasks.finetune.options import FinetuneConfig
from polymask.tasks.finetune.recipe import benchmark_recipe


def config(*argv: str, benchmark: str | None = "dna") -> FinetuneConfig:
    return finetune_config(build_parser().parse_args(["benchmark", "dna", "--checkpoint", "smiles-mlm-1.7m", *argv]),
                           benchmark)


def test_the_recipe_fills_what_the_command_line_leaves_out_and_yields_to_it():
    recipe = benchmark_recipe("dna")
    assert recipe and "dna/recipe" not in task_names("dna")
    assert config().model_dump() == FinetuneConfig(**recipe).model_dump()
    chosen = config("--lr", "5e-5", "--epochs", "2", "--set", "max_len=32")
    assert (chosen.lr, chosen.epochs, chosen.max_len, chosen.patience) == (5e-5, 2, 32, recipe["patience"])
    assert config(benchmark="moleculenet").lr == FinetuneConfig().lr  # no recipe: the defaults


def test_an_unknown_setting_in_a_recipe_names_the_file(tmp_path, monkeypatch):
    import polymask.tasks.finetune.recipe as recipe

    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "recipe.yaml").write_text("finetune: {lr: 1.0e-3, epoch: 3}\n")
    monkeypatch.setattr(recipe, "builtin_dir", lambda name: tmp_path)
    with pytest.raises(ConfigError, match=r"recipe.yaml: unknown fine-tuning settings \['epoch'\]"):
        benchmark_recipe("bench")
