"""Whole genomes: the phage lambda genome (48,502 nt) is windowed so that every base is in exactly one
window, N runs and ambiguity codes included, and the genome recipe pretrains on it."""
import gzip
from pathlib import Path

import pytest

from polymask.config import build_run_config, load_yaml, merge
from polymask.data.corpus import prepare_corpus
from polymask.modalities import build_modality
from polymask.training.trainer import train

LAMBDA = Path(__file__).parent / "data" / "lambda_phage.fa.gz"
RECIPE = "dna-genome-mlm-small"
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def genome() -> str:
    lines = gzip.open(LAMBDA, "rt").read().splitlines()
    assert lines[0].startswith(">gi|9626243|ref|NC_001416.1|")
    return "".join(lines[1:])


def windows_of(fasta: Path, tmp_path: Path):
    """The recipe's modality and windows (token ids) of ``fasta``, in corpus order."""
    config = build_run_config(load_yaml(RECIPE))
    modality = build_modality(config.modality)
    tokenizer = modality.load_tokenizer()
    corpus = prepare_corpus(modality, tokenizer, [fasta], column=None, max_len=config.data.max_len,
                            val_fraction=0.0, max_val_records=0, seed=0, cache_dir=tmp_path / "cache", strict=True)
    ids = [corpus.train[i].tolist() for i in range(len(corpus.train))]
    return modality, tokenizer, ids, config.data.max_len


def test_lambda_genome_windows_cover_every_base_once(genome, tmp_path):
    assert len(genome) == 48502 and set(genome) == set("ACGT")
    modality, tokenizer, ids, max_len = windows_of(LAMBDA, tmp_path)
    tokens = 48502 // 6 + 48502 % 6  # 8083 6-mers and 4 single bases left over
    assert len(ids) == -(-tokens // (max_len - 2)) == 16
    assert all(len(w) <= max_len and w[0] == tokenizer.token_to_id("[CLS]") for w in ids)
    assert "".join(modality.decode(tokenizer, w) for w in ids) == genome


def test_n_runs_and_ambiguity_codes_are_windowed_as_single_n_tokens(genome, tmp_path):
    gapped = genome[:20000].lower() + "N" * 1001 + "RYK" + genome[20000:]  # soft-masked, a gap, IUPAC codes
    fasta = tmp_path / "two.fa"
    fasta.write_text(">gapped\n" + "\n".join(gapped[i:i + 60] for i in range(0, len(gapped), 60)) + "\n>plain\n" + genome[:3000] + "\n")
    modality, tokenizer, ids, _ = windows_of(fasta, tmp_path)
    normalised = genome[:20000] + "N" * 1004 + genome[20000:]
    decoded = [modality.decode(tokenizer, w) for w in ids]
    assert "".join(decoded) == normalised + genome[:3000]
    assert decoded[-1] == genome[:3000]  # a window never spans two records
    n_id = tokenizer.token_to_id("N")
    assert sum(w.count(n_id) for w in ids) == 1004
    assert tokenizer.token_to_id("[UNK]") not in {i for w in ids for i in w}


def test_genome_recipe_pretrains_on_lambda(tmp_path):
    raw = merge(load_yaml(RECIPE), {"data": {"paths": [str(LAMBDA)]}, "model": {"preset": "tiny"}, "out": str(tmp_path / "run"),
                                   "train": {"max_steps": 3, "batch_size": 4, "warmup_steps": 1, "progress": False, "precision": "fp32"}})
    summary = train(raw)
    assert (summary["records"], summary["train_sequences"], summary["valid_sequences"]) == (1, 16, 0)
    assert summary["steps"] == 3 and summary["unknown_tokens"] == 0 and summary["final_val_loss"] is None
    assert Path(summary["checkpoint"]).is_dir()
