"""A committed cell stays reusable: the task part of its identity does not change when the task spec gains a field
at its default (the split column did, and every committed cell's spec hash would have changed with it)."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from polymask.benchmarking.identity import data_identity
from polymask.tasks.data.spec import load_task_spec

ROOT = Path(__file__).resolve().parent.parent


def spec_hash(key: str) -> str:
    task = SimpleNamespace(spec=load_task_spec(key), train=[], valid=[], test=[])
    return data_identity(task)["spec"]


def test_built_in_specs_hash_as_their_committed_cells_recorded():
    cell = ROOT / "docs/results/moleculenet-v2/benchmark/cells/smiles-mlm-wide-1.7m-mlm/moleculenet-bbbp/seed-0.json"
    assert spec_hash("moleculenet/bbbp") == json.loads(cell.read_text())["identity"]["data"]["spec"]
    cell = ROOT / "docs/results/dna-gue/objectives-steps/steps-7358/benchmark-dna/cells/mlm-seed0-mlm/dna-tf_0/seed-0.json"
    assert spec_hash("dna/tf_0") == json.loads(cell.read_text())["identity"]["data"]["spec"]


def test_a_split_column_is_part_of_the_identity():
    spec = load_task_spec("moleculenet/bbbp")
    named = spec.model_copy(update={"split": spec.split.model_copy(update={"method": "column", "column": "fold"})})
    plain = SimpleNamespace(spec=spec, train=[], valid=[], test=[])
    assert data_identity(SimpleNamespace(spec=named, train=[], valid=[], test=[]))["spec"] != data_identity(plain)["spec"]
