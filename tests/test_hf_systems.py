"""Hugging Face folders as benchmark rows: a tiny BERT with its own tokenizer, and polymask's own export, fine-tuned
beside a polymask checkpoint with the same heads, recipe, splits and seeds; folders that cannot be used end in one
line."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import tiny_config
from tokenizers import Tokenizer, models, pre_tokenizers, processors

from polymask.cli import main
from polymask.modalities.dna import Dna, DnaConfig
from polymask.tasks.data.loading import TaskSplit
from polymask.tasks.finetune.hf_folder import (
    HFTokenizer,
    RawInputs,
    _segment_separator,
    is_hf_folder,
    load_hf_folder,
    segment_ids,
)
from polymask.tasks.finetune.tables import encode_split
from polymask.training.trainer import train


LEGACY_RUN = Path(__file__).parent / "data" / "legacy_run"
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
SMILES_CHARACTERS = "CNOSPFIBrlcnosp()[]=#@+-/\\.%0123456789H"
CAPS = ["--tasks", "esol", "--max-train-examples", "40", "--max-valid-examples", "40", "--max-test-examples", "40",
        "--epochs", "1", "--seeds", "1", "--max-len", "64", "--set", "precision=fp32", "--quiet"]
pytestmark = [pytest.mark.integration,  # trains, fine-tunes or runs the command line end to end
              pytest.mark.usefixtures("one_torch_thread")]


def save_bert(folder: Path, characters: str, with_tokenizer: bool = True, positions: int = 64) -> Path:
    """A 1-layer BERT and a character-level WordLevel tokenizer (BERT's specials), saved as transformers does."""
    import torch
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    vocab = {token: index for index, token in enumerate(SPECIALS + sorted(set(characters)))}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=positions)).save_pretrained(folder)
    if with_tokenizer:
        PreTrainedTokenizerFast(tokenizer_object=tokenizer, **dict(zip(
            ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token"), SPECIALS))).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny polymask SMILES run, its `polymask export` (native ESM), a remote-code export (the legacy run's tanh
    GELU has no native counterpart), and a tiny BERT folder."""
    root = tmp_path_factory.mktemp("hf-systems")
    run = root / "tiny-smiles"
    train(tiny_config("smiles", run, max_steps=10, threads=1))
    assert main(["export", "--checkpoint", str(run), "--out", str(root / "tiny-smiles-export")]) == 0
    assert main(["export", "--checkpoint", str(LEGACY_RUN), "--out", str(root / "legacy-export")]) == 0
    return {"run": run, "export": root / "tiny-smiles-export", "remote_export": root / "legacy-export",
            "bert": save_bert(root / "tiny-bert", SMILES_CHARACTERS)}


def benchmark_rows(out: Path, *checkpoints: Path, references: bool = True) -> dict[str, dict]:
    arguments = [item for path in checkpoints for item in ("--checkpoint", str(path))]
    assert main(["benchmark", "moleculenet", *arguments, *CAPS, "--out", str(out),
                 *([] if references else ["--no-references"])]) == 0
    report = json.loads((out / "results.json").read_text())
    return {row["system"]: row for row in report["rows"]}


def test_folders_are_told_apart_from_polymask_checkpoints(folders):
    assert is_hf_folder(folders["bert"]) and is_hf_folder(folders["export"])
    assert not is_hf_folder(folders["run"]) and not is_hf_folder(folders["run"] / "checkpoints" / "step-000010")
    legacy = LEGACY_RUN / "checkpoints" / "step-000002"  # a checkpoint whose run config is still config.json
    assert (legacy / "config.json").is_file() and not is_hf_folder(legacy) and not is_hf_folder(LEGACY_RUN)


def test_a_bert_folder_is_a_row_beside_a_polymask_checkpoint(folders, tmp_path):
    rows = benchmark_rows(tmp_path / "bench", folders["run"], folders["bert"])
    assert set(rows) == {"tiny-smiles (mlm)", "tiny-bert", "no pretraining", "ECFP4 + random forest (500 trees)"}
    ours, bert = rows["tiny-smiles (mlm)"], rows["tiny-bert"]
    assert all(math.isfinite(bert[f"{name}_mean"]) for name in ("rmse", "mae"))
    assert [bert[key] for key in ("n_train", "n_valid", "n_test", "skipped")] == \
        [ours[key] for key in ("n_train", "n_valid", "n_test", "skipped")] == [40, 40, 40, ours["skipped"]]
    assert bert["truncated"] >= ours["truncated"]  # one token per character against polymask's SMILES tokens
    report = json.loads((tmp_path / "bench" / "results.json").read_text())
    assert report["systems"]["no pretraining"].startswith(f"architecture of {folders['run']}")  # the first checkpoint's
    cells = tmp_path / "bench" / "cells"
    assert (cells / "tiny-smiles-mlm" / "moleculenet-esol" / "seed-0").is_dir()  # polymask rows keep their model
    assert not (cells / "tiny-bert" / "moleculenet-esol" / "seed-0").exists()  # a folder's row keeps none


def test_polymask_export_alone_scores_as_its_checkpoint_and_its_untrained_row_is_its_architecture(folders, tmp_path):
    ours = benchmark_rows(tmp_path / "ours", folders["run"], references=False)["tiny-smiles (mlm)"]
    rows = benchmark_rows(tmp_path / "export", folders["export"])
    exported = rows["tiny-smiles-export"]
    assert [exported[key] for key in ("n_train", "n_valid", "n_test", "truncated")] == \
        [ours[key] for key in ("n_train", "n_valid", "n_test", "truncated")]  # the same tokens
    # fp32: the same encoder on the same token ids, fine-tuned alike
    assert exported["rmse_values"] == pytest.approx(ours["rmse_values"], rel=1e-6)
    report = json.loads((tmp_path / "export" / "results.json").read_text())
    assert report["systems"]["no pretraining"] == \
        f"architecture of {folders['export']} (Hugging Face esm), random initialisation"
    assert math.isfinite(rows["no pretraining"]["rmse_mean"])


def test_finetune_takes_a_folder(folders, tmp_path):
    assert main(["finetune", "--task", "moleculenet/esol", "--checkpoint", str(folders["bert"]), *CAPS[2:],
                 "--out", str(tmp_path / "ft")]) == 0
    rows = json.loads((tmp_path / "ft" / "results.json").read_text())["rows"]
    assert [(row["system"], row["n_train"]) for row in rows] == [("tiny-bert", 40)]


def test_dna_reaches_a_foreign_tokenizer_as_the_plain_sequence_and_truncation_is_counted(tmp_path):
    from transformers import AutoTokenizer

    tokenizer = HFTokenizer(AutoTokenizer.from_pretrained(str(save_bert(tmp_path / "dna-bert", "ACGTN")),
                                                          local_files_only=True))
    kmers = Dna(DnaConfig(k=3, overlapping=True))
    assert kmers.tokenizer_input("ACGTA") == "ACG CGT GTA"
    for modality in (RawInputs(kmers), RawInputs(kmers).augmented(["reverse_complement"])):
        assert modality.tokenizer_input("ACGTA") == "ACGTA"
    encoded = encode_split(TaskSplit([("ACGTA",), ("ACGTACGTAC",)], np.zeros((2, 1))), RawInputs(kmers), tokenizer, 8)
    vocab = tokenizer.hf.get_vocab()
    assert encoded.sequences[0] == [2, *(vocab[base] for base in "ACGTA"), 3]
    assert len(encoded.sequences[1]) == 8 and encoded.sequences[1][-1] == 3 and encoded.truncated == 1
    pair = tokenizer.encode_batch([("AC", "G")])[0].ids  # two input columns: the folder's own pair template
    assert pair == [2, vocab["A"], vocab["C"], 3, vocab["G"], 3]


def test_a_folder_s_cells_are_not_reused_beside_a_checkpoint_that_varies_dna_over_other_reading_frames(tmp_path):
    """A folder's rows borrow the first checkpoint's modality: its k sets the frames augmentation and test-time
    averaging shift over (k=3: 6 variants of a window, k=6: 12), so a cell run beside a 6-mer checkpoint is not a
    cell beside a 3-mer one; pretraining's augmentation switches do not count, and a cell from before is trusted."""
    from polymask.benchmarking.identity import reused_cell
    from polymask.benchmarking.systems import hf_system, hf_untrained_system
    from polymask.errors import ConfigError
    from polymask.finetune_config import FinetuneConfig

    folder = load_hf_folder(save_bert(tmp_path / "dna-bert", "ACGTN"))
    config = FinetuneConfig(max_len=64, augment=True, test_time_average=True)

    def identities(modality: Dna) -> list[dict]:
        return [row.identity("tf_0") for row in (hf_system(folder, config, modality),
                                                 hf_untrained_system(folder, config, modality))]

    three, six = identities(Dna(DnaConfig(k=3))), identities(Dna(DnaConfig(k=6)))
    assert len(RawInputs(Dna(DnaConfig(k=3))).variants("ACGT" * 20, ["reverse_complement", "shift"])) == 6
    assert all(a != b for a, b in zip(three, six))
    assert identities(Dna(DnaConfig(k=3, augment=True, frame_shift=True))) == three
    cell = tmp_path / "seed-0.json"
    legacy = json.loads(json.dumps(six[0]))
    del legacy["weights"]["reader"]  # written before the borrowed settings were recorded
    for kept, reused in ((legacy, True), (six[0], False)):
        cell.write_text(json.dumps({"task": "dna/tf_0", "metric": "mcc", "valid": {}, "test": {},
                                    "identity": {"system": kept, "data": {}}}))
        if reused:
            assert reused_cell(cell, {"system": three[0], "data": {}})["task"] == "dna/tf_0"
        else:
            with pytest.raises(ConfigError, match="system.weights.reader.k: then 6, now 3"):
                reused_cell(cell, {"system": three[0], "data": {}})


def test_the_second_text_of_a_pair_gets_the_token_types_its_tokenizer_gives(folders):
    import torch

    loaded = load_hf_folder(folders["bert"])
    encoded = loaded.tokenizer.hf("CCO", "NC=O", return_token_type_ids=True)
    ids = torch.tensor([encoded["input_ids"]])
    assert segment_ids(ids, loaded.segment_separator).tolist() == [encoded["token_type_ids"]]
    assert 1 in encoded["token_type_ids"]
    encoder = loaded.encoder(seed=0).eval()
    with torch.no_grad():
        expected = loaded.model.eval()(input_ids=ids, token_type_ids=torch.tensor([encoded["token_type_ids"]]))
        assert torch.allclose(encoder(ids), expected.last_hidden_state)


def test_a_tokenizer_that_gives_no_token_types_keeps_them_all_zero(folders):
    """RoBERTa's configs state two token types, but its tokenizer never marks the second text: neither does polymask."""
    from transformers import PreTrainedTokenizerFast

    loaded = load_hf_folder(folders["bert"])
    unmarked = Tokenizer.from_str(loaded.tokenizer.hf.backend_tokenizer.to_str())
    unmarked.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=unmarked, sep_token="[SEP]", cls_token="[CLS]")
    assert _segment_separator(loaded.model, tokenizer) is None
    assert _segment_separator(loaded.model, loaded.tokenizer.hf) == 3


def no_tokenizer(root: Path, folders: dict[str, Path]) -> Path:
    return save_bert(root / "no-tokenizer", "CNO", with_tokenizer=False)


def few_positions(root: Path, folders: dict[str, Path]) -> Path:
    return save_bert(root / "few-positions", "CNO", positions=32)


def foreign_code(root: Path, folders: dict[str, Path]) -> Path:
    folder = shutil.copytree(folders["bert"], root / "foreign-code")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "auto_map": {"AutoModel": "modeling_x.XModel"}}))
    return folder


