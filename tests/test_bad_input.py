"""Bad records and bad corpora: rejected before they can crash anything, counted, or (--strict) fatal
whichever path the data takes (prepared cache, cache reuse, streaming); nothing hangs."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from polymask.data.corpus import prepare_corpus
from polymask.data.readers import read_records
from polymask.data.records import normalize_record
from polymask.errors import DataError, InvalidRecord
from polymask.modalities import MODALITIES
from polymask.training.trainer import train

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end

TINY = ["--set", "model.preset=tiny", "--set", "train.max_steps=2", "--set", "train.progress=false",
        "--set", "data.max_len=64", "--set", "train.batch_size=8", "--set", "train.precision=fp32"]


def with_deadline(function, seconds: float = 300):
    """Run ``function`` in a thread and fail the test if it has not returned after ``seconds`` (a hang)."""
    outcome: dict = {}

    def target() -> None:
        try:
            outcome["value"] = function()
        except BaseException as exc:  # handed to the test below
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s: it hangs"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def modality(name: str, **options):
    cls = MODALITIES.get(name)
    return cls(cls.Config(name=name, **options))


def smiles_run(make_config, out: Path, data: Path, **data_options) -> dict:
    config = make_config("smiles", out, max_steps=3)
    config["data"].update(paths=[str(data)], **data_options)
    return config


def test_a_huge_valid_smiles_is_skipped_before_rdkit_and_counted(tmp_path, small_smiles_file):
    """RDKit's canonicaliser overflows the stack on a 20,000-atom chain (exit 139): run in a subprocess."""
    data = tmp_path / "huge.smi"
    data.write_text("CCO\n" + "C" * 20_000 + "\nc1ccccc1\n" + small_smiles_file.read_text())
    run = tmp_path / "run"
    result = subprocess.run([sys.executable, "-m", "polymask", "train", "--modality", "smiles", "--objective", "mlm",
                             "--data", str(data), "--out", str(run), *TINY],
                            capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads((run / "summary.json").read_text())
    huge = [e for e in summary["skipped_examples"] if e["line"] == 2]
    assert huge and "20,000 characters" in huge[0]["reason"] and "max_chars" in huge[0]["reason"]
    assert summary["steps"] == 2


def test_a_cache_built_from_another_copy_reports_the_file_passed(tmp_path, make_config, small_smiles_file, monkeypatch):
    """The cache is keyed by content: a run on a copy reuses it, and names the copy it was given."""
    import polymask.data.corpus as corpus_module

    content = "CCO\nC1CC\n" + small_smiles_file.read_text()
    for name in ("first", "second"):
        data = tmp_path / name / "molecules.smi"
        data.parent.mkdir()
        data.write_text(content)
        train(smiles_run(make_config, tmp_path / name / "run", data))
        monkeypatch.setattr(corpus_module, "_build", lambda *a, **k: pytest.fail("cache not reused"))
    run = tmp_path / "second" / "run"
    summary = json.loads((run / "summary.json").read_text())
    logged = [json.loads(line) for line in (run / "skipped_records.jsonl").read_text().splitlines()]
    assert (summary["skipped_examples"][0]["source"], summary["skipped_examples"][0]["line"]) == (str(data), 2)
    assert {entry["source"] for entry in summary["skipped_examples"] + logged} == {str(data)}


def test_the_length_limit_is_a_modality_option():
    smiles = modality("smiles")
    assert smiles.config.max_chars == 4096
    assert normalize_record(smiles, "C" * 4096)
    with pytest.raises(InvalidRecord, match="4,097 characters, over the smiles limit of 4,096"):
        normalize_record(smiles, "C" * 4097)
    short = modality("smiles", max_chars=4)
    with pytest.raises(InvalidRecord, match="max_chars"):
        normalize_record(short, "CCCCC")
    assert modality("dna").config.max_chars is None  # long DNA is windowed, never skipped


def test_strict_fails_on_a_cached_corpus_and_when_streaming(tmp_path, make_config, small_smiles_file):
    lines = small_smiles_file.read_text().splitlines(keepends=True)
    data = tmp_path / "one-bad.smi"
    data.write_text("".join(lines[:30]) + "C1CC\n" + "".join(lines[30:]))
    assert train(smiles_run(make_config, tmp_path / "lenient", data))["skipped_records"] >= 1  # builds the cache
    for name, options in (("cached", {}), ("streaming", {"streaming": True})):
        with pytest.raises(DataError, match=r"one-bad\.smi:31: RDKit cannot parse .*strict mode"):
            train(smiles_run(make_config, tmp_path / name, data, strict=True, **options))


def test_streaming_a_corpus_smaller_than_the_validation_cap_trains_across_epochs(tmp_path, make_config,
                                                                                 small_smiles_file):
    data = tmp_path / "sixty.smi"
    data.write_text("".join(small_smiles_file.read_text().splitlines(keepends=True)[:60]))
    config = make_config("smiles", tmp_path / "run", max_steps=20)
    config["data"].update(paths=[str(data)], streaming=True, max_val_records=1000)
    summary = with_deadline(lambda: train(config))
    assert summary["steps"] == 20 and summary["epochs"] >= 2
    assert summary["valid_sequences"] == 3  # val_fraction 0.05 of the 60, since all 60 fit under the cap


def test_streaming_a_corpus_with_nothing_to_train_on_fails_instead_of_hanging(tmp_path, make_config):
    data = tmp_path / "invalid.smi"
    data.write_text("C1CC\nXyz\n" * 20)
    config = make_config("smiles", tmp_path / "run")
    config["data"].update(paths=[str(data)], streaming=True)
    with pytest.raises(DataError, match="no training sequences"):
        with_deadline(lambda: train(config))


def test_jsonl_values_that_are_not_strings_and_blank_records_are_counted_invalid(tmp_path):
    rows = [{"text": "A sentence worth keeping."}, {"text": 5}, {"text": ["a", "list"]}, {"text": None},
            {"text": {"an": "object"}}, {"text": True}, {"text": "\x00\x01\x02"}, {"text": " \t\u200b\u2028 "},
            {"other": "no text field"}, {"text": "Another real sentence."}]
    data = tmp_path / "records.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    text = modality("text")
    corpus = prepare_corpus(text, text.load_tokenizer(), [data], column="text", max_len=64, val_fraction=0.0,
                            max_val_records=0, seed=0, cache_dir=tmp_path / "cache", strict=False)
    reasons = {item["line"]: item["reason"] for item in map(json.loads, corpus.skipped_file.read_text().splitlines())}
    assert corpus.report.records == 10 and corpus.report.skipped == 8
    assert reasons[2] == "field 'text' is a number, not a string" and reasons[3].endswith("is a list, not a string")
    assert reasons[4].endswith("is null, not a string") and reasons[5].endswith("is an object, not a string")
    assert reasons[6].endswith("is a boolean, not a string")
    assert reasons[7] == reasons[8] == "only whitespace or control characters"
    assert "no column 'text'" in reasons[9]
    with pytest.raises(DataError, match=r"records\.jsonl:2: field 'text' is a number"):
        prepare_corpus(text, text.load_tokenizer(), [data], column="text", max_len=64, val_fraction=0.0,
                       max_val_records=0, seed=0, cache_dir=tmp_path / "cache", strict=True)


def test_a_gzip_stream_cut_mid_file_names_the_last_good_line(tmp_path):
    blob = gzip.compress("".join(f"CC{'C' * (i % 9)}O\n" for i in range(20_000)).encode())
    data = tmp_path / "cut.smi.gz"
    data.write_bytes(blob[:len(blob) // 2])
    with pytest.raises(DataError, match=r"cut\.smi\.gz: the gzip stream ends early \(truncated after line \d+\)"):
        list(read_records(data))


def test_a_ragged_row_is_counted_and_a_file_of_them_fails_naming_the_first(tmp_path):
    data = tmp_path / "table.csv"
    data.write_text("smiles,y\nCCO,1\nCC,O,2\nc1ccccc1,3\n")
    records = list(read_records(data, "smiles"))
    assert [r.error is None for r in records] == [True, False, True]
    assert records[1].line == 3 and records[1].error.startswith("3 fields where the header has 2")


def test_a_smiles_that_rdkit_cannot_sanitise_is_invalid_not_a_crash():
    """Found by benchmarks/fuzz_records.py: DetectChemistryProblems passes, SanitizeMol then raises."""
    with pytest.raises(InvalidRecord, match="Explicit valence for atom # 10 N, 4"):
        normalize_record(modality("smiles"), "N2(C(=O)c1c(cccc1)C\\n2=O)NC(=O)CCC(=O)OC")
