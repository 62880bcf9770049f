"""Every user fault x verb ends the same way: a non-zero exit, one line on stderr naming the file (or
checkpoint), no traceback.

Whole-file faults (``faults.WHOLE_FILE_FAULTS``) run through every verb that reads a user's data
file; corrupt checkpoints (``faults.CHECKPOINT_CORRUPTIONS``) through every verb that loads one.
A new verb joins a matrix with one entry in ``DATA_VERBS`` (and ``DATA_VERB_SOURCES`` if it reads
something other than a pretraining run) or ``CHECKPOINT_VERBS``.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

import pytest
from conftest import one_line_error
from faults import CHECKPOINT_CORRUPTIONS, RESUME_ONLY_CORRUPTIONS, WHOLE_FILE_FAULTS, unreadable

from polymask.cli import main

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end

TINY = ["--set", "model.preset=tiny", "--set", "train.max_steps=2", "--set", "train.progress=false",
        "--set", "data.max_len=64", "--set", "train.batch_size=8"]


def regression_task(data: Path, folder: Path) -> Path:
    """A task spec reading ``data`` as a regression table (smiles -> y)."""
    spec = folder / "fault-task.yaml"
    spec.write_text(f"name: fault\nbenchmark: faults\nmodality: smiles\nkind: regression\nfiles: {{all: {data.name}}}\n"
                    f"input_columns: [smiles]\nlabel_columns: [y]\nmetric: rmse\nsplit: {{method: random}}\n")
    return spec


#: verb -> argv for a faulty data file (args: the file, a scratch folder, the verb's source: a run or a model).
DATA_VERBS: dict[str, Callable[[Path, Path, Path], list[str]]] = {
    "train": lambda data, tmp, run: ["train", "--modality", "smiles", "--objective", "mlm", "--data", str(data),
                                     "--column", "smiles", "--out", str(tmp / "run"), *TINY],
    "finetune": lambda data, tmp, run: ["finetune", "--task", str(regression_task(data, tmp)), "--checkpoint", str(run),
                                        "--data-dir", str(data.parent), "--epochs", "1", "--quiet",
                                        "--out", str(tmp / "finetune")],
    "embed": lambda data, tmp, run: ["embed", "--checkpoint", str(run), "--data", str(data), "--column", "smiles",
                                     "--quiet", "--out", str(tmp / "X.npy")],
    "predict": lambda data, tmp, model: ["predict", "--model", str(model), "--data", str(data), "--column", "smiles",
                                         "--quiet", "--out", str(tmp / "predictions.csv")],
}
#: the fixture giving a verb's source when it is not the pretraining run ``tiny_smiles_run``.
DATA_VERB_SOURCES = {"predict": "tiny_smiles_model"}

#: verb -> argv for a (damaged) run folder (args: the run, a scratch folder, a small corpus file).
CHECKPOINT_VERBS: dict[str, Callable[[Path, Path, Path], list[str]]] = {
    "train --resume": lambda run, tmp, data: ["train", "--resume", str(run)],
    "finetune": lambda run, tmp, data: ["finetune", "--task", "moleculenet/esol", "--checkpoint", str(run), "--epochs", "1",
                                        "--quiet", "--out", str(tmp / "finetune")],
    "analyze": lambda run, tmp, data: ["analyze", "rank", "--checkpoint", str(run), "--data", str(data),
                                       "--out", str(tmp / "rank")],
    "embed": lambda run, tmp, data: ["embed", "--checkpoint", str(run), "--data", str(data), "--quiet",
                                     "--out", str(tmp / "X.npy")],
    "export": lambda run, tmp, data: ["export", "--checkpoint", str(run), "--out", str(tmp / "hf")],
}


@pytest.mark.parametrize("verb", DATA_VERBS)
@pytest.mark.parametrize("kind", WHOLE_FILE_FAULTS)
def test_whole_file_faults_end_in_one_line(kind, verb, tmp_path, request, capsys, monkeypatch):
    folder = tmp_path / "data"
    folder.mkdir()
    data = WHOLE_FILE_FAULTS[kind](folder)
    if kind == "unreadable file":
        unreadable(data, monkeypatch)
    source = request.getfixturevalue(DATA_VERB_SOURCES.get(verb, "tiny_smiles_run"))
    argv = DATA_VERBS[verb](data, tmp_path, source)
    one_line_error(capsys, main(argv), data.name)


def damaged_copy(run: Path, tmp_path: Path, corrupt: Callable[[Path], None]) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(run, copy, symlinks=True)
    corrupt(copy)
    return copy


@pytest.mark.parametrize("verb", CHECKPOINT_VERBS)
@pytest.mark.parametrize("kind", CHECKPOINT_CORRUPTIONS)
def test_corrupt_checkpoints_end_in_one_line(kind, verb, tmp_path, tiny_smiles_run, small_smiles_file, capsys):
    run = damaged_copy(tiny_smiles_run, tmp_path, CHECKPOINT_CORRUPTIONS[kind])
    one_line_error(capsys, main(CHECKPOINT_VERBS[verb](run, tmp_path, small_smiles_file)), str(run))


@pytest.mark.parametrize("kind", RESUME_ONLY_CORRUPTIONS)
def test_corrupt_optimizer_state_ends_resume_in_one_line(kind, tmp_path, tiny_smiles_run, capsys):
    run = damaged_copy(tiny_smiles_run, tmp_path, RESUME_ONLY_CORRUPTIONS[kind])
    one_line_error(capsys, main(["train", "--resume", str(run)]), str(run))
