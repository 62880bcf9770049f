"""One YAML reader: run recipes, task specs and benchmark recipes are read by ``yamlio.read_yaml``, and a file that is
not YAML, or not a mapping, is one line naming the file and where YAML stopped."""
from __future__ import annotations

from pathlib import Path
import pytest

from polymask.cli import main
from polymask.config import load_yaml
from polymask.errors import ConfigError
from polymask.tasks.data.spec import load_task_spec
from polymask.tasks.finetune import recipe
from polymask.yamlio import read_yaml
from tests.conftest import one_line_error

BROKEN = "modality: smiles\ntrain: {lr: 1e-3, steps: [1, 2}\n"  # the flow sequence is never closed


def read(reader: str, path: Path, monkeypatch: pytest.MonkeyPatch) -> object:
    """``path`` read as ``reader`` reads it (a benchmark recipe: ``<tasks>/<benchmark>/recipe.yaml``)."""
    if reader == "benchmark recipe":
        monkeypatch.setattr(recipe, "builtin_dir", lambda name: path.parent.parent)
        return recipe.benchmark_recipe(path.parent.name)
    return load_yaml(path) if reader == "run config" else load_task_spec(str(path))


@pytest.mark.parametrize("reader", ["run config", "task spec", "benchmark recipe"])
def test_each_yaml_file_names_itself_and_the_line_where_it_stops(reader, tmp_path, monkeypatch):
    path = tmp_path / "toy" / "recipe.yaml"
    path.parent.mkdir()
    path.write_text(BROKEN)
    with pytest.raises(ConfigError) as error:
        read(reader, path, monkeypatch)
    assert str(error.value) == (f"{path}, line 2, column 31: not valid YAML: while parsing a flow sequence: "
                                f"expected ',' or ']', but got '}}'")


def test_a_file_that_is_not_a_mapping_says_so(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- modality: smiles\n")
    with pytest.raises(ConfigError, match=r"list.yaml: a run config must be a mapping at the top level, not a list$"):
        read_yaml(path, "a run config")
    path.write_text("# nothing yet\n")
    assert read_yaml(path, "a run config") == {}


def test_the_command_line_reports_a_broken_recipe_in_one_line(tmp_path, capsys):
    path = tmp_path / "recipe.yaml"
    path.write_text(BROKEN)
    one_line_error(capsys, main(["train", "--config", str(path)]), str(path), "line 2, column 31", "not valid YAML")


def test_a_file_that_is_not_text_is_one_line(tmp_path):
    path = tmp_path / "task.yaml"
    path.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(ConfigError, match=r"task.yaml: not a YAML text file \(byte 0 is not UTF-8\)$"):
        load_task_spec(str(path))


@pytest.mark.parametrize("verb", [["train"], ["finetune", "--task", "moleculenet/esol", "--checkpoint", "run"]])
def test_a_set_value_that_is_not_yaml_is_one_line(verb, capsys):
    """``--set key=value`` values are parsed as YAML: an unclosed list was a ParserError traceback."""
    one_line_error(capsys, main([*verb, "--set", "train.lr=[1"]), "--set train.lr=[1", "not valid YAML",
                   "while parsing a flow sequence")
