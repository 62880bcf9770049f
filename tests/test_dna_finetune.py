"""End to end on real DNA tasks: a tiny encoder pretrained on 16S fine-tuned on splice junctions, the k-mer
logistic-regression reference, and `polymask finetune` / `polymask benchmark dna`."""
import json
import random

import numpy as np
import pytest

from polymask.benchmarking.families.dna import kmer_codes, kmer_logistic_regression, kmer_profiles
from polymask.checkpoints.pretrained import read_checkpoint
from polymask.cli import main
from polymask.finetune_config import FinetuneConfig
from polymask.modalities.dna import Dna, DnaConfig
from polymask.tasks.data.loading import TaskSplit, load_task
from polymask.tasks.data.spec import load_task_spec
from polymask.tasks.finetune.tables import augmented_epochs, encode_split, finetune
from polymask.training.trainer import train
from tests.conftest import tiny_config  # imported here, not in a fixture: importing it sets torch's threads


KMER_REFERENCE = "k-mer profiles (k=1-6) + logistic regression"
pytestmark = [pytest.mark.integration,  # trains, fine-tunes or runs the command line end to end
              pytest.mark.usefixtures("one_torch_thread")]


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
    checkpoint = read_checkpoint(tiny_checkpoint)
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
                 "--seeds", "2", "--epochs", "2", "--max-train-examples", "40", "--max-valid-examples", "10",
                 "--max-test-examples", "12", "--data-dir", str(tmp_path / "empty"),
                 "--out", str(out), "--quiet"]) == 0
    assert {p.name for p in out.iterdir()} >= {"results.md", "results.csv", "results.json", "results.png", "cells"}
    report = json.loads((out / "results.json").read_text())
    assert {row["system"] for row in report["rows"]} == {"tiny-dna (mlm)", "no pretraining", KMER_REFERENCE}
    assert all(row["task"] == "dna/ecoli_promoters" and row["seeds"] == 2 for row in report["rows"])
    # the reference is trained and scored on the same capped subsets
    assert [(row["n_train"], row["n_valid"], row["n_test"]) for row in report["rows"]] == [(40, 10, 12)] * 3
    assert "GUE/tf/0/train.csv' not found" in report["missing"]["dna/tf_0"]
    markdown = (out / "results.md").read_text()
    assert "ecoli_promoters mcc ↑" in markdown and "## Missing tasks (not run)" in markdown


def test_dna_augmentation_draws_only_what_the_task_label_is_invariant_to():
    sequence = "ACGTTGCAAGGCTTAN"
    reverse = sequence.translate(str.maketrans("ACGTN", "TGCAN"))[::-1]
    rng = random.Random(0)
    assert {Dna().augmented().augment(sequence, rng) for _ in range(20)} == {sequence}  # a promoter: nothing to vary
    shifted = {Dna().augmented(["shift"]).augment(sequence, rng) for _ in range(200)}
    assert all(sequence.endswith(v) for v in shifted)
    assert {len(sequence) - len(v) for v in shifted} == set(range(6))  # every frame of a 6-mer
    strand_free = {Dna().augmented(["reverse_complement"]).augment(sequence, rng) for _ in range(200)}
    assert all(len(v) == len(sequence) for v in strand_free)
    assert all(sequence.endswith(v) or reverse.endswith(v) for v in strand_free)
    assert any(reverse.endswith(v) for v in strand_free) and any(sequence.endswith(v) for v in strand_free)
    assert Dna(DnaConfig(k=6, overlapping=True)).augmented(["shift"]).config.frame_shift is False  # no frame to shift
    assert Dna(DnaConfig(augment=True)).augment(sequence, rng) in {sequence, reverse}  # pretraining's: strands only


def test_augmented_finetuning_draws_new_variants_each_epoch_and_never_touches_evaluation(splice):
    split = TaskSplit(splice.train.inputs[:50], splice.train.labels[:50])
    modality = Dna()
    tokenizer = modality.load_tokenizer()
    epochs = augmented_epochs(split, modality, tokenizer, 64, seed=0, invariances=["reverse_complement", "shift"])
    plain = encode_split(split, modality, tokenizer, 64).sequences
    first, again, second = epochs(0).sequences, epochs(0).sequences, epochs(1).sequences
    assert first == again and first != second and first != plain
    assert augmented_epochs(split, modality, tokenizer, 64, 0, ["reverse_complement", "shift"])(1).sequences == second


def test_augmented_finetuning_runs_end_to_end(tiny_checkpoint, splice):
    checkpoint = read_checkpoint(tiny_checkpoint)
    result = finetune(splice, checkpoint.build_encoder(), checkpoint.tokenizer, Dna(),
                      FinetuneConfig(epochs=2, lr=2e-3, precision="fp32", augment=True, max_train_examples=300), seed=0)
    assert result["n_train"] == 300 and result["n_test"] == 300 and result["test"]["mcc"] == result["test"]["mcc"]


def test_a_dna_table_declares_what_its_labels_are_invariant_to(tiny_checkpoint, tmp_path, capsys):
    """A user's table of TF-binding windows (real GUE mouse/2 rows): the DNA recipe's augmentation and test-time
    averaging vary strands and frames only where --invariant-to says the label allows it, and say so otherwise."""
    import gzip

    from polymask.benchmarking.own_data import nothing_to_vary
    from polymask.tasks.data.own_table import own_task_spec
    from tests.conftest import one_line_error

    from polymask.resources import builtin_dir

    with gzip.open(builtin_dir("tasks") / "dna" / "data" / "GUE" / "mouse" / "2" / "train.csv.gz", "rt") as handle:
        rows = handle.read().splitlines()[:61]
    table = tmp_path / "windows.csv"
    table.write_text("\n".join(rows) + "\n")
    k3 = Dna(DnaConfig(k=3))
    declared = own_task_spec(table, ["label"], k3, invariant_to=["reverse_complement", "shift"])
    plain = own_task_spec(table, ["label"], k3)
    assert declared.invariant_to == ["reverse_complement", "shift"] and plain.invariant_to == []
    recipe = FinetuneConfig(augment=True, test_time_average=True)
    assert nothing_to_vary(recipe, k3, declared) == ""
    assert "augment and test_time_average vary nothing: the table declares no invariance" in \
        nothing_to_vary(recipe, k3, plain)
    overlapping = Dna(DnaConfig(k=3, overlapping=True))  # no reading frame to shift: shift alone varies nothing
    shift_only = own_task_spec(table, ["label"], overlapping, invariant_to=["shift"])
    assert overlapping.varied(["reverse_complement", "shift"]) == ["reverse_complement"]
    assert overlapping.varied(["shift"]) == [] and k3.varied(["shift"]) == ["shift"]
    assert "vary nothing: no record of this model varies under shift" in \
        nothing_to_vary(recipe, overlapping, shift_only)
    code = main(["finetune", "--checkpoint", str(tiny_checkpoint), "--data", str(table), "--target", "label",
                 "--invariant-to", "strand", "--out", str(tmp_path / "out"), "--quiet"])
    one_line_error(capsys, code, "windows.csv", "invariant_to: 'strand' is not a transformation the dna modality knows")
    assert main(["finetune", "--checkpoint", str(tiny_checkpoint), "--data", str(table), "--target", "label",
                 "--invariant-to", "reverse_complement", "shift", "--epochs", "1", "--out", str(tmp_path / "out"),
                 "--quiet"]) == 0
    assert "+ test-time average" in capsys.readouterr().out
