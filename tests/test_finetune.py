"""End to end: a tiny pretrained checkpoint fine-tuned on real MoleculeNet tasks, and the benchmark CLI."""
import json
import re

import numpy as np
import pytest

from polymask.checkpoints.pretrained import read_checkpoint
from polymask.cli import main
from polymask.finetune_config import FinetuneConfig
from polymask.modalities import MODALITIES
from polymask.errors import DataError
from polymask.tasks.data.loading import load_task, with_caps
from polymask.tasks.data.spec import load_task_spec
from polymask.tasks.finetune.tables import finetune
from polymask.training.trainer import train

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    from tests.conftest import tiny_config

    run = tmp_path_factory.mktemp("pretrained") / "tiny-smiles"
    train(tiny_config("smiles", run, max_steps=30))
    return run


def test_checkpoint_loads_encoder_without_objective_modules(tiny_checkpoint):
    checkpoint = read_checkpoint(tiny_checkpoint)
    assert any(name.startswith("head.") for name in checkpoint.weights)
    encoder = checkpoint.build_encoder()
    assert not any(name.startswith("head") for name in encoder.state_dict())


def test_finetuned_regression_beats_the_constant_predictor(tiny_checkpoint):
    checkpoint = read_checkpoint(tiny_checkpoint)
    modality = MODALITIES.get("smiles")()
    task = load_task(load_task_spec("moleculenet/esol"), modality)
    result = finetune(task, checkpoint.build_encoder(), checkpoint.tokenizer, modality,
                      FinetuneConfig(epochs=6, lr=1e-3, precision="fp32"), seed=0)
    constant = np.sqrt(np.mean((task.test.labels - task.train.labels.mean()) ** 2))
    assert result["test"]["rmse"] < 0.85 * constant, (result["test"], constant)
    assert result["n_train"] == 902 and 1 <= result["best_epoch"] <= 6


def test_finetuned_classifier_beats_chance(tiny_checkpoint):
    checkpoint = read_checkpoint(tiny_checkpoint)
    modality = MODALITIES.get("smiles")()
    task = load_task(load_task_spec("moleculenet/bbbp"), modality)
    result = finetune(task, checkpoint.build_encoder(), checkpoint.tokenizer, modality,
                      FinetuneConfig(epochs=3, lr=1e-3, precision="fp32"), seed=0)
    assert result["test"]["roc_auc"] > 0.6


def test_benchmark_cli_writes_tables_and_resumes(tiny_checkpoint, tmp_path):
    out = tmp_path / "bench"
    args = ["benchmark", "moleculenet", "--checkpoint", str(tiny_checkpoint), "--tasks", "freesolv",
            "--seeds", "2", "--epochs", "2", "--out", str(out), "--quiet"]
    assert main(args) == 0
    assert {p.name for p in out.iterdir()} >= {"results.md", "results.csv", "results.json", "results.png", "cells"}
    report = json.loads((out / "results.json").read_text())
    systems = {row["system"] for row in report["rows"]}
    assert systems == {"tiny-smiles (mlm)", "no pretraining", "ECFP4 + random forest (500 trees)"}
    assert all(row["seeds"] == 2 and row["n_test"] == 65 for row in report["rows"])
    assert "freesolv rmse ↓" in (out / "results.md").read_text()
    # the arithmetic the neural cells ran in is named (``auto`` differs between machines)
    used = {cell["precision"] for cell in report["cells"] if cell["system"] != "ECFP4 + random forest (500 trees)"}
    assert len(used) == 1 and used <= {"fp32", "bf16"}
    assert f"- precision used: {used.pop()} (4 cells)" in (out / "results.md").read_text()
    # and where they ran (a CPU and a GPU cell of one recipe differ: issue 59), each row's device and threads
    import torch

    from polymask.runtime import machine

    place = f"{machine()['device']}, {torch.get_num_threads()} thread{'' if torch.get_num_threads() == 1 else 's'}"
    neural = [cell for cell in report["cells"] if cell["system"] != "ECFP4 + random forest (500 trees)"]
    assert {(cell["device"], cell["threads"]) for cell in neural} == {(machine()["device"], torch.get_num_threads())}
    assert f"- where the rows ran: tiny-smiles (mlm), no pretraining: {place} (2 cells)" in \
        (out / "results.md").read_text()
    # the validation scores, on which settings are chosen, have a table of their own with the same rows
    valid = {(row["system"], row["task"]): row for row in report["valid_rows"]}
    assert set(valid) == {(row["system"], row["task"]) for row in report["rows"]}
    cell = next(c for c in report["cells"] if c["system"] == "no pretraining" and c["seed"] == 0)
    assert valid[("no pretraining", "moleculenet/freesolv")]["rmse_values"][0] == cell["valid"]["rmse"]
    assert "## Validation scores" in (out / "results.md").read_text()

    cells = sorted((out / "cells").glob("*/*/seed-*.json"))
    assert len(cells) == 6
    # a model folder per cell of the pretrained checkpoint; none for the reference rows
    models = sorted(p.parent for p in (out / "cells").glob("*/*/seed-*/finetuned.json"))
    assert [(m.parent.parent.name, m.name) for m in models] == [("tiny-smiles-mlm", "seed-0"),
                                                                ("tiny-smiles-mlm", "seed-1")]
    assert all(f"`{m.relative_to(out)}`" in (out / "results.md").read_text() for m in models)
    stamps = [path.stat().st_mtime_ns for path in cells + [m / "model.safetensors" for m in models]]
    assert main(args) == 0
    # finished cells (and their models) are reused, not rerun
    assert [path.stat().st_mtime_ns for path in cells + [m / "model.safetensors" for m in models]] == stamps


