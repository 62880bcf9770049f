"""Options generated from the config models (``polymask.cli_options``): a default is written once, on the field,
and the command line hands on only what the user gave."""
import argparse
from pathlib import Path
from typing import Literal

import pytest
from pydantic import Field

from conftest import sub_parsers

from polymask.analysis.masked_inputs import MaskedInputSettings
from polymask.analysis.rank import RankSettings
from polymask.cli import build_parser, main
from polymask.cli_options import add_model_options, given_fields, settings_from, shown_default
from polymask.config import DataConfig, TrainConfig
from polymask.encoder_config import EncoderConfig
from polymask.errors import ConfigError
from polymask.finetune_config import FinetuneConfig
from polymask.schema import StrictModel

MODELS = {model.__name__: model for model in (FinetuneConfig, EncoderConfig, TrainConfig, DataConfig, RankSettings,
                                              MaskedInputSettings)}


def _generated_options():
    for path, parser in sub_parsers(build_parser()):
        for action in parser._actions:
            if "." in action.dest:
                yield " ".join(path), action


def test_every_generated_option_shows_its_field_s_default_and_description():
    """The help of each generated option is its field's description and the field's own default: no option
    repeats a default of its own (the parser's is None: not given)."""
    seen = set()
    for verb, action in _generated_options():
        model_name, name = action.dest.split(".", 1)
        assert model_name in MODELS, f"{verb} {action.option_strings}: add {model_name} to MODELS"
        field = MODELS[model_name].model_fields[name]
        default = field.get_default(call_default_factory=True)
        assert action.default is None, (verb, action.option_strings)
        assert action.help.startswith(f"{field.description} (default: {shown_default(default)}"), (verb, action.help)
        seen.add((verb, action.dest))
    assert {("finetune", "FinetuneConfig.lr"), ("benchmark", "FinetuneConfig.save_model"),
            ("compare", "FinetuneConfig.epochs"), ("bench", "EncoderConfig.preset"),
            ("bench", "TrainConfig.batch_size"),
            ("bench", "DataConfig.max_len"), ("analyze rank", "RankSettings.tau"),
            ("analyze semantics", "MaskedInputSettings.seed")} <= seen


def _finetune(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["finetune", "--task", "moleculenet/esol", "--checkpoint", "x", *argv])


def test_given_fields_holds_only_what_the_command_line_gave():
    assert given_fields(_finetune(), FinetuneConfig) == {}
    args = _finetune("--lr", "5e-5", "--no-augment", "--freeze", "--no-save-models", "--max-len", "64",
                     "--pooling", "cls")
    assert given_fields(args, FinetuneConfig) == {"lr": 5e-5, "augment": False, "freeze_encoder": True,
                                                  "save_model": False, "max_len": 64, "pooling": "cls"}
    assert given_fields(args, TrainConfig) == {}  # another model's options, or the verb's own, never mix in
    bench = build_parser().parse_args(["bench", "--max-len", "64", "--num-proc", "3"])
    assert given_fields(bench, DataConfig) == {"max_len": 64}  # --num-proc is the bench's own, not data.num_proc
    assert settings_from(bench, TrainConfig).batch_size == TrainConfig().batch_size


class Toy(StrictModel):
    count: int = Field(3, ge=1, description="how many, at 100%")
    rate: float | None = Field(None, description="a rate; none: the built-in one")
    kind: Literal["a", "b"] = Field("a", description="which")
    on: bool = Field(True, description="switched on")
    where: Path = Field(Path("here"), description="a folder")
    names: list[str] = Field(default_factory=list, description="not an option")


def test_an_option_takes_its_type_choices_and_switch_from_the_field():
    parser = argparse.ArgumentParser()
    add_model_options(parser, Toy, ["count", "rate", "kind", "on", "where"], stand_in=" or the recipe")
    args = parser.parse_args(["--count", "2", "--rate", "0.5", "--kind", "b", "--no-on", "--where", "there"])
    assert given_fields(args, Toy) == {"count": 2, "rate": 0.5, "kind": "b", "on": False, "where": Path("there")}
    with pytest.raises(SystemExit):
        parser.parse_args(["--kind", "c"])
    shown = " ".join(parser.format_help().split())
    assert "how many, at 100% (default: 3 or the recipe)" in shown
    assert "a rate; none: the built-in one (default: none or the recipe)" in shown
    with pytest.raises(TypeError, match="--set"):
        add_model_options(parser, Toy, ["names"])
    with pytest.raises(ConfigError, match="count: Input should be greater than or equal to 1"):
        settings_from(parser.parse_args(["--count", "0"]), Toy)


def test_a_wrong_option_value_fails_in_one_line(capsys):
    assert main(["bench", "--batch-size", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["polymask: error: invalid option: batch_size: Input should be greater than or equal to 1 (got 0)"]


def test_plugin_is_one_option_everywhere():
    helps = {action.help.split(" registering ")[0] for _, parser in sub_parsers(build_parser())
             for action in parser._actions if "--plugin" in action.option_strings}
    assert helps == {"module or .py file"}
