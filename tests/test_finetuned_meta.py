"""A saved fine-tuned model's ``finetuned.json`` is read once into a validated ``FinetunedMeta``: what polymask wrote
before the reader was typed (tests/data/finetuned/) reads, writes back byte for byte, loads and predicts with what it
says; an earlier release's file loads with what its model was trained with; a wrong field in a user's folder is one
line naming the file and the field."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import polymask
from polymask import jsonio
from polymask.checkpoints.finetuned_meta import FinetunedMeta, read_finetuned_meta
from polymask.checkpoints.pretrained import write_manifest
from polymask.cli import main
from polymask.errors import CheckpointError
from polymask.model.encoder import Encoder
from polymask.resources import builtin_dir
from polymask.tasks.finetune.kinds import TASK_KINDS
from polymask.weights_io import save_weights
from tests.conftest import one_line_error

pytestmark = pytest.mark.usefixtures("one_torch_thread")
#: finetuned.json as polymask wrote it before the reader was typed: ESOL (regression, SMILES), SQuAD v2.0 (span, text)
FIXTURES = Path(__file__).parent / "data" / "finetuned"


def fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def saved_folder(folder: Path, raw: dict[str, Any]) -> tuple[Path, torch.nn.Module]:
    """A fine-tuned model folder around ``raw``: the weights of a seeded network of the kind and shape it states, the
    built-in tokenizer of its modality, a manifest; returns the folder and the network."""
    folder.mkdir()
    (folder / "finetuned.json").write_text(jsonio.dumps(raw, indent=1))
    meta = read_finetuned_meta(raw, folder / "finetuned.json")
    shutil.copy(builtin_dir("tokenizers") / meta.modality.name / "tokenizer.json", folder)
    torch.manual_seed(0)
    encoder = Encoder(meta.encoder.config, meta.encoder.vocab_size)
    network = TASK_KINDS.get(meta.task.kind).network(encoder, meta.task.n_outputs, meta.pooling, 0.0)
    save_weights(network.state_dict(), folder / "model.safetensors")
    write_manifest(folder, {"format": "polymask-finetuned"})
    return folder, network.eval()


@pytest.mark.parametrize("name", ["esol", "squad"])
def test_a_file_written_before_the_typed_reader_reads_and_writes_back_byte_for_byte(name):
    path = FIXTURES / f"{name}.json"
    meta = read_finetuned_meta(json.loads(path.read_text()), path)
    assert isinstance(meta, FinetunedMeta)
    assert jsonio.dumps(meta.model_dump(mode="json"), indent=1) == path.read_text()  # the writer's format is unchanged


def test_a_saved_regression_model_predicts_with_the_head_pooling_and_normalisation_it_states(tmp_path):
    raw = fixture("esol")
    folder, network = saved_folder(tmp_path / "esol", raw)
    model = polymask.load_model(folder, device="cpu")
    assert model.meta.task.key == "moleculenet/esol" and model.meta.pooling == "mean" and model.max_len == 64
    records = ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1"]
    predicted = model.predict(records)
    ids = model.encode_inputs([(record,) for record in records], [None] * len(records)).ids
    with torch.no_grad():
        logits = np.array([network(torch.tensor([row]), torch.ones(1, len(row), dtype=torch.long))[0, 0].item()
                           for row in ids])
    mean, std = raw["normalisation"]["mean"][0], raw["normalisation"]["std"][0]
    assert list(predicted.columns) == ["predicted_measured log solubility in mols per litre", "reason"]
    assert np.allclose(predicted.iloc[:, 0].to_numpy(), logits * std + mean, atol=1e-5)


def test_a_saved_span_model_loads_and_answers_from_the_context(tmp_path):
    folder, _ = saved_folder(tmp_path / "squad", fixture("squad"))
    model = polymask.load_model(folder, device="cpu")
    assert model.meta.span.allow_no_answer and model.meta.span.doc_stride == 24
    predicted = model.predict([("Where did the cat sit?", "The cat sat on the mat.")])
    assert list(predicted.columns) == ["predicted_answer", "no_answer_score", "reason"]


def test_an_earlier_release_s_file_loads_with_what_its_model_was_trained_with():
    """The first fine-tuned models (format 1, before invariances, file layouts, molecular features, the embedding
    norm and the exact GELU) had none of these fields and a per-task learning rate in their settings."""
    raw = fixture("esol")
    for key in ("invariant_to", "delimiter", "quoting", "column_names"):
        del raw["task"][key]
    del raw["extra_features"]
    for key in ("embed_norm", "activation"):
        del raw["encoder"]["config"][key]
    raw["finetune"]["task_lr"] = {}
    meta = read_finetuned_meta(raw, FIXTURES / "esol.json")
    task = meta.task
    assert (task.invariant_to, task.delimiter, task.quoting, task.column_names) == ([], ",", True, None)
    assert meta.extra_features is None
    assert (meta.encoder.config.embed_norm, meta.encoder.config.activation) == (False, "gelu_tanh")
    assert "task_lr" not in meta.finetune.model_dump()


def _set(raw: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, key = dotted.split(".")
    for parent in parents:
        raw = raw[parent]
    raw[key] = value


@pytest.mark.parametrize("field, value, words", [
    ("task.n_outputs", 0, "task.n_outputs: Input should be greater than or equal to 1 (got 0)"),
    ("pooling", "max", "pooling: Input should be 'cls' or 'mean'"),
    ("colour", "blue", "colour: Extra inputs are not permitted"),
    ("finetune.epochs", -1, "finetune.epochs: Input should be greater than or equal to 1"),
    ("modality.canonical", "maybe", "modality.canonical: Input should be a valid boolean"),
    ("modality.name", "protein", "the model's modality 'protein' is not registered; import the module"),
    ("format_version", 2, "format 'polymask-finetuned' version 2; this polymask reads polymask-finetuned up to 1"),
    ("task.input_columns", [], "task.input_columns: List should have at least 1 item"),
    ("normalisation", {"mean": [0.0]}, "normalisation: needs mean and std, got ['mean']"),
    ("normalisation.mean", [0.0, 1.0], "normalisation: 2 means and 1 stds for 1 outputs"),
    ("normalisation.std", [float("nan")], "normalisation: means must be finite numbers and stds positive ones"),
    ("normalisation.std", [0.0], "normalisation: means must be finite numbers and stds positive ones"),
    ("pooling", "cls", "pooling cls differs from finetune.pooling mean"),
])
def test_a_wrong_field_is_one_line_naming_the_file_and_the_field(field, value, words):
    raw = fixture("esol")
    _set(raw, field, value)
    path = FIXTURES / "esol.json"
    with pytest.raises(CheckpointError) as error:
        read_finetuned_meta(raw, path)
    assert str(error.value).startswith(f"{path}: ") and words in str(error.value) and "\n" not in str(error.value)


def test_a_missing_field_is_named():
    raw = fixture("esol")
    del raw["max_len"]
    with pytest.raises(CheckpointError, match="esol.json: max_len: Field required$"):
        read_finetuned_meta(raw, FIXTURES / "esol.json")


def predict_after_edit(tmp_path: Path, folder: Path, text: str) -> int:
    """``polymask predict`` on ``folder`` after its finetuned.json was replaced by ``text`` (the manifest rewritten,
    as a hand edit that keeps the folder loadable would); returns the exit code."""
    (folder / "finetuned.json").write_text(text)
    (folder / "manifest.json").unlink()
    write_manifest(folder, {"format": "polymask-finetuned"})
    records = tmp_path / "records.csv"
    records.write_text("smiles\nCCO\n")
    return main(["predict", "--model", str(folder), "--data", str(records), "--out", str(tmp_path / "p.csv")])


def test_predict_on_a_folder_with_a_wrong_field_says_so_in_one_line(tmp_path, capsys):
    raw = fixture("esol")
    raw["task"]["n_outputs"] = 0
    folder, _ = saved_folder(tmp_path / "broken", {**raw, "task": {**raw["task"], "n_outputs": 1}})
    code = predict_after_edit(tmp_path, folder, jsonio.dumps(raw, indent=1))
    one_line_error(capsys, code, f"{folder}/finetuned.json", "task.n_outputs")


def test_predict_on_a_folder_whose_normalisation_is_nan_refuses_it_in_one_line(tmp_path, capsys):
    """NaN in a hand-edited finetuned.json (Python's json reads it) would make every prediction silently empty."""
    raw = fixture("esol")
    folder, _ = saved_folder(tmp_path / "nan", raw)
    raw["normalisation"]["std"] = [float("nan")]
    code = predict_after_edit(tmp_path, folder, json.dumps(raw, indent=1))  # NaN as Python writes it
    one_line_error(capsys, code, f"{folder}/finetuned.json", "normalisation: means must be finite")
    assert not (tmp_path / "p.csv").exists()


def test_weights_that_do_not_fit_the_stated_encoder_are_one_line(tmp_path, capsys):
    """torch names every mismatched tensor on a line of its own; the error keeps the first."""
    raw = fixture("esol")
    folder, _ = saved_folder(tmp_path / "wider", raw)
    raw["encoder"]["config"]["d_model"] = 32
    code = predict_after_edit(tmp_path, folder, jsonio.dumps(raw, indent=1))
    one_line_error(capsys, code, str(folder), "weights do not fit the configuration finetuned.json states",
                   "size mismatch for encoder.")


def test_a_span_model_s_window_settings_must_agree_with_those_it_was_fine_tuned_with():
    raw = fixture("squad")
    raw["span"]["doc_stride"] += 8
    with pytest.raises(CheckpointError, match=r"squad.json: span \{.*\} differs from finetune.span"):
        read_finetuned_meta(raw, FIXTURES / "squad.json")


@pytest.mark.parametrize("kind, task_edit, words", [
    ("regression", {"label_names": ["measured log solubility in mols per litre", "logp"]},
     "1 outputs for 2 label columns"),
    ("binary", {"class_names": ["yes"]}, "a binary task names its two classes"),
    ("multiclass", {"class_names": ["a", "b", "c"]}, "3 class_names for 1 outputs"),
])
def test_outputs_labels_and_classes_that_disagree_in_number_are_one_line(tmp_path, capsys, kind, task_edit, words):
    """An edit that keeps the weights loadable but names more (or fewer) classes or labels than the head has outputs
    would otherwise end in an IndexError, or in prediction columns under the wrong names."""
    raw = fixture("esol")
    raw["normalisation"] = raw["normalisation"] if kind == "regression" else None
    raw["task"] = {**raw["task"], "kind": kind, "problem_type": TASK_KINDS.get(kind).problem_type,
                   "class_names": [] if kind == "regression" else ["0", "1"]}
    folder, _ = saved_folder(tmp_path / kind, raw)
    raw["task"].update(task_edit)
    code = predict_after_edit(tmp_path, folder, jsonio.dumps(raw, indent=1))
    one_line_error(capsys, code, f"{folder}/finetuned.json", "task:", words)
    assert not (tmp_path / "p.csv").exists()
