"""A Hugging Face folder that transformers would refuse or misread ends in one line naming what is missing and how
to fix it, in every verb that loads one (finetune, benchmark, embed), before any model is loaded."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest

from polymask.checkpoints.hf_folder_check import check_hf_folder
from polymask.cli import main
from polymask.errors import CheckpointError

BERT_CONFIG = {"model_type": "bert", "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
               "intermediate_size": 16, "vocab_size": 8}


def folder_of(root: Path, files: dict[str, str]) -> Path:
    """A folder holding ``files`` (name -> text); the weights' contents never matter to the check."""
    folder = root / "hf-folder"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def without_model_type(root: Path) -> Path:  # rxnfp's folder as shipped, with a tokenizer beside it
    config = {key: value for key, value in BERT_CONFIG.items() if key != "model_type"}
    return folder_of(root, {"config.json": json.dumps(config), "pytorch_model.bin": "", "tokenizer.json": "{}"})


def vocab_only(root: Path) -> Path:  # transformers would build a lower-casing BERT WordPiece from vocab.txt
    return folder_of(root, {"config.json": json.dumps(BERT_CONFIG), "model.safetensors": "", "vocab.txt": "[PAD]\nC\n"})


def vocab_and_unnamed_tokenizer(root: Path) -> Path:  # a tokenizer_config.json naming no class: the same guess
    return folder_of(root, {"config.json": json.dumps(BERT_CONFIG), "model.safetensors": "", "vocab.txt": "[PAD]\nC\n",
                            "tokenizer_config.json": json.dumps({"model_max_length": 512})})


def no_weights(root: Path) -> Path:
    return folder_of(root, {"config.json": json.dumps(BERT_CONFIG), "tokenizer.json": "{}"})


def broken_config(root: Path) -> Path:
    return folder_of(root, {"config.json": "{\"model_type\": ", "model.safetensors": "", "tokenizer.json": "{}"})


BROKEN: list[tuple[Callable[[Path], Path], str]] = [
    (without_model_type, "config.json has no model_type; add \"model_type\" naming its architecture (\"bert\" for a "
                         "BERT), or convert an rxnfp folder with benchmarks/rxnfp_folder.py"),
    (vocab_only, ": no tokenizer (tokenizer.json, or a tokenizer_config.json naming its tokenizer_class) "
                 "(transformers would build its model type's default tokenizer from vocab.txt"),
    (vocab_and_unnamed_tokenizer, ": no tokenizer (tokenizer.json, or a tokenizer_config.json naming its "
                                  "tokenizer_class) (transformers would build its model type's default tokenizer"),
    (no_weights, ": no weights (model.safetensors or "),
    (broken_config, "config.json: unreadable ("),
]


@pytest.mark.parametrize("make, message", BROKEN)
def test_the_check_names_what_is_missing(tmp_path, make, message):
    with pytest.raises(CheckpointError) as caught:
        check_hf_folder(make(tmp_path))
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_complete_folder_passes(tmp_path):
    check_hf_folder(folder_of(tmp_path, {"config.json": json.dumps(BERT_CONFIG), "model.safetensors": "",
                                         "tokenizer.json": "{}", "tokenizer_config.json": "{}"}))


VERBS = {
    "finetune": lambda folder, root: ["finetune", "--task", "moleculenet/esol", "--checkpoint", str(folder),
                                      "--out", str(root / "out"), "--quiet"],
    "benchmark": lambda folder, root: ["benchmark", "moleculenet", "--checkpoint", str(folder), "--tasks", "esol",
                                       "--out", str(root / "out"), "--quiet"],
    "embed": lambda folder, root: ["embed", "--checkpoint", str(folder), "--modality", "smiles",
                                   "--data", str(root / "molecules.smi"), "--out", str(root / "out" / "x.npy"),
                                   "--quiet"],
}


@pytest.mark.integration  # runs the command line end to end
@pytest.mark.parametrize("verb", sorted(VERBS))
@pytest.mark.parametrize("make, message", BROKEN[:2])
def test_every_verb_refuses_in_one_line(tmp_path, capsys, verb, make, message):
    folder = make(tmp_path)
    (tmp_path / "molecules.smi").write_text("CCO\nc1ccccc1O\n")
    assert main(VERBS[verb](folder, tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"polymask: error: {folder}") and message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_a_hugging_face_folder_without_config_json_is_told_so(tmp_path):
    from polymask.checkpoints.pretrained import read_checkpoint

    folder = folder_of(tmp_path, {"model.safetensors": "", "tokenizer.json": "{}", "tokenizer_config.json": "{}"})
    with pytest.raises(CheckpointError, match=r"no manifest.json\); if it is a Hugging Face model folder, its "
                                              r"config.json is missing"):
        read_checkpoint(folder)


@pytest.mark.parametrize("make, words", [
    (lambda root: root / "absent", "checkpoint not found: {}"),
    (lambda root: folder_of(root, {"model.safetensors": ""}), "--modality is for a Hugging Face folder (config.json); "
                                                                "{} has no config.json"),
])
def test_embed_with_modality_names_what_the_folder_lacks(tmp_path, capsys, make, words):
    folder = make(tmp_path)
    (tmp_path / "molecules.smi").write_text("CCO\n")
    assert main(["embed", "--checkpoint", str(folder), "--modality", "smiles", "--data",
                 str(tmp_path / "molecules.smi"),
                 "--out", str(tmp_path / "x.npy"), "--quiet"]) == 2
    assert capsys.readouterr().err == f"polymask: error: {words.format(folder)}\n"
