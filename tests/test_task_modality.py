"""A task is fine-tuned only by checkpoints whose modality reads its records: a DNA encoder on MoleculeNet is one line
before any training (it once ran on the few SMILES that happen to be valid DNA and failed on an empty split), on every
verb that fine-tunes; a user's own modality may declare the task modalities it reads."""
from __future__ import annotations

import pytest

from polymask.cli import main
from polymask.modalities import MODALITIES
from polymask.modalities.smiles import Smiles
from tests.conftest import one_line_error


@pytest.mark.parametrize("command", [
    ["finetune", "--checkpoint", "dna-gue-mlm-196k", "--task", "moleculenet/esol"],
    ["benchmark", "glue", "--checkpoint", "smiles-mlm-1.7m", "--tasks", "rte"],
])
def test_a_checkpoint_of_another_modality_is_refused_in_one_line(tmp_path, capsys, command):
    code = main([*command, "--out", str(tmp_path / "out")])
    task, checkpoint = command[-1].split("/")[-1], command[2 if command[0] == "finetune" else 3]
    line = one_line_error(capsys, code, task, checkpoint, "task and")
    assert "fine-tune a" in line
    assert not any((tmp_path / "out").rglob("*.json"))


def test_a_modality_reads_its_own_tasks_and_those_it_declares():
    class SelfiesLike(Smiles):
        task_modalities = ("smiles",)

    assert MODALITIES.get("smiles")().reads_tasks_of("smiles")
    assert not MODALITIES.get("dna")().reads_tasks_of("smiles")
    assert SelfiesLike().reads_tasks_of("smiles") and not SelfiesLike().reads_tasks_of("text")
