"""benchmarks/rxnfp_folder.py: rxnfp's pretrained SMILES BERT as a Hugging Face folder.

Always: the conversion of a fabricated rxnfp wheel (tiny BERT, tiny vocabulary) — its regex read and never run,
ids that follow vocab.txt's lines, no lower-casing, bracket atoms whole, [UNK] for the rest, weights read with the
safe loader and equal to the original's in transformers, and the folder embedding through ``polymask embed``.
With the real wheel (``$POLYMASK_RXNFP_WHEEL``, else /work/rxnfp-wheel/rxnfp-0.1.0-*.whl; CI has none, so it
skips): the converted tokenizer's ids equal rxnfp's own tokenizer's on every molecule of eight MoleculeNet tasks.
"""
from __future__ import annotations

import fractions
import importlib.util
import json
import os
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch

from polymask.checkpoints.hf_folder_check import check_hf_folder
from polymask.cli import main
from polymask.transformers_quiet import quiet_transformers

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
WHEEL_ENV = "POLYMASK_RXNFP_WHEEL"
DEFAULT_WHEELS = Path("/work/rxnfp-wheel")
MODEL_DIR = "rxnfp/models/transformers/bert_pretrained"
#: A regex of rxnfp's shape (bracket atoms first, Br and Cl before B and C), with code after it that cannot run.
TOKENIZATION = 'import not_installed_anywhere\n\nSMI_REGEX_PATTERN = r"(\\[[^\\]]+]|Br?|Cl?|N|O|c|n|\\(|\\)|=|[0-9])"\n'
VOCAB = ["[PAD]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "C", "c", "Cl", "Br", "N", "O", "(", ")", "=",
         "1", "[C@H]", "[nH]"]
TINY_BERT = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32,
             "max_position_embeddings": 64, "vocab_size": len(VOCAB)}


