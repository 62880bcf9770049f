"""Keeping a benchmark's held-out molecules out of a pretraining corpus (data.exclude, benchmark-heldout)."""
import json
from pathlib import Path

import pytest

from polymask.cli import main
from polymask.config import DataConfig, build_run_config
from polymask.data.corpus import prepare_corpus
from polymask.errors import DataError
from polymask.modalities import MODALITIES


def prepare(sources, tmp_path, exclude=()):
    modality = MODALITIES.get("smiles")()
    return prepare_corpus(modality, modality.load_tokenizer(), sources, column=None, max_len=64, val_fraction=0.0,
                          max_val_records=0, seed=0, cache_dir=tmp_path / "cache", strict=True, exclude=exclude)


def decoded(corpus) -> set[str]:
    modality = MODALITIES.get("smiles")()
    tokenizer = modality.load_tokenizer()
    return {modality.decode(tokenizer, corpus.train[i].tolist()) for i in range(len(corpus.train))}


def test_excluded_molecules_leave_the_corpus_after_canonicalisation_and_are_counted_per_file(tmp_path):
    corpus = tmp_path / "corpus.smi"
    corpus.write_text("CCO\nc1ccccc1O\nCCN\nOC(=O)C\n")
    held = tmp_path / "held"
    held.mkdir()
    (held / "a-test.smi").write_text("OCC\n")  # ethanol written another way
    (held / "b-valid.smi").write_text("Oc1ccccc1\nOCC\nC1CC not a molecule\n")
    (held / "heldout.json").write_text("{}")  # the summary benchmark-heldout writes: not records
    result = prepare([corpus], tmp_path, exclude=[held])  # strict: held-out records are not invalid ones
    assert result.report.held_out == 2 and result.report.skipped == 0
    assert result.report.held_out_by_file == {"a-test.smi": 1, "b-valid.smi": 2}
    assert decoded(result) == {"CCN", "CC(=O)O"}
    without = prepare([corpus], tmp_path)
    assert without.report.cache != result.report.cache and len(without.train) == 4


def test_an_exclusion_that_empties_the_corpus_or_is_missing_ends_in_one_line(tmp_path):
    corpus = tmp_path / "corpus.smi"
    corpus.write_text("CCO\n")
    (tmp_path / "all.smi").write_text("CCO\n")
    with pytest.raises(DataError, match="every valid record of the corpus is in data.exclude"):
        prepare([corpus], tmp_path, exclude=[tmp_path / "all.smi"])
    with pytest.raises(DataError, match="missing.smi is neither a file nor a folder"):
        prepare([corpus], tmp_path, exclude=[tmp_path / "missing.smi"])


def test_exclude_cannot_be_combined_with_streaming():
    with pytest.raises(Exception, match="data.exclude needs the cached corpus"):
        build_run_config({"modality": "smiles", "objective": "mlm",
                          "data": {"exclude": ["held"], "streaming": True}})


def test_relative_corpus_paths_are_found_under_the_data_root(tmp_path, monkeypatch):
    (tmp_path / "smiles").mkdir()
    (tmp_path / "smiles" / "mols.smi").write_text("CCO\n")
    monkeypatch.chdir(tmp_path / "smiles")
    assert DataConfig(paths=["mols.smi"]).corpus_paths() == [Path("mols.smi")]  # the working directory first
    monkeypatch.chdir(tmp_path.parent)
    assert DataConfig(paths=["smiles/mols.smi"], root=tmp_path).corpus_paths() == [tmp_path / "smiles" / "mols.smi"]
    monkeypatch.setenv("POLYMASK_DATA_DIR", str(tmp_path))
    assert DataConfig(paths=["smiles/mols.smi"]).corpus_paths() == [tmp_path / "smiles" / "mols.smi"]
    with pytest.raises(DataError, match=r"corpus file smiles/other.smi not found from .* nor under"):
        DataConfig(paths=["smiles/other.smi"]).corpus_paths()


def test_benchmark_heldout_writes_the_valid_and_test_inputs_of_the_split_the_benchmark_uses(tmp_path, capsys):
    from polymask.modalities import MODALITIES as registry
    from polymask.tasks.data.spec import load_task_spec

    out = tmp_path / "held"
    assert main(["benchmark-heldout", "moleculenet", "--tasks", "esol", "--out", str(out)]) == 0
    assert "data.exclude" in capsys.readouterr().out
    summary = json.loads((out / "heldout.json").read_text())
    spec = load_task_spec("moleculenet/esol")
    task = spec.task_kind.load(spec, registry.get("smiles")(), None)
    test = (out / "esol-test.smi").read_text().splitlines()
    assert sorted(test) == sorted({inputs[0] for inputs in task.test.inputs})
    assert summary["records"] == {"esol-valid.smi": len({i[0] for i in task.valid.inputs}),
                                  "esol-test.smi": len(test)}
    assert not set(test) & {inputs[0] for inputs in task.train.inputs}
