"""The DNA encoders that ship inside the package (docs/results/dna-gue/): listed, loadable by name, within the
size limit, and their frozen embeddings carry what a task needs that an untrained encoder's do not."""
import csv
import gzip
import re

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import matthews_corrcoef

import polymask
from polymask.builtin_models import PACKAGE_DIR
from polymask.checkpoints.pretrained import read_checkpoint
from polymask.cli import main
from polymask.model.encoder import Encoder
from polymask.resources import builtin_dir
from polymask.tokenization import SpecialIds


NAMES = ("dna-gue-3mer-mlm-196k", "dna-gue-mlm-196k")
MAX_BYTES = 16 * 2**20
GUE_DIR = builtin_dir("tasks") / "dna" / "data" / "GUE"
pytestmark = [pytest.mark.integration,  # trains, fine-tunes or runs the command line end to end
              pytest.mark.usefixtures("one_torch_thread")]


@pytest.mark.parametrize("name", NAMES)
def test_it_is_listed_by_name_and_fits_the_size_limit(capsys, name):
    assert main(["models"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(name + "  "))
    assert re.split(r"\s{2,}", line)[:4] == [name, "dna", "mlm", "GUE's human and mouse training sequences (13 tasks), "
                                              "minus every DNA validation and test sequence (196k sequences, 19.5M bases)"]
    assert sum(path.stat().st_size for path in (PACKAGE_DIR / "pretrained" / name).iterdir()) <= MAX_BYTES


def read_split(task: str, split: str) -> tuple[list[str], np.ndarray]:
    with gzip.open(GUE_DIR / task / f"{split}.csv.gz", "rt") as handle:
        rows = list(csv.reader(handle))[1:]
    return [row[0] for row in rows], np.array([int(row[1]) for row in rows])


def mean_pooled(encoder: Encoder, tokenizer, sequences: list[str]) -> np.ndarray:
    pad, vectors = SpecialIds.of(tokenizer).pad, []
    encoder.eval()
    with torch.no_grad():
        for start in range(0, len(sequences), 256):
            encodings = tokenizer.encode_batch(sequences[start:start + 256])
            width = max(len(e.ids) for e in encodings)
            ids = torch.tensor([e.ids + [pad] * (width - len(e.ids)) for e in encodings])
            real = ids != pad
            hidden = encoder(ids, attention_mask=real)
            vectors.append(((hidden * real[..., None]).sum(1) / real.sum(1, keepdim=True)).numpy())
    return np.concatenate(vectors)


def probe_mcc(encoder: Encoder, tokenizer, task: str) -> float:
    """Validation MCC of a logistic regression on frozen mean-pooled embeddings of a GUE task."""
    (train_x, train_y), (valid_x, valid_y) = read_split(task, "train"), read_split(task, "dev")
    probe = LogisticRegression(max_iter=2000).fit(mean_pooled(encoder, tokenizer, train_x), train_y)
    return matthews_corrcoef(valid_y, probe.predict(mean_pooled(encoder, tokenizer, valid_x)))


@pytest.mark.parametrize(("name", "task"), [("dna-gue-mlm-196k", "prom/prom_core_tata"),
                                            ("dna-gue-3mer-mlm-196k", "mouse/2")])
def test_frozen_embeddings_carry_what_untrained_ones_do_not(name, task):
    """A task where the tokens alone do not give the answer away: for 3-mers the untrained encoder's
    embeddings already separate TATA promoters (position-aligned tokens), so its probe is a TF task."""
    checkpoint = polymask.load_checkpoint(name)
    pretrained = probe_mcc(checkpoint.build_encoder(), checkpoint.tokenizer, task)
    untrained = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        untrained.append(probe_mcc(Encoder(checkpoint.encoder_config, checkpoint.vocab_size), checkpoint.tokenizer, task))
    assert pretrained > max(untrained) + 0.08, (pretrained, untrained)


def test_its_export_is_checked_on_real_sequences_though_its_corpus_is_not_on_this_machine(tmp_path):
    """The run's corpus (runs/gue-corpus/corpus.txt) does not ship; the export checks itself on the DNA
    modality's built-in corpus instead of skipping the check."""
    assert main(["export", "--checkpoint", NAMES[0], "--out", str(tmp_path / "hf")]) == 0
    card = (tmp_path / "hf" / "README.md").read_text()
    assert "on 8 real records" in card and "not checked" not in card
    assert "This tokenizer spells a sequence as polymask does" in card and "with `truncation=True`" in card
    # transformers alone spells a sequence as polymask does: lower case, RNA's U, other IUPAC codes, spaces
    from transformers import PreTrainedTokenizerFast

    from polymask.data.records import normalize_record
    from polymask.modalities import build_modality

    checkpoint = read_checkpoint(NAMES[0])
    modality = build_modality(checkpoint.run_config.modality)
    exported = PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "hf" / "tokenizer.json"))
    for raw in ("acgtTGCAagg", "ACGUUGCA", "ACRTYGKAMNN", "ACG TTG\nCAA"):
        expected = checkpoint.tokenizer.encode(modality.tokenizer_input(normalize_record(modality, raw))).ids
        assert exported(raw)["input_ids"] == expected, raw
        assert checkpoint.tokenizer.token_to_id("[UNK]") not in expected