def test_checkpoints_of_one_run_are_separate_rows_with_their_pretraining_tokens(tmp_path):
    from tests.conftest import tiny_config

    run = tmp_path / "curve"
    train(tiny_config("smiles", run, max_steps=20, save_every=10, keep_checkpoints=5))
    steps = [run / "checkpoints" / "step-000010", run / "checkpoints" / "step-000020"]
    out = tmp_path / "bench"
    args = ["benchmark", "moleculenet", "--tasks", "freesolv", "--seeds", "2", "--epochs", "1", "--out", str(out),
            "--quiet", "--no-save-models"]
    assert main(args + [arg for step in steps for arg in ("--checkpoint", str(step))]) == 0
    report = json.loads((out / "results.json").read_text())
    tokens = report["pretraining_tokens"]
    assert list(tokens) == ["curve step-000010 (mlm)", "curve step-000020 (mlm)"]
    assert 0 < tokens["curve step-000010 (mlm)"] < tokens["curve step-000020 (mlm)"]
    text = (out / "results.md").read_text()
    assert "## Pretrained rows against no pretraining" in text and "## Against pretraining tokens" in text
    assert (out / "scaling.png").is_file()


def test_a_short_fine_tuning_reports_its_compute_in_seconds_not_zero_minutes(tiny_smiles_model):
    from polymask.benchmarking.report import duration

    report = (tiny_smiles_model.parents[3] / "results.md").read_text()  # out/cells/<system>/<task>/seed-N
    assert re.search(r"fine-tuning compute \d+\.\d s summed over all cells", report), report[:600]
    assert [duration(seconds) for seconds in (2.34, 90, 7200)] == ["2.3 s", "1.5 min", "2.0 h"]
    assert re.search(r"\n\| moleculenet/esol \| [^|]+ \| 1 \| \d+\.\d s \| 1 \| 1 \|\n", report), report


def test_the_compute_table_sums_seeds_per_task_and_row_and_lists_epochs_by_seed():
    from polymask.benchmarking.report import _compute_section

    def cell(system, seed, seconds, **epochs):
        return {"system": system, "task": "dna/tf_2", "seed": seed, "time_s": seconds, **epochs}

    cells = [cell("encoder", 1, 600, best_epoch=13, epochs_run=21), cell("encoder", 0, 540, best_epoch=6, epochs_run=14),
             cell("k-mer", 0, 30), cell("k-mer", 1, 36), cell("encoder + test-time average", 0, 0.0, best_epoch=6,
                                                                 epochs_run=14)]
    systems = ["encoder", "encoder + test-time average", "k-mer", "unfinished"]
    assert _compute_section(cells, systems, ["dna/tf_2", "dna/tf_0"])[-3:] == ["|---|---|---:|---:|---|---|",
        "| dna/tf_2 | encoder | 2 | 19.0 min | 14, 21 | 6, 13 |", "| dna/tf_2 | k-mer | 2 | 1.1 min | – | – |"]
    assert _compute_section([], ["encoder"], ["dna/tf_2"]) == []


def test_precision_used_counts_fine_tuned_cells_once_not_their_test_time_averaged_rows():
    from polymask.benchmarking.report import precisions

    cells = [{"system": "encoder", "best_epoch": 3, "precision": "bf16"},
             {"system": "encoder + test-time average", "best_epoch": 3, "precision": "bf16"},
             {"system": "old", "best_epoch": 2}, {"system": "k-mer"}]
    assert precisions(cells) == "bf16 (1 cell), not recorded (1 cell)"


def test_a_cap_that_leaves_a_scored_subset_with_one_class_is_one_line():
    bbbp = load_task(load_task_spec("moleculenet/bbbp"), MODALITIES.get("smiles")())
    assert with_caps(bbbp, 0) is bbbp  # no caps: the task as it is
    capped = with_caps(bbbp, 0, train=50, valid=60, test=60)
    assert (len(capped.train), len(capped.valid), len(capped.test)) == (50, 60, 60)
    with pytest.raises(DataError, match=r"--max-valid-examples 1 leaves moleculenet/bbbp's validation subset with one "
                                        r"class: it holds one class only .*, so roc_auc is undefined there; raise the cap"):
        with_caps(bbbp, 0, valid=1)
    with pytest.raises(DataError, match="--max-test-examples 1 leaves moleculenet/bbbp's test subset"):
        with_caps(bbbp, 0, test=1)
