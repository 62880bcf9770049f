"""A task kind is one registered object: its problem type, loader and fine-tuning loop, head, loss, prediction rule,
prediction columns and export mapping. The built-in kinds (binary, multiclass, regression, span) are registered
with the problem types saved models and exports state. A toy kind defined in this file alone (what a plugin
writes) is listed, validates in a task spec, builds its head, learns and predicts on a toy batch, and goes from a
task spec through fine-tuning to a saved model and its predictions: a new kind touches no other file of polymask."""
from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from pydantic import ValidationError
from torch import Tensor

from polymask.checkpoints.finetuned_meta import SavedTask
from polymask.model import Encoder, EncoderConfig
from polymask.model.heads import SequencePredictor
from polymask.resources import builtin_dir
from polymask.tasks.data.spec import TABLE_KINDS, TaskSpec
from polymask.tasks.finetune.kinds import TASK_KINDS, TableTaskKind, register_task_kind, table_kinds
from polymask.tasks.metrics.scoring import METRICS

#: The problem type each built-in kind writes into finetuned.json (and, for exported heads, config.json).
BUILT_IN = {"binary": "multi_label_classification", "multiclass": "single_label_classification",
            "regression": "regression", "span": "span"}


class Count(TableTaskKind):
    """Counts (0, 1, 2, ...) per record: a Poisson rate per target, learned as its logarithm."""

    problem_type = "count"  # not in transformers' vocabulary: no card_phrase, so its models are not exported
    metrics = ("mae", ("rmse",))

    def loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        present = ~torch.isnan(labels)
        return torch.nn.functional.poisson_nll_loss(logits[present], labels[present], log_input=True)

    def predict(self, logits: Tensor) -> np.ndarray:
        return logits.exp().cpu().numpy()

    @classmethod
    def prediction_columns(cls, task: SavedTask, outputs: np.ndarray) -> dict[str, Any]:
        return {f"expected_{name}": outputs[:, i] for i, name in enumerate(task.label_names)}


@pytest.fixture
def count_kind():
    register_task_kind("count")(Count)
    yield Count
    TASK_KINDS.unregister("count")


def spec_of(kind: str, file: str = "counts.csv") -> dict[str, Any]:
    return {"name": "carbons", "benchmark": "toy", "modality": "smiles", "kind": kind, "files": {"all": file},
            "input_columns": ["smiles"], "label_columns": ["carbons"], "metric": "mae", "extra_metrics": ["rmse"],
            "split": {"method": "random"}}


def test_the_built_in_kinds_are_registered_with_their_problem_types():
    assert {name: TASK_KINDS.get(name).problem_type for name in BUILT_IN} == BUILT_IN
    assert set(TABLE_KINDS) <= set(table_kinds()) and "span" not in table_kinds()
    for name in TABLE_KINDS:  # what a user's own table is read as: each has its metrics and an exported head
        kind = TASK_KINDS.get(name)
        assert kind.name == name and kind.card_phrase
        headline, extra = kind.metrics
        assert {headline, *extra} <= set(METRICS)
    assert TASK_KINDS.get("span").card_phrase is None  # question-answering models are not exported


def test_a_spec_names_a_registered_kind_and_a_mistyped_one_is_refused_with_the_closest():
    assert TaskSpec.model_validate(spec_of("regression")).task_kind is TASK_KINDS.get("regression")
    with pytest.raises(ValidationError, match=r"unknown task kind 'regresion'; did you mean 'regression'\?"):
        TaskSpec.model_validate(spec_of("regresion"))
    with pytest.raises(ValidationError, match="unknown task kind 'count'"):  # not until a module registers it
        TaskSpec.model_validate(spec_of("count"))


def test_a_toy_kind_is_listed_and_a_spec_naming_it_validates(count_kind):
    assert "count" in TASK_KINDS.names() and "count" in table_kinds()
    spec = TaskSpec.model_validate(spec_of("count"))
    assert spec.task_kind is Count and Count.name == "count"


