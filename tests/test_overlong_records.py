"""One treatment per record: a record longer than the model is read from its first ``max_len`` tokens, and counted,
on every path that applies a model (fine-tuning and benchmark cells, ``predict``, ``embed``), whatever its modality.
A SMILES is no longer refused at predict after fine-tuning read its start. A fine-tuned model reads records at the
``max_len`` it was fine-tuned with (its finetuned.json), not at its pretraining checkpoint's.

The molecules are real: ESOL's first 60 rows and its digoxin (99 tokens), from the file that ships in
tasks/moleculenet/data/.
"""
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import ESOL_TARGET, moleculenet_rows, write_csv

import polymask
from polymask.checkpoints.finetuned_meta import read_finetuned_meta
from polymask.cli import main
from polymask.data.model_inputs import encode_records, tokenize_normalised
from polymask.errors import CheckpointError
from polymask.modalities import MODALITIES
from polymask.tasks.data.loading import TaskSplit, load_task
from polymask.tasks.data.spec import load_task_spec
from polymask.tasks.finetune.tables import encode_split

#: The fine-tuned model's max_len; the tiny pretraining run (conftest.tiny_config) reads 64 tokens.
MAX_LEN = 32
DIGOXIN = "CC1OC(CC(O)C1O)OC2C(O)CC(OC2C)OC8C(O)CC(OC7CCC3(C)C(CCC4C3CC(O)C5(C)C(CCC45O)C6=CC(=O)OC6)C7)OC8C"
#: 36 tokens: longer than the fine-tuned model, shorter than its pretraining checkpoint.
CHRYSENE_LIKE = "c1ccc2c(c1)ccc3c2ccc4c5ccccc5ccc43"
#: sha256 of fine-tuning's token ids of ESOL's train, valid and test splits at max_len 64 under the built-in SMILES
#: tokenizer, taken before predict and fine-tuning shared one tokenisation (six records cut): the ids, hence the
#: committed MoleculeNet cells, did not change. A change here changes every SMILES cell's result.
ESOL_IDS_AT_64 = {"train": "f095e785e7450d4a", "valid": "1f5288db2128dfff", "test": "16f611baf7ad4946"}


integration = pytest.mark.integration  # fine-tunes and runs the command line end to end


@pytest.fixture(scope="module")
def tuned(tiny_smiles_run, tmp_path_factory) -> Path:
    """`polymask finetune --data` on a chemist's table of 61 molecules (digoxin among them) at max_len 32: the
    run's folder."""
    rows = moleculenet_rows("delaney-processed", ["smiles", ESOL_TARGET], 60) + [[DIGOXIN, "-4.081"]]
    table = write_csv(tmp_path_factory.mktemp("own") / "solubility.csv", ["smiles", "logS"], rows)
    out = tmp_path_factory.mktemp("tuned")
    assert main(["finetune", "--data", str(table), "--target", "logS", "--checkpoint", str(tiny_smiles_run),
                 "--epochs", "1", "--batch-size", "16", "--max-len", str(MAX_LEN), "--quiet", "--out", str(out)]) == 0
    return out


def model_dir(run: Path) -> Path:
    return run / json.loads((run / "results.json").read_text())["cells"][0]["model_dir"]


@pytest.mark.parametrize("name, record", [
    ("smiles", DIGOXIN),
    ("dna", "ACGTTGCAAG" * 60),
    ("text", "a sentence that runs on " * 40),
])
def test_every_modality_reads_an_overlong_record_from_its_first_tokens_on_every_path(name, record):
    """predict and embed (``encode_records``) give a record the ids fine-tuning gives it (``encode_split``): its first
    max_len tokens, ending in [SEP], counted as truncated; never a refusal."""
    modality = MODALITIES.get(name)()
    tokenizer = modality.load_tokenizer()
    normalised = modality.normalize(record)
    tuned = encode_split(TaskSplit([(normalised,)], np.zeros((1, 1))), modality, tokenizer, MAX_LEN)
    applied = encode_records([(record,)], [None], modality, tokenizer, MAX_LEN)
    assert applied.reasons == [None] and applied.truncated == tuned.truncated == 1
    assert applied.ids == tuned.sequences and len(tuned.sequences[0]) == MAX_LEN
    whole = tokenizer.encode(modality.tokenizer_input(normalised)).ids
    assert tuned.sequences[0] == whole[:MAX_LEN - 1] + whole[-1:]  # [CLS] the first 30 tokens [SEP]


