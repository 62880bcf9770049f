"""``--plugin``: a faulty plugin ends in one line naming its file and line; a plugin named twice runs once; a plugin
file named like a library does not hide it."""
import importlib.util
import sys
from pathlib import Path

import pytest

import polymask
from conftest import one_line_error
from polymask.cli import main
from polymask.errors import PolymaskError
from polymask.modalities import MODALITIES
from polymask.objectives import OBJECTIVES
from polymask.plugins import load_plugins

WIDGET = """import polymask


@polymask.register_modality("widget")
class Widget(polymask.Modality):
    name = "widget"
"""


@pytest.fixture
def clean_registry():
    before = set(sys.modules)
    yield
    MODALITIES.unregister("widget")
    for name in set(sys.modules) - before:
        del sys.modules[name]


@pytest.mark.parametrize("source, where, error", [
    ("import polymask\ndef f(:\n    pass\n", "line 2", "SyntaxError: invalid syntax"),
    ("x = 1\nraise RuntimeError('no licence file')\n", "line 2", "RuntimeError: no licence file"),
    ("import no_such_module_for_polymask\n", "line 1", "ModuleNotFoundError: No module named"),
    ('import polymask\n\n\n@polymask.register_modality("smiles")\nclass Mine(polymask.Modality):\n    name = "smiles"\n',
     "line 4", "ValueError: modality 'smiles' is already registered"),
])
def test_a_faulty_plugin_file_ends_in_one_line_naming_it(tmp_path, capsys, clean_registry, source, where, error):
    plugin = tmp_path / "faulty.py"
    plugin.write_text(source)
    assert main(["train", "--plugin", str(plugin), "--modality", "smiles", "--objective", "mlm"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"polymask: error: plugin {plugin} failed at import ({plugin}, {where}): {error}")
    assert "faulty" not in sys.modules


def test_a_plugin_named_twice_runs_once_and_a_second_registration_is_one_error(tmp_path, clean_registry):
    plugin = tmp_path / "widget.py"
    plugin.write_text(WIDGET)
    load_plugins([str(plugin), str(tmp_path / "." / "widget.py")])
    first = MODALITIES.get("widget")
    (tmp_path / "copy.py").write_text(WIDGET)
    with pytest.raises(PolymaskError, match=r"plugin .*copy.py failed at import \(.*copy.py, line 4\): ValueError: "
                                            r"modality 'widget' is already registered"):
        load_plugins([str(tmp_path / "copy.py")])
    assert MODALITIES.get("widget") is first


def test_a_plugin_file_named_like_a_library_does_not_hide_it(tmp_path, clean_registry):
    import tokenizers  # noqa: F401  (a library the plugin itself imports)

    plugin = tmp_path / "tokenizers.py"
    plugin.write_text("from tokenizers import Tokenizer\n" + WIDGET)
    load_plugins([str(plugin)])
    assert MODALITIES.get("widget").__module__ != "tokenizers"
    assert sys.modules["tokenizers"].__file__ != str(plugin)


def test_a_missing_plugin_module_is_named(capsys):
    assert main(["train", "--plugin", "no_such_plugin_module.sub", "--modality", "smiles"]) == 2
    assert capsys.readouterr().err.strip() == ("polymask: error: cannot import plugin module 'no_such_plugin_module.sub': "
                                               "No module named 'no_such_plugin_module'")


@pytest.fixture
def protein():
    """docs/examples/protein.py, registered as a --plugin registers it; unregistered afterwards."""
    spec = importlib.util.spec_from_file_location("protein_example",
                                                  Path(__file__).parents[1] / "docs" / "examples" / "protein.py")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    yield
    MODALITIES.unregister("protein")


@pytest.mark.integration
def test_a_run_whose_plugin_is_not_loaded_says_to_pass_it(protein, tmp_path, capsys, make_config, one_torch_thread):
    config = make_config("protein", tmp_path / "run", max_steps=2, threads=1)
    config["data"].update(paths=[str(Path(__file__).parent / "data" / "proteins.fasta")])
    polymask.train(config)
    capsys.readouterr()  # the run's own lines
    MODALITIES.unregister("protein")
    records = tmp_path / "records.txt"
    records.write_text("MKVLLA\n")
    run = str(tmp_path / "run")
    for argv in (["embed", "--checkpoint", run, "--data", str(records), "--out", str(tmp_path / "e.npy")],
                 ["analyze", "rank", "--checkpoint", run, "--data", str(records)],
                 ["export", "--checkpoint", run, "--out", str(tmp_path / "hf")]):
        line = one_line_error(capsys, main(argv), "polymask.json")
        assert line.endswith("the run's modality 'protein' is not registered; import the module that registers it "
                             "first (--plugin on the command line)"), line


@pytest.mark.integration
def test_an_objective_returning_a_bare_loss_is_one_error(tmp_path, make_config, small_smiles_file, one_torch_thread):
    class BareConfig(polymask.ObjectiveConfig):
        name: str = "bare"

    class Bare(polymask.Objective):
        Config = BareConfig

        def forward(self, batch, generator):
            return self.encoder(batch.input_ids, attention_mask=batch.attention_mask).float().pow(2).mean()

    OBJECTIVES.register("bare")(Bare)
    try:
        config = make_config("smiles", tmp_path / "run", max_steps=1, threads=1)
        config.update(objective={"name": "bare"})
        config["data"]["paths"] = [str(small_smiles_file)]
        with pytest.raises(PolymaskError, match=r"^objective 'bare': forward returned Tensor, not an ObjectiveOutput "
                                                r"\(loss, predictions, correct\); polymask.objectives.token_loss"):
            polymask.train(config)
    finally:
        OBJECTIVES.unregister("bare")