def test_the_toy_kind_builds_its_head_learns_and_predicts_on_a_toy_batch(count_kind):
    torch.manual_seed(0)
    encoder = Encoder(EncoderConfig(preset="tiny"), vocab_size=30)
    network = Count.network(encoder, 1, "mean", 0.0)
    assert isinstance(network, SequencePredictor) and network.head.out_features == 1
    ids = torch.randint(5, 30, (4, 7))
    mask = torch.ones_like(ids, dtype=torch.bool)
    labels = torch.tensor([[0.0], [3.0], [float("nan")], [7.0]])  # a missing count is left out of the loss
    head = Count(labels.numpy())
    optimizer = torch.optim.Adam(network.parameters(), lr=1e-2)
    losses = []
    for _ in range(20):
        loss = head.loss(network(ids, mask), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    with torch.no_grad():
        predicted = head.predict(network(ids, mask))
    assert predicted.shape == (4, 1) and (predicted > 0).all()
    task = SavedTask(key="toy/carbons", kind="count", problem_type="count", input_columns=["smiles"],
                     label_names=["carbons"], class_names=Count.class_names(None, 1), n_outputs=1)
    assert list(Count.prediction_columns(task, predicted)) == ["expected_carbons"]
    assert Count.restore(None).normalisation() is None  # nothing to save beside the weights


def carbon_counts(path: Path, count: int = 60) -> Path:
    """``count`` ESOL molecules (shipped in tasks/moleculenet/data/) and their number of carbon atoms."""
    with gzip.open(builtin_dir("tasks") / "moleculenet" / "data" / "delaney-processed.csv.gz", "rt") as handle:
        molecules = [row["smiles"].strip() for row in csv.DictReader(handle)][:count]
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["smiles", "carbons"])
        writer.writerows([smiles, sum(c in "Cc" for c in smiles.replace("Cl", ""))] for smiles in molecules)
    return path


@pytest.mark.integration
def test_a_toy_kind_goes_from_a_task_spec_to_a_saved_model_and_its_predictions(count_kind, tiny_smiles_run,
                                                                                tmp_path):
    import polymask
    from polymask.errors import PolymaskError
    from polymask.export.finetuned import export_finetuned

    spec = TaskSpec.model_validate(spec_of("count", str(carbon_counts(tmp_path / "counts.csv"))))
    folder = polymask.finetune(tiny_smiles_run, task=spec, epochs=1, max_len=64, batch_size=16,
                               out=tmp_path / "finetune")
    saved = json.loads((folder / "finetuned.json").read_text())["task"]
    assert (saved["kind"], saved["problem_type"], saved["n_outputs"], saved["class_names"]) == ("count", "count", 1, [])
    results = json.loads((tmp_path / "finetune" / "results.json").read_text())
    assert {"mae", "rmse"} <= set(results["cells"][0]["test"])

    model = polymask.load_model(folder, device="cpu")
    assert model.kind is Count
    predicted = model.predict(["CCO", "c1ccccc1", "not a molecule"])
    assert list(predicted.columns) == ["expected_carbons", "reason"]
    assert (predicted["expected_carbons"][:2] > 0).all() and np.isnan(predicted["expected_carbons"][2])
    with pytest.raises(PolymaskError, match="a count model, which has no exported head"):
        export_finetuned(folder, tmp_path / "hf")


PLUGIN = '''
import polymask, torch

@polymask.register_task_kind("count")
class Count(polymask.TableTaskKind):
    problem_type = "count"
    metrics = ("mae", ("rmse",))

    def loss(self, logits, labels):
        present = ~torch.isnan(labels)
        return torch.nn.functional.poisson_nll_loss(logits[present], labels[present], log_input=True)

    def predict(self, logits):
        return logits.exp().cpu().numpy()
'''


@pytest.mark.integration
def test_the_command_line_takes_a_kind_from_a_plugin(tiny_smiles_run, tmp_path):
    import yaml

    from polymask.cli import main

    plugin = tmp_path / "count_kind.py"
    plugin.write_text(PLUGIN)
    task = tmp_path / "carbons.yaml"
    task.write_text(yaml.safe_dump(spec_of("count", str(carbon_counts(tmp_path / "counts.csv")))))
    try:
        assert main(["finetune", "--plugin", str(plugin), "--task", str(task), "--checkpoint", str(tiny_smiles_run),
                     "--epochs", "1", "--max-len", "64", "--batch-size", "16", "--out", str(tmp_path / "ft"),
                     "--quiet"]) == 0
    finally:
        TASK_KINDS.unregister("count")
    cell = json.loads((tmp_path / "ft" / "results.json").read_text())["cells"][0]
    assert cell["task"] == "toy/carbons" and {"mae", "rmse"} <= set(cell["test"])