def edited_export(root: Path, folders: dict[str, Path]) -> Path:
    folder = shutil.copytree(folders["remote_export"], root / "edited-export")
    with open(folder / "modeling_polymask.py", "a") as handle:
        handle.write("\nprint('not the code polymask ships')\n")
    return folder


def _edited_config(root: Path, folders: dict[str, Path], name: str, **changes: object) -> Path:
    folder = shutil.copytree(folders["bert"], root / name)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))
    return folder


def wider_config(root: Path, folders: dict[str, Path]) -> Path:
    return _edited_config(root, folders, "wider", intermediate_size=128)


def more_layers(root: Path, folders: dict[str, Path]) -> Path:
    return _edited_config(root, folders, "more-layers", num_hidden_layers=3)


def another_model_type(root: Path, folders: dict[str, Path]) -> Path:
    return _edited_config(root, folders, "gpt2", model_type="gpt2", n_embd=32, n_head=2, n_layer=1)


def encoder_decoder(root: Path, folders: dict[str, Path]) -> Path:
    import torch
    from transformers import T5Config, T5Model

    folder = root / "t5"
    torch.manual_seed(0)
    T5Model(T5Config(vocab_size=64, d_model=32, d_kv=16, d_ff=64, num_layers=1, num_heads=2)).save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(folders["bert"] / name, folder / name)
    return folder


