"""End to end on real DNA tasks: a tiny encoder pretrained on 16S fine-tuned on splice junctions, the k-mer
logistic-regression reference, and `polymask finetune` / `polymask benchmark dna`."""
import json

import numpy as np
import pytest

from polymask.cli import main
from polymask.modalities.dna import Dna
from polymask.tasks.data import load_task
from polymask.tasks.dna import kmer_codes, kmer_logistic_regression, kmer_profiles
from polymask.tasks.finetune import FinetuneConfig, finetune
from polymask.tasks.spec import load_task_spec
from polymask.training.checkpoint import load_checkpoint
from polymask.training.trainer import train
from tests.conftest import tiny_config  # imported here, not in a fixture: importing it sets torch's threads

KMER_REFERENCE = "k-mer profiles (k=1-6) + logistic regression"
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    run = tmp_path_factory.mktemp("pretrained") / "tiny-dna"
    train(tiny_config("dna", run, max_steps=30))
    return run


@pytest.fixture(scope="module")
def splice():
    return load_task(load_task_spec("dna/splice"), Dna())


def majority_share(labels: np.ndarray) -> float:
    return np.bincount(labels[:, 0].astype(int)).max() / len(labels)


def test_finetuned_encoder_beats_the_majority_class_on_splice(tiny_checkpoint, splice):
    checkpoint = load_checkpoint(tiny_checkpoint)
    result = finetune(splice, checkpoint.build_encoder(), checkpoint.tokenizer, Dna(),
                      FinetuneConfig(epochs=4, lr=2e-3, precision="fp32"), seed=0)
    assert result["n_train"] == 2400 and result["truncated"] == 0
    assert result["test"]["accuracy"] > majority_share(splice.test.labels) + 0.1, result["test"]
    assert result["test"]["mcc"] > 0.3


def test_kmer_profiles_are_per_k_frequencies_without_n():
    assert kmer_codes("ACGTNAC", 2).tolist() == [1, 6, 11, 1]  # AC CG GT (TN NA skipped) AC
    profiles = kmer_profiles(["ACGTNAC", "GG"], k_values=(1, 2)).toarray()
    assert profiles.shape == (2, 4 + 16)
    assert profiles[0, :4].tolist() == pytest.approx([2 / 6, 2 / 6, 1 / 6, 1 / 6])
    assert profiles[0, 4 + 1] == pytest.approx(0.5) and profiles[0, 4:].sum() == pytest.approx(1.0)
    assert profiles[1, 2] == 1.0 and profiles[1, 4 + 10] == 1.0  # G, GG


def test_kmer_reference_beats_the_majority_class_and_ignores_the_seed(splice):
    first, second = kmer_logistic_regression(splice, 0), kmer_logistic_regression(splice, 1)
    assert first["test"] == second["test"]
    assert first["test"]["accuracy"] > majority_share(splice.test.labels) + 0.05 and first["test"]["mcc"] > 0.3


def test_finetune_cli_on_a_dna_task(tiny_checkpoint, tmp_path):
    out = tmp_path / "splice"
    assert main(["finetune", "--task", "dna/splice", "--checkpoint", str(tiny_checkpoint), "--epochs", "1",
                 "--out", str(out), "--quiet"]) == 0
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert [(r["system"], r["task"], r["n_test"]) for r in rows] == [("tiny-dna (mlm)", "dna/splice", 300)]
    assert {"mcc_mean", "accuracy_mean", "macro_f1_mean"} <= set(rows[0])


def test_benchmark_dna_has_the_capped_references_and_reports_missing_tasks(tiny_checkpoint, tmp_path, monkeypatch):
    monkeypatch.delenv("POLYMASK_DATA_DIR", raising=False)
    out = tmp_path / "bench"
    assert main(["benchmark", "dna", "--checkpoint", str(tiny_checkpoint), "--tasks", "ecoli_promoters", "tf_0",
                 "--seeds", "2", "--epochs", "2", "--max-train-examples", "40", "--data-dir", str(tmp_path / "empty"),
                 "--out", str(out), "--quiet"]) == 0
    assert {p.name for p in out.iterdir()} >= {"results.md", "results.csv", "results.json", "results.png", "cells"}
    report = json.loads((out / "results.json").read_text())
    assert {row["system"] for row in report["rows"]} == {"tiny-dna (mlm)", "no pretraining", KMER_REFERENCE}
    assert all(row["task"] == "dna/ecoli_promoters" and row["seeds"] == 2 for row in report["rows"])
    assert [row["n_train"] for row in report["rows"]] == [40, 40, 40]  # the reference gets the same cap
    assert "GUE/tf/0/train.csv' not found" in report["missing"]["dna/tf_0"]
    markdown = (out / "results.md").read_text()
    assert "ecoli_promoters mcc ↑" in markdown and "## Missing tasks (not run)" in markdown