@integration
@pytest.mark.usefixtures("one_torch_thread")
def test_finetune_predict_and_embed_give_an_overlong_smiles_the_same_outcome(tuned, tiny_smiles_run, tmp_path, capsys):
    """Fine-tuning counted the long molecules of the table (digoxin among them) in its report; the saved model reads
    at its recorded max_len (32) and predicts digoxin from the first 32 tokens, which is the input fine-tuning
    scored; predict and embed say how many rows they cut. The pretraining checkpoint embeds at its own 64."""
    cell = json.loads((tuned / "results.json").read_text())["cells"][0]
    model = polymask.load_model(model_dir(tuned), device="cpu")
    assert model.max_len == model.meta.max_len == model.meta.finetune.max_len == MAX_LEN
    rows = moleculenet_rows("delaney-processed", ["smiles"], 60) + [[DIGOXIN]]
    lengths = [len(model.tokenizer.encode(model.modality.normalize(smiles)).ids) for smiles, in rows]
    assert cell["n_train"] + cell["n_valid"] + cell["n_test"] == len(rows)
    assert cell["truncated"] == sum(length > MAX_LEN for length in lengths) > 1  # digoxin and others, counted
    assert f"| {cell['truncated']} |" in (tuned / "results.md").read_text().split("## Tasks")[1].splitlines()[4]

    normalised = model.modality.normalize(DIGOXIN)
    ids = encode_split(TaskSplit([(normalised,)], np.zeros((1, 1))), model.modality, model.tokenizer,
                       MAX_LEN).sequences[0]  # what fine-tuning and a benchmark cell read
    with torch.no_grad():
        scored = model.head.predict(model.network(torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.bool)))
    predicted = model.predict([DIGOXIN])
    assert predicted["reason"].isna().all()
    assert predicted.iloc[0, 0] == pytest.approx(float(scored[0, 0]), abs=1e-5)
    vectors, reasons = model.embed([DIGOXIN], with_reasons=True)
    assert reasons == [None] and np.isfinite(vectors).all()

    data = write_csv(tmp_path / "new.csv", ["smiles"], [[DIGOXIN], [CHRYSENE_LIKE], ["CCO"], ["C1CC"]])
    capsys.readouterr()
    assert main(["predict", "--model", str(model_dir(tuned)), "--data", str(data), "--out",
                 str(tmp_path / "p.csv"), "--quiet"]) == 0
    summary = capsys.readouterr().out
    assert "4 rows: 3 predicted, 1 rejected (see the reason column), 2 truncated to 32 tokens" in summary
    assert main(["embed", "--checkpoint", str(model_dir(tuned)), "--data", str(data), "--out",
                 str(tmp_path / "e.npy"), "--quiet"]) == 0
    assert "1 rejected, 2 truncated to 32 tokens" in capsys.readouterr().out
    assert main(["embed", "--checkpoint", str(tiny_smiles_run), "--data", str(data), "--out",
                 str(tmp_path / "pretrained.npy"), "--quiet"]) == 0
    assert "1 rejected, 1 truncated to 64 tokens" in capsys.readouterr().out  # only digoxin is over 64


def test_a_saved_model_has_one_max_len(tmp_path):
    """finetuned.json's max_len is the fine-tuning setting the model was trained with: a file where the two differ
    is refused in one line naming both."""
    raw = json.loads((Path(__file__).parent / "data/finetuned/esol.json").read_text())
    assert read_finetuned_meta(raw, tmp_path).max_len == raw["finetune"]["max_len"]
    with pytest.raises(CheckpointError, match="max_len 128 differs from finetune.max_len 64"):
        read_finetuned_meta({**raw, "max_len": 128}, tmp_path / "finetuned.json")


def test_fine_tuning_reads_esol_as_it_did_before_predict_shared_its_tokenisation():
    """The cells' identities and results stand: fine-tuning's ids of every ESOL split are those of before."""
    smiles = MODALITIES.get("smiles")()
    task = load_task(load_task_spec("moleculenet/esol"), smiles)
    tokenizer = smiles.load_tokenizer()
    digests, cut = {}, 0
    for part in ESOL_IDS_AT_64:
        read = tokenize_normalised(getattr(task, part).inputs, smiles, tokenizer, 64)
        digests[part] = hashlib.sha256(json.dumps(read.ids).encode()).hexdigest()[:16]
        cut += read.truncated
    assert digests == ESOL_IDS_AT_64 and cut == 6


def test_a_variant_cut_where_its_record_fits_is_still_dropped_but_an_overlong_record_keeps_its_variants():
    """Test-time averaging (SMILES): a randomised atom order that runs past max_len where the canonical record fits
    is left out; an over-long record, cut on every path, is averaged over all its variants, each cut alike."""
    from polymask.data.variants import encode_variants, expand_variants

    smiles = MODALITIES.get("smiles")()
    tokenizer = smiles.load_tokenizer()
    record = smiles.normalize(DIGOXIN)
    variants, ids = encode_variants([(record,)], smiles, tokenizer, MAX_LEN, ["atom_order"])
    assert len(variants.inputs) == len(expand_variants([(record,)], smiles, ["atom_order"]).inputs) > 1
    assert all(len(row) == MAX_LEN for row in ids)
    assert smiles.drops_cut_variants and not MODALITIES.get("dna")().drops_cut_variants