@pytest.mark.parametrize("make, message", [
    (no_tokenizer, "no tokenizer (tokenizer.json, or a tokenizer_config.json naming its tokenizer_class); save the "
                   "model's tokenizer"),
    (wider_config, "config.json does not fit its weights: 3 tensors of another shape, e.g. "
                   "encoder.layer.0.intermediate.dense.bias ((64,) in the file, (128,) in the model); fix "
                   "config.json's "
                   "sizes"),
    (more_layers, "config.json does not fit its weights: the file lacks 32 of the model's tensors, e.g. "
                  "encoder.layer.1."),
    (another_model_type, "config.json does not fit its weights: the file lacks"),
    (encoder_decoder, "a t5 model is an encoder-decoder; polymask fine-tunes encoders"),
    (few_positions, "max_len 64 is more than the 32 positions its config.json states"),
    (foreign_code, "its model needs its own code (AutoModel in config.json's auto_map)"),
    (edited_export, "a polymask export whose code (modeling_polymask.py) is not this polymask's"),
])
def test_an_unusable_folder_is_one_line(folders, tmp_path, capsys, make, message):
    folder = make(tmp_path, folders)
    capsys.readouterr()  # transformers' saving progress bars
    assert main(["benchmark", "moleculenet", "--checkpoint", str(folder), *CAPS, "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"polymask: error: {folder}: ") and message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "b").exists()


def test_a_folder_whose_weights_changed_at_the_same_size_is_not_reused(folders, tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "tiny-bert"
    shutil.copytree(folders["bert"], folder)
    benchmark_rows(tmp_path / "bench", folder, references=False)
    weights = load_file(folder / "model.safetensors")
    first = next(iter(weights))
    save_file({**weights, first: weights[first] + 1}, folder / "model.safetensors", metadata={"format": "pt"})
    capsys.readouterr()
    assert main(["benchmark", "moleculenet", "--checkpoint", str(folder), *CAPS, "--out", str(tmp_path / "bench"),
                 "--no-references"]) == 2
    assert "run otherwise (system.weights.sha256.model.safetensors: then" in capsys.readouterr().err
