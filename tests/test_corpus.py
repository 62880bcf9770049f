"""Reading corpora, reporting invalid records with file and line, caching, windowing, packing."""
import gzip
import json

import pytest
from datasets import Dataset

from polymask.data.corpus import prepare_corpus
from polymask.data.readers import read_records
from polymask.errors import DataError
from polymask.modalities import MODALITIES
from polymask.modalities.dna import Dna, DnaConfig


def prepare(modality, sources, tmp_path, **overrides):
    settings = dict(column=None, max_len=64, val_fraction=0.0, max_val_records=0, seed=0,
                    cache_dir=tmp_path / "cache", strict=False)
    settings.update(overrides)
    return prepare_corpus(modality, modality.load_tokenizer(), sources, **settings)


def test_invalid_smiles_are_reported_with_file_line_and_reason(tmp_path):
    corpus = tmp_path / "mols.smi"
    corpus.write_text("CCO ethanol\nC1CC broken\n\nc1ccccc1 benzene\nC(C)(C)(C)(C)C pentavalent\n")
    result = prepare(MODALITIES.get("smiles")(), [corpus], tmp_path)
    assert result.report.records == 4 and result.report.skipped == 2
    skipped = [json.loads(line) for line in result.skipped_file.read_text().splitlines()]
    assert [(s["source"], s["line"]) for s in skipped] == [(str(corpus), 2), (str(corpus), 5)]
    assert "syntax" in skipped[0]["reason"] and "valence" in skipped[1]["reason"]
    assert len(result.train) == 2


def test_strict_mode_fails_on_the_first_invalid_record(tmp_path):
    corpus = tmp_path / "mols.csv"
    corpus.write_text("name,smiles\nethanol,CCO\nbad,C1CC\n")
    with pytest.raises(DataError, match=r"mols\.csv:3: RDKit cannot parse"):
        prepare(MODALITIES.get("smiles")(), [corpus], tmp_path, strict=True)


def test_dna_invalid_characters_are_reported_in_fasta(tmp_path):
    corpus = tmp_path / "seqs.fa.gz"
    with gzip.open(corpus, "wt") as handle:
        handle.write(">one\nACGTACGT\nacgt\n>two <gv> odd header\nACGTXACG\n>three\nNNNNACGT\n")
    result = prepare(Dna(), [corpus], tmp_path)
    assert result.report.records == 3 and result.report.skipped == 1
    assert result.report.skipped_examples[0]["line"] == 4
    assert "'X' at position 4" in result.report.skipped_examples[0]["reason"]


def test_readers_cover_every_format(tmp_path):
    (tmp_path / "a.txt").write_text("one\n\ntwo\n")
    (tmp_path / "a.tsv").write_text("id\tsequence\n1\tACGT\n")
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\nnot json\n')
    Dataset.from_dict({"smiles": ["CCO"]}).to_parquet(str(tmp_path / "a.parquet"))
    assert [(r.line, r.text) for r in read_records(tmp_path / "a.txt")] == [(1, "one"), (3, "two")]
    assert [r.text for r in read_records(tmp_path / "a.tsv", default_columns=("sequence",))] == ["ACGT"]
    jsonl = list(read_records(tmp_path / "a.jsonl", default_columns=("text",)))
    assert jsonl[0].text == "x" and jsonl[1].error.startswith("not valid JSON") and jsonl[1].line == 2
    assert [r.text for r in read_records(tmp_path / "a.parquet", default_columns=("smiles",))] == ["CCO"]
    with pytest.raises(DataError, match="unsupported file type '.xyz'"):
        list(read_records(tmp_path / "a.xyz") if (tmp_path / "a.xyz").write_text("") is not None else [])
    with pytest.raises(DataError, match="no column 'nope'"):
        list(read_records(tmp_path / "a.tsv", column="nope"))


def test_datasets_input_is_accepted(tmp_path):
    dataset = Dataset.from_dict({"smiles": ["CCO", "c1ccccc1", "xx"]})
    result = prepare(MODALITIES.get("smiles")(), dataset, tmp_path)
    assert len(result.train) == 2 and result.report.skipped_examples[0]["source"] == "<dataset>"


def test_cache_is_reused_and_keyed_by_content(tmp_path, monkeypatch):
    import polymask.data.corpus as corpus_module

    corpus = tmp_path / "mols.smi"
    corpus.write_text("CCO\nCCN\n")
    first = prepare(MODALITIES.get("smiles")(), [corpus], tmp_path)
    monkeypatch.setattr(corpus_module, "_build", lambda *a, **k: pytest.fail("cache not reused"))
    again = prepare(MODALITIES.get("smiles")(), [corpus], tmp_path)
    assert again.report.cache == first.report.cache
    corpus.write_text("CCO\nCCC\n")
    monkeypatch.undo()
    changed = prepare(MODALITIES.get("smiles")(), [corpus], tmp_path)
    assert changed.report.cache != first.report.cache


def test_long_dna_is_windowed_covering_every_base_once(tmp_path):
    sequence = ("ACGTTGCAAC" * 130) + "NNACG"  # 1305 bases, with N and a leftover
    corpus = tmp_path / "genome.fa"
    corpus.write_text(">g\n" + sequence + "\n")
    modality = Dna(DnaConfig(k=6))
    result = prepare(modality, [corpus], tmp_path, max_len=32)
    tokenizer = modality.load_tokenizer()
    windows = [result.train[i].tolist() for i in range(len(result.train))]
    assert all(len(w) <= 32 and w[0] == 2 and w[-1] == 3 for w in windows)
    assert "".join(modality.decode(tokenizer, w) for w in windows) == sequence


def test_smiles_longer_than_max_len_are_skipped_and_counted(tmp_path):
    corpus = tmp_path / "mols.smi"
    corpus.write_text("CCO\n" + "C" * 100 + "\n")
    result = prepare(MODALITIES.get("smiles")(), [corpus], tmp_path, max_len=32)
    assert result.report.skipped == 1 and "more than max_len" in result.report.skipped_examples[0]["reason"]


def test_text_is_packed_into_full_blocks(tmp_path):
    corpus = tmp_path / "book.txt"
    corpus.write_text("\n".join(f"Paragraph number {i} of a long novel about manners." for i in range(200)))
    result = prepare(MODALITIES.get("text")(), [corpus], tmp_path, max_len=32)
    lengths = result.train.lengths
    assert (lengths[:-1] == 32).all() and lengths[-1] <= 32


def test_validation_split_is_record_level_and_disjoint(tmp_path):
    corpus = tmp_path / "mols.smi"
    corpus.write_text("\n".join("C" * n + "O" for n in range(1, 41)) + "\n")
    result = prepare(MODALITIES.get("smiles")(), [corpus], tmp_path, val_fraction=0.25, max_val_records=100)
    train = {tuple(result.train[i]) for i in range(len(result.train))}
    valid = {tuple(result.valid[i]) for i in range(len(result.valid))}
    assert len(valid) == 10 and len(train) == 30 and not train & valid


def test_preparation_uses_every_core_only_for_large_corpora():
    import os

    from polymask.data.corpus import AUTO_PARALLEL_RECORDS, processes

    cores = len(os.sched_getaffinity(0))
    assert processes(None, 1000) is None  # small corpora: no worker processes to start
    assert processes(None, AUTO_PARALLEL_RECORDS) == (cores if cores > 1 else None)
    assert processes(3, 10) == 3 and processes(1, 10**7) is None  # an explicit data.num_proc wins
