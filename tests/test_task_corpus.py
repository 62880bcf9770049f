"""A pretraining corpus from a benchmark's unlabeled training inputs (polymask benchmark-corpus): deduplicated
across tasks, free of every validation and test input of the benchmark's tasks on hand, counted."""
import json

import pytest

from polymask.cli import main
from polymask.tasks.data.heldout import default_modality, unique_inputs
from polymask.tasks.data.loading import load_task
from polymask.tasks.data.spec import load_task_spec

TASKS = ["mouse_2", "mouse_3", "prom_300_tata", "prom_core_tata"]


@pytest.fixture()
def corpus(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("POLYMASK_DATA_DIR", raising=False)  # the committed task files only
    assert main(["benchmark-corpus", "dna", "--tasks", *TASKS, "--out", str(tmp_path / "corpus")]) == 0
    assert "unique training inputs" in capsys.readouterr().out
    return tmp_path / "corpus"


def test_the_corpus_holds_each_training_input_once_and_no_validation_or_test_input(corpus):
    lines = (corpus / "corpus.txt").read_text().splitlines()
    summary = json.loads((corpus / "corpus.json").read_text())
    assert len(lines) == len(set(lines)) == summary["records"] > 0
    assert summary["characters"] == sum(map(len, lines))
    loaded = {name: load_task(load_task_spec(f"dna/{name}"), default_modality("dna")) for name in TASKS}
    train = set().union(*(unique_inputs(task.train) for task in loaded.values()))
    held = set().union(*(unique_inputs(task.valid) + unique_inputs(task.test) for task in loaded.values()))
    assert set(lines) == train - held
    per_task = summary["per_task"]
    assert sum(entry["added"] for entry in per_task.values()) == len(lines)
    for name, task in loaded.items():  # GUE repeats a few sequences across a task's splits (prom_300_tata: 20)
        assert per_task[f"dna/{name}"]["held_out"] == len(set(unique_inputs(task.train)) & held)
    assert per_task["dna/prom_300_tata"]["held_out"] > 0
    assert "dna/tf_0" in summary["tasks_not_on_hand"] and "dna/tf_0" not in summary["held_out_from"]


def test_a_task_whose_files_are_missing_ends_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("POLYMASK_DATA_DIR", raising=False)
    assert main(["benchmark-corpus", "dna", "--tasks", "tf_0", "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tf_0" in err[0] and "--data-dir" in err[0]