def load_script(name: str) -> ModuleType:
    """A benchmarks/ script as a module (registered by name, as the scripts import each other)."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


rxnfp_folder = load_script("rxnfp_folder")


def bert_state() -> dict[str, torch.Tensor]:
    """A tiny BertForPreTraining's state, as rxnfp's pytorch_model.bin holds one (decoder tied, NSP head)."""
    from transformers import BertConfig, BertForPreTraining

    torch.manual_seed(0)
    return BertForPreTraining(BertConfig(**TINY_BERT)).state_dict()


def fabricated_wheel(path: Path, state: object) -> Path:
    """A zip laid out as the rxnfp wheel: tokenization.py, and config.json (no model_type), vocab.txt and
    pytorch_model.bin of the pretrained model."""
    weights = path.with_suffix(".bin")
    torch.save(state, weights)
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("rxnfp/tokenization.py", TOKENIZATION)
        wheel.writestr(f"{MODEL_DIR}/config.json", json.dumps(TINY_BERT))
        wheel.writestr(f"{MODEL_DIR}/vocab.txt", "\n".join(VOCAB) + "\n")
        wheel.write(weights, f"{MODEL_DIR}/pytorch_model.bin")
    return path


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, torch.Tensor]]:
    root = tmp_path_factory.mktemp("rxnfp")
    state = bert_state()
    rxnfp_folder.convert(fabricated_wheel(root / "rxnfp-0.1.0-py3-none-any.whl", state), root / "tiny-rxnfp")
    return root / "tiny-rxnfp", state


def test_the_tokenizer_reads_smiles_as_rxnfp_does(converted):
    from transformers import AutoTokenizer

    folder, _ = converted
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    assert tokenizer.tokenize("ClC(Br)c1cc[nH]c1[C@H]") == \
        ["Cl", "C", "(", "Br", ")", "c", "1", "c", "c", "[nH]", "c", "1", "[C@H]"]  # no lower-casing, brackets whole
    ids = tokenizer("CC[Fe]N")["input_ids"]
    assert ids == [3, 6, 6, 2, 10, 4]  # vocab.txt's line numbers: [CLS] C C [UNK] N [SEP]
    assert tokenizer("C.C")["input_ids"] == [3, 6, 2, 6, 4]  # a character outside the regex: [UNK], never dropped
    assert tokenizer(" C C\tN\n")["input_ids"] == tokenizer("CCN")["input_ids"]  # whitespace dropped, as rxnfp does
    assert (tokenizer.pad_token_id, tokenizer.mask_token_id) == (0, 5)


def test_the_model_loads_natively_with_the_original_weights(converted):
    from safetensors.torch import load_file
    from transformers import AutoModel, BertConfig, BertForPreTraining

    folder, state = converted
    config = json.loads((folder / "config.json").read_text())
    assert (config["model_type"], config["architectures"]) == ("bert", ["BertForMaskedLM"])
    check_hf_folder(folder)
    stored = load_file(folder / "model.safetensors")
    assert not [name for name in stored if name.startswith("cls.seq_relationship.")]
    assert "cls.predictions.decoder.weight" not in stored  # tied to the word embeddings
    original = BertForPreTraining(BertConfig(**TINY_BERT)).eval()
    original.load_state_dict(state)
    model = AutoModel.from_pretrained(str(folder)).eval()
    ids = torch.tensor([[3, 6, 7, 8, 16, 4]])
    with torch.no_grad():
        assert torch.equal(model(input_ids=ids).last_hidden_state, original.bert(input_ids=ids).last_hidden_state)


def test_a_pickle_holding_more_than_tensors_is_refused(tmp_path):
    wheel = fabricated_wheel(tmp_path / "rxnfp.whl", {"bert.pooler.dense.bias": fractions.Fraction(1, 3)})
    with pytest.raises(ValueError, match="holds more than tensors, so unpickling it would run code; refused"):
        rxnfp_folder.convert(wheel, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.integration  # runs the command line end to end
def test_the_folder_embeds_through_polymask(converted, tmp_path, one_torch_thread):
    from transformers import AutoModel, AutoTokenizer

    folder, _ = converted
    (tmp_path / "molecules.smi").write_text("CCO\nClc1ccccc1\n")
    assert main(["embed", "--checkpoint", str(folder), "--modality", "smiles", "--data",
                 str(tmp_path / "molecules.smi"), "--out", str(tmp_path / "x.npy"), "--device", "cpu", "--quiet"]) == 0
    vectors = np.load(tmp_path / "x.npy")
    with quiet_transformers():  # BertModel leaves the masked-LM head unread, and would say so
        tokenizer, model = AutoTokenizer.from_pretrained(str(folder)), AutoModel.from_pretrained(str(folder)).eval()
    with torch.no_grad():
        expected = [model(**tokenizer(smiles, return_tensors="pt")).last_hidden_state[0].mean(0).numpy()
                    for smiles in ("CCO", "Clc1ccccc1")]
    np.testing.assert_allclose(vectors, np.stack(expected), atol=1e-5)


def rxnfp_wheel() -> Path | None:
    """The real rxnfp 0.1.0 wheel, if it is on this machine."""
    if os.environ.get(WHEEL_ENV):
        return Path(os.environ[WHEEL_ENV])
    return next(iter(sorted(DEFAULT_WHEELS.glob("rxnfp-0.1.0-*.whl"))), None)


@pytest.fixture(scope="module")
def real_tokenizers(tmp_path_factory: pytest.TempPathFactory):
    """rxnfp's own tokenizer (run from the wheel), the converted folder's, and rxnfp's regex."""
    import re

    from transformers import AutoTokenizer

    wheel = rxnfp_wheel()
    if wheel is None or not wheel.exists():
        pytest.skip(f"no rxnfp wheel: set ${WHEEL_ENV}, or run "
                    f"`pip download rxnfp==0.1.0 --no-deps -d {DEFAULT_WHEELS}`")
    check = load_script("rxnfp_tokenizer_check")
    folder = tmp_path_factory.mktemp("rxnfp-real") / "rxnfp-bert-pretrained"
    rxnfp_folder.convert(wheel, folder)
    regex = re.compile(rxnfp_folder.smiles_regex(rxnfp_folder.read_member(wheel, rxnfp_folder.TOKENIZATION).decode()))
    return check, check.rxnfp_tokenizer(wheel), AutoTokenizer.from_pretrained(str(folder)), regex


@pytest.mark.integration  # reads and tokenises whole MoleculeNet files (about 25 s for the eight)
@pytest.mark.parametrize("task", ["esol", "freesolv", "lipophilicity", "bbbp", "bace", "clintox", "tox21", "sider"])
def test_ids_equal_rxnfps_own_tokenizer_on_moleculenet(real_tokenizers, task):
    from polymask.errors import TaskFileMissing

    check, reference, converted_tokenizer, regex = real_tokenizers
    try:
        result = check.check_task(task, None, reference, converted_tokenizer, regex)
    except TaskFileMissing as exc:
        pytest.skip(f"{task}: {exc} (set $POLYMASK_DATA_DIR to the MoleculeNet files)")
    print(f"{task}: {result.molecules} molecules, {len(result.dropped)} with characters rxnfp drops (ours [UNK]), "
          f"{result.with_unknown} with [UNK]: {dict(result.unknown_pieces)}")
    assert result.molecules > 0 and result.mismatches == []
