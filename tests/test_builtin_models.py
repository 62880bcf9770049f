"""Built-in pretrained models: made from a run (weights only, float16), listed by `polymask models`, and usable
by name wherever a checkpoint is asked for, loading as float32 under the usual checks."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import one_line_error
from safetensors.torch import load_file

import polymask
from polymask import builtin_models
from polymask.builtin_models import CARD, FACTS, PRETRAINED_ENV
from polymask.checkpoints.pretrained import read_checkpoint
from polymask.cli import main
from polymask.errors import CheckpointError
from polymask.export.builtin import make_builtin, stored_weights

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end

NAME = "smiles-tiny-test"


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory, tiny_smiles_run: Path) -> Path:
    """A model zoo folder holding NAME, made from the tiny SMILES run in float16."""
    root = tmp_path_factory.mktemp("zoo")
    make_builtin(tiny_smiles_run, root, NAME, "float16", corpus="300 molecules of the built-in corpus")
    return root


@pytest.fixture(autouse=True)
def on_search_path(zoo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The zoo on $POLYMASK_PRETRAINED_DIR; the package's own folder replaced by an empty one."""
    monkeypatch.setenv(PRETRAINED_ENV, str(zoo))
    monkeypatch.setattr(builtin_models, "PACKAGE_DIR", tmp_path / "package")


def test_made_folder_holds_weights_only_in_float16(zoo, tiny_smiles_run):
    folder = zoo / NAME
    assert sorted(path.name for path in folder.iterdir()) == sorted(
        [CARD, FACTS, "encoder.json", "manifest.json", "model.safetensors", "polymask.json", "tokenizer.json",
         "tokenizer_config.json"])
    assert {tensor.dtype for tensor in load_file(str(folder / "model.safetensors")).values()} == {torch.float16}
    facts = json.loads((folder / FACTS).read_text())
    original = read_checkpoint(tiny_smiles_run)
    assert facts == {"modality": "smiles", "objective": "mlm", "corpus": "300 molecules of the built-in corpus",
                     "parameters": sum(p.numel() for p in original.build_encoder().parameters()),
                     "preset": "tiny", "dtype": "float16", "step": 3,
                     "tokens": original.pretraining_tokens()}
    assert facts["tokens"] > 0
    manifest = json.loads((folder / "manifest.json").read_text())
    assert set(manifest["files"]) == {path.name for path in folder.iterdir()} - {"manifest.json"}
    assert f"polymask.load_checkpoint(\"{NAME}\")" in (folder / CARD).read_text()


def test_models_lists_it(capsys):
    assert main(["models"]) == 0
    line, = capsys.readouterr().out.splitlines()
    assert line.startswith(f"{NAME}  smiles  mlm  300 molecules of the built-in corpus  ")
    assert line.endswith(" MB") and "K params" in line


def test_models_without_any_says_so_in_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv(PRETRAINED_ENV, str(tmp_path / "empty"))
    assert main(["models"]) == 0
    assert capsys.readouterr().out.startswith("no built-in model is installed")


def test_load_by_name_gives_float32_weights(zoo, tiny_smiles_run):
    checkpoint = polymask.load_checkpoint(NAME)
    original = read_checkpoint(tiny_smiles_run)
    assert checkpoint.name == NAME and checkpoint.folder == zoo / NAME
    for key, tensor in original.weights.items():
        assert checkpoint.weights[key].dtype == torch.float32
        assert torch.equal(checkpoint.weights[key], tensor.half().float()), key
    checkpoint.build_encoder()


def test_an_existing_path_wins_over_a_name(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / NAME).mkdir()
    with pytest.raises(CheckpointError, match="holds no checkpoint"):
        read_checkpoint(NAME)


def test_checksums_still_checked(zoo, monkeypatch, tmp_path):
    copy = tmp_path / "zoo"
    shutil.copytree(zoo, copy)
    with open(copy / NAME / "model.safetensors", "r+b") as handle:
        handle.seek(-1, 2)
        handle.write(b"\x00" if handle.read(1) != b"\x00" else b"\x01")
    monkeypatch.setenv(PRETRAINED_ENV, str(copy))
    with pytest.raises(CheckpointError, match="model.safetensors is corrupt"):
        read_checkpoint(NAME)


def test_unknown_name_is_one_line_naming_the_builtin_ones(capsys):
    code = main(["finetune", "--task", "moleculenet/bbbp", "--checkpoint", "smiles-tiny-tset"])
    one_line_error(capsys, code, "checkpoint not found: smiles-tiny-tset", f"did you mean '{NAME}'",
                   f"built-in models: {NAME}")


def test_a_builtin_model_cannot_be_resumed():
    with pytest.raises(CheckpointError, match="cannot be resumed"):
        polymask.train(resume=NAME)


def test_finetune_by_name_names_the_row_after_it(tmp_path, capsys):
    out = tmp_path / "finetune"
    assert main(["finetune", "--task", "moleculenet/bbbp", "--checkpoint", NAME, "--epochs", "1",
                 "--max-train-examples", "48", "--max-valid-examples", "24", "--max-test-examples", "24",
                 "--max-len", "64", "--no-save-models", "--out", str(out), "--quiet"]) == 0
    cell, = json.loads((out / "results.json").read_text())["cells"]
    assert cell["system"] == f"{NAME} (mlm)"


def test_embed_by_name(tmp_path, capsys):
    data = tmp_path / "molecules.smi"
    data.write_text("CCO\nc1ccccc1\nCC(=O)O\n")
    assert main(["embed", "--checkpoint", NAME, "--data", str(data), "--out", str(tmp_path / "x.npy"), "--quiet"]) == 0
    assert np.load(tmp_path / "x.npy").shape == (3, 64)


def test_models_add_command(tiny_smiles_run, tmp_path, capsys):
    out = tmp_path / "mine"
    args = ["models", "add", str(tiny_smiles_run), "--name", "mine", "--dtype", "bfloat16", "--out", str(out)]
    assert main(args) == 0
    assert capsys.readouterr().out.startswith("mine  smiles  mlm  molecules.smi  ")
    assert {t.dtype for t in load_file(str(out / "mine" / "model.safetensors")).values()} == {torch.bfloat16}
    assert json.loads((out / "mine" / FACTS).read_text())["dtype"] == "bfloat16"
    one_line_error(capsys, main(args), "exists", "--overwrite")
    assert main([*args, "--overwrite", "--dtype", "float32"]) == 0


def test_float16_overflow_is_refused():
    with pytest.raises(CheckpointError, match="beyond float16's range"):
        stored_weights({"encoder.w": torch.tensor([1e6])}, "float16")
