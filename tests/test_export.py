"""`polymask export`: a folder that transformers alone loads, reproducing polymask's encoder and heads."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import torch
from conftest import tiny_config
from hf_roundtrip import reference_case, run_blocked

from polymask.checkpoints.finetuned_meta import SavedTask
from polymask.checkpoints.pretrained import read_checkpoint
from polymask.cli import main
from polymask.data.batching import Batch
from polymask.errors import PolymaskError
from polymask.export.hf import REMOTE_DIR, export_checkpoint, write_export
from polymask.export.hf_remote.modeling_polymask import (
    PolymaskEsmForSequenceClassification,
    PolymaskForSequenceClassification,
    PolymaskModel,
)
from polymask.export.layout import sequence_head
from polymask.export.model_card import card_facts
from polymask.export.samples import encode_padded, sample_texts
from polymask.model.heads import SequencePredictor
from polymask.training.trainer import train

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end

LEGACY_RUN = Path(__file__).parent / "data" / "legacy_run"  # SMILES MLM written before embed_norm existed
# Every objective on every modality once; each objective with and without the embedding LayerNorm.
CASES = [("smiles", "mlm", True), ("smiles", "maelm", False), ("smiles", "exlm", True),
         ("text", "mlm", False), ("text", "maelm", True), ("text", "exlm", False),
         ("dna", "mlm", True), ("dna", "maelm", False), ("dna", "exlm", True)]
# What `AutoModel` / `AutoModelForMaskedLM` build: the encoder is native ESM (exact GELU, 1D rotary) except
# for ExLM's 2D rotary positions and the legacy run's tanh GELU; MAE-LM's decoder path stays remote code.
CLASSES = {"mlm": ("EsmModel", "EsmForMaskedLM"), "maelm": ("EsmModel", "PolymaskEsmMaeForMaskedLM"),
           "exlm": ("PolymaskModel", "PolymaskForMaskedLM"), "legacy": ("PolymaskModel", "PolymaskForMaskedLM")}


def _kind(name: str) -> str:
    return "legacy" if name.startswith("legacy") else name.split("-")[1]


def _train(root: Path, modality: str, objective: str, embed_norm: bool) -> Path:
    config = tiny_config(modality, root / f"{modality}-{objective}", max_steps=10, threads=1)
    config["objective"] = {"name": objective}
    config["model"]["embed_norm"] = embed_norm
    config["data"]["max_val_records"] = 16
    train(config)
    return Path(config["out"])


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory, one_torch_thread) -> dict:
    """Export every case, then load all of them in one subprocess in which polymask cannot be imported."""
    root = tmp_path_factory.mktemp("export")
    runs = {f"{m}-{o}-{'norm' if n else 'nonorm'}": _train(root, m, o, n) for m, o, n in CASES}
    runs["legacy-smiles-mlm-nonorm"] = LEGACY_RUN
    results = {name: export_checkpoint(run, root / "hf" / name) for name, run in runs.items()}
    cases = [reference_case(run, root / "hf" / name) for name, run in runs.items()]
    return {"exports": results, "loaded": run_blocked(cases, root), "root": root}


def test_transformers_alone_reproduces_every_objective_and_modality(loaded):
    for name, result in loaded["loaded"].items():
        print(f"{name}: hidden {result['hidden_diff']:.1e}, LM logits {result['logits_diff']:.1e}, "
              f"fill-mask {result['fill_mask'][0]}")
        assert result["same_ids"], name  # AutoTokenizer gives polymask's ids, padding included
        native = result["model_class"] == "EsmModel"
        assert result["hidden_diff"] < (1e-5 if native else 1e-4), name
        assert result["logits_diff"] < 1e-4, name
        assert (result["model_class"], result["masked_lm_class"]) == CLASSES[_kind(name)], name
        assert result["remote"] == {"mlm": [], "maelm": ["AutoModelForMaskedLM"]}.get(_kind(name), [
            "AutoConfig", "AutoModel", "AutoModelForMaskedLM", "AutoModelForSequenceClassification"]), name
        assert result["classifier_logits"] == [8, 2]  # AutoModelForSequenceClassification starts a new head
        assert result["tokens"] == {"mask_token": "[MASK]", "pad_token": "[PAD]", "cls_token": "[CLS]",
                                    "sep_token": "[SEP]"}
        assert result["model_max_length"] == 64
        assert len(result["fill_mask"]) == 3 and all(0 <= item["score"] <= 1 for item in result["fill_mask"])


def test_the_export_checks_itself_and_writes_a_model_card(loaded):
    for name, result in loaded["exports"].items():
        assert result.max_abs_diff is not None and result.max_abs_diff < 1e-4
        assert result.checked_records == 8
        card = (result.folder / "README.md").read_text()
        modality, objective = name.removeprefix("legacy-").split("-")[:2]
        assert f"| modality | `{modality}`" in card and f"| objective | `{objective}`" in card
        if not name.startswith("legacy"):  # the legacy fixture keeps only its checkpoint, not its run's metrics
            assert "| steps | 10 of 10 |" in card and "validation masked-token accuracy | 0." in card
        config = json.loads((result.folder / "config.json").read_text())
        assert config["tokenizer_class"] == "PreTrainedTokenizerFast"  # what pipeline() needs in transformers 4.45
        files = ["README.md", "config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]
        if _kind(name) == "mlm":  # wholly native: no code shipped, no note
            assert config["model_type"] == "esm" and "auto_map" not in config and result.native
            assert config["hidden_act"] == "gelu" and config["token_dropout"] is False and not result.notes
        else:
            files += ["configuration_polymask.py", "modeling_polymask.py"]
            assert len(result.notes) == 1 and "trust_remote_code=True" in result.notes[0]
            assert "trust_remote_code=True" in card
            if _kind(name) == "maelm":
                assert config["model_type"] == "esm" and result.native and "decoder path" in result.notes[0]
            else:
                assert config["model_type"] == "polymask" and config["objective"] == objective
        assert sorted(p.name for p in result.folder.iterdir()) == sorted(files)
    exlm = loaded["exports"]["smiles-exlm-norm"]
    assert "NOT how ExLM predicted in pretraining" in (exlm.folder / "README.md").read_text()
    assert "2D rotary positions" in exlm.notes[0]
    assert "tanh-approximated GELU" in loaded["exports"]["legacy-smiles-mlm-nonorm"].notes[0]


def test_remote_code_imports_only_torch_and_transformers():
    for path in REMOTE_DIR.glob("*_polymask.py"):
        tree = ast.parse(path.read_text())
        imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names}
        imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
        assert imported <= {"torch", "transformers", "typing"}, (path.name, imported)


def test_export_never_replaces_a_folder_unasked_and_leaves_no_temporary_files(loaded, capsys):
    folder = loaded["exports"]["dna-mlm-norm"].folder
    before = (folder / "model.safetensors").read_bytes()
    with pytest.raises(PolymaskError, match="already exists"):
        export_checkpoint(LEGACY_RUN, folder)
    assert (folder / "model.safetensors").read_bytes() == before
    assert main(["export", "--checkpoint", str(LEGACY_RUN), "--out", str(folder), "--overwrite"]) == 0
    assert json.loads(capsys.readouterr().out)["max_abs_diff_hidden"] < 1e-4
    config = json.loads((folder / "config.json").read_text())
    assert config["embed_norm"] is False and config["hidden_act"] == "gelu_pytorch_tanh"  # the legacy run's
    assert not [p for p in folder.parent.iterdir() if p.name.startswith((".tmp-", ".old-"))]


@pytest.mark.parametrize("run", ["legacy", "smiles-mlm"])
def test_a_fine_tuned_head_exports_with_regression_targets_in_original_units(loaded, run):
    """On a legacy (remote-code) encoder and on a native ESM one: the head is remote code either way."""
    from transformers import AutoModel

    checkpoint = read_checkpoint(LEGACY_RUN if run == "legacy" else loaded["root"] / run)
    predictor = SequencePredictor(checkpoint.build_encoder(), 2, "cls").eval()
    torch.nn.init.normal_(predictor.head.weight)
    head = sequence_head(predictor.head.weight, predictor.head.bias, "regression", ["logS", "logP"], "cls", 0.1,
                         mean=[-3.0, 2.0], std=[2.0, 0.5])
    folder = loaded["root"] / f"finetuned-{run}"
    batch = encode_padded(checkpoint.tokenizer, ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1"], 64)
    result = write_export(folder, predictor.encoder, checkpoint.tokenizer, 64, card_facts(checkpoint), batch,
                          head=head)
    cls = PolymaskForSequenceClassification if run == "legacy" else PolymaskEsmForSequenceClassification
    assert result.architectures == [cls.__name__]
    model = cls.from_pretrained(str(folder)).eval()
    with torch.no_grad():
        expected = predictor(batch["input_ids"], batch["attention_mask"].bool()) * torch.tensor([2.0, 0.5]) + \
            torch.tensor([-3.0, 2.0])
        got = model(**batch).logits
    assert torch.allclose(got, expected, atol=1e-5)
    assert model.config.id2label == {0: "logS", 1: "logP"} and model.config.problem_type == "regression"
    assert model.config.tokenizer_class == "PreTrainedTokenizerFast"
    if run != "legacy":  # the encoder alone is native: no remote code
        encoder = AutoModel.from_pretrained(str(folder)).eval()
        assert type(encoder).__name__ == "EsmModel"
        with torch.no_grad():
            hidden = encoder(**batch).last_hidden_state
            reference = predictor.encoder(batch["input_ids"], attention_mask=batch["attention_mask"].bool())
        real = batch["attention_mask"].bool()
        assert (hidden[real] - reference[real]).abs().max() < 1e-5
        assert "the fine-tuned head" in result.notes[0] and "trust_remote_code=True" in result.notes[0]


def test_the_fill_mask_pipeline_finds_the_tokenizer_from_the_folder_alone(loaded):
    """docs/export.md's form, no tokenizer=: the same predictions as with the tokenizer given (a remote-code
    folder: a native one is covered by the round trip)."""
    from transformers import AutoTokenizer, pipeline

    folder = str(loaded["exports"]["smiles-exlm-norm"].folder)
    plain = pipeline("fill-mask", model=folder, trust_remote_code=True)
    given = pipeline("fill-mask", model=folder, tokenizer=AutoTokenizer.from_pretrained(folder), trust_remote_code=True)
    assert type(plain.tokenizer) is type(given.tokenizer) and plain.tokenizer.mask_token == "[MASK]"
    assert plain("CC(=O)[MASK]c1ccccc1", top_k=3) == given("CC(=O)[MASK]c1ccccc1", top_k=3)


def test_exlm_export_takes_2d_positions_like_the_expanded_pretraining_input(loaded):
    """The exported ExLM encoder reproduces polymask's on ExLM's expanded input (state indices 1..k), not
    only on plain tokens (state index 0): both rotary sections are laid out as polymask lays them."""
    run = loaded["root"] / "smiles-exlm"
    checkpoint = read_checkpoint(run)
    objective = checkpoint.build_objective().eval()
    batch = encode_padded(checkpoint.tokenizer, sample_texts(checkpoint), 64)
    real = batch["attention_mask"].bool()
    selected = torch.zeros_like(real)
    selected[:, 2] = True
    expansion = objective.expand(Batch(batch["input_ids"], real), selected)
    positions = expansion.position_ids(True)
    model = PolymaskModel.from_pretrained(str(loaded["exports"]["smiles-exlm-norm"].folder)).eval()
    with torch.no_grad():
        expected = objective.encoder(expansion.input_ids, attention_mask=expansion.attention_mask,
                                     position_ids=positions)
        got = model(input_ids=expansion.input_ids, attention_mask=expansion.attention_mask,
                    position_ids=positions).last_hidden_state
    slots = torch.ones_like(expansion.input_ids, dtype=torch.bool) if expansion.attention_mask is None \
        else expansion.attention_mask
    assert int(positions[..., 1].max()) == objective.config.k
    assert (expected[slots] - got[slots]).abs().max() < 1e-5


def test_a_fine_tuned_model_folder_exports_for_sequence_classification(tiny_smiles_model, tmp_path, capsys):
    """`polymask export` of a `polymask finetune` model: AutoModelForSequenceClassification gives the saved
    model's predictions, in the regression target's original units; a molecule longer than the model (digoxin, 99
    tokens) too, tokenised with `truncation=True` as the card says."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from polymask.inference.model import load_model

    out = tmp_path / "hf-esol"
    assert main(["export", "--checkpoint", str(tiny_smiles_model), "--out", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["max_abs_diff_hidden"] < 1e-4
    model = load_model(tiny_smiles_model, device="cpu")
    digoxin = "CC1OC(CC(O)C1O)OC2C(O)CC(OC2C)OC8C(O)CC(OC7CCC3(C)C(CCC4C3CC(O)C5(C)C(CCC45O)C6=CC(=O)OC6)C7)OC8C"
    records = ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1", digoxin]
    expected = model.predict(records).iloc[:, 0].to_numpy()
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    exported = AutoModelForSequenceClassification.from_pretrained(str(out), trust_remote_code=True).eval()
    normalised = [model.modality.normalize(text) for text in records]
    with torch.no_grad():
        got = exported(**tokenizer(normalised, padding=True, truncation=True, return_tensors="pt")).logits[:, 0].numpy()
    assert abs(got - expected).max() < 1e-4
    card = (out / "README.md").read_text()
    assert "fine-tuned on | moleculenet/esol" in card
    assert "task head: a regression head, in the targets' original units (1 output: `measured log solubility" in card
    assert "for this objective" not in card and "1 outputs" not in card
    assert "polymask reads a longer record's first 64 tokens: tokenise with `truncation=True`." in card


def test_one_binary_task_is_multi_label_classification_in_saved_models_and_exports():
    """A binary task has one logit per task under a sigmoid. transformers' single_label_classification would put a
    softmax over that one logit (loss 0 whatever the logit: nothing to learn); multi_label_classification is its
    BCE-with-logits. Saved models (finetuned.json) and exports state the same: the kind's problem_type."""
    from transformers import BertConfig, BertForSequenceClassification

    from polymask.tasks.finetune.kinds import TASK_KINDS

    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(vocab_size=10, hidden_size=8, num_hidden_layers=1,
                                                     num_attention_heads=2, intermediate_size=16, num_labels=1)).eval()
    ids, label = torch.tensor([[1, 2, 3]]), torch.tensor([[1.0]])
    model.config.problem_type = TASK_KINDS.get("binary").problem_type
    output = model(ids, labels=label)
    assert torch.isclose(output.loss, torch.nn.functional.binary_cross_entropy_with_logits(output.logits, label))
    model.config.problem_type = "single_label_classification"
    assert model(ids, labels=torch.tensor([0])).loss == 0  # the one class there is: nothing to learn
    head = sequence_head(torch.zeros(1, 8), torch.zeros(1), "binary", ["p_np"], "mean", 0.0)
    assert head.config["problem_type"] == TASK_KINDS.get("binary").problem_type == "multi_label_classification"
    binary = TASK_KINDS.get("binary")  # an export's label says which class its one sigmoid is the probability of

    def task(labels: list[str], classes: list[str]) -> SavedTask:
        return SavedTask(key="toy/task", kind="binary", problem_type=binary.problem_type, input_columns=["smiles"],
                         label_names=labels, class_names=classes, n_outputs=len(labels))

    assert binary.output_names(task(["bound"], ["unbound", "bound"])) == ["bound=bound"]
    assert binary.output_names(task(["y"], ["no", "yes"])) == ["y=yes"]
    assert binary.output_names(task(["tox1", "tox2"], ["0", "1"])) == ["tox1", "tox2"]


def test_remote_classes_of_a_native_export_refuse_a_foreign_esm_config():
    """Some transformers 4.x versions register a trust_remote_code class for every model of its config class in the
    process; polymask's ESM-based classes then refuse another ESM model's config in one line."""
    from transformers import EsmConfig

    from polymask.export.hf_remote.modeling_polymask import PolymaskEsmMaeForMaskedLM

    for cls in (PolymaskEsmMaeForMaskedLM, PolymaskEsmForSequenceClassification):
        with pytest.raises(ValueError, match="not one .*load this model in a new process"):
            cls(EsmConfig(vocab_size=33, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                          intermediate_size=16, position_embedding_type="rotary"))


def test_the_card_says_what_polymask_does_with_a_long_record_of_each_modality():
    """Every modality's longer record is read from its first max_len tokens (fine-tuning, benchmark, predict, embed):
    the card says so, SMILES included."""
    from polymask.modalities import MODALITIES

    for name in MODALITIES.names():
        assert MODALITIES.get(name)().export_record_advice(128).endswith(
            "polymask reads a longer record's first 128 tokens: tokenise with `truncation=True`.")
