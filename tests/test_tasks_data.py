"""Task specs, loading, invalid-input reporting and splits on the committed MoleculeNet files."""
import numpy as np
import pytest
import yaml

from polymask.errors import ConfigError, DataError
from polymask.modalities import MODALITIES
from polymask.resources import builtin_dir
from polymask.tasks.data.loading import TaskSplit, deduplicate, load_task
from polymask.tasks.data.spec import TaskSpec, load_task_spec, task_names
from polymask.tasks.data.splits import SPLITTERS, bemis_murcko_scaffold

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end


@pytest.fixture(scope="module")
def smiles():
    return MODALITIES.get("smiles")()


def test_every_builtin_task_spec_validates():
    keys = task_names()
    assert {"moleculenet/bbbp", "moleculenet/esol", "moleculenet/tox21"} <= set(keys)
    for key in keys:
        assert load_task_spec(key).key == key
    assert "moleculenet/hiv" not in task_names("moleculenet", default_only=True)


def test_unknown_task_lists_the_known_ones():
    with pytest.raises(ConfigError, match="unknown task 'moleculenet/nope'.*moleculenet/bbbp"):
        load_task_spec("moleculenet/nope")


def test_freesolv_loads_with_labels_and_a_scaffold_split(smiles):
    task = load_task(load_task_spec("moleculenet/freesolv"), smiles)
    assert (len(task.train), len(task.valid), len(task.test)) == (513, 64, 65)
    assert task.label_names == ["expt"] and task.n_outputs == 1
    assert not np.isnan(task.train.labels).any()
    assert -30 < task.train.labels.min() < task.train.labels.max() < 5  # kcal/mol


def test_invalid_smiles_are_reported_with_file_and_line(smiles):
    task = load_task(load_task_spec("moleculenet/bbbp"), smiles)
    assert len(task.skipped) == 11
    first = task.skipped[0]
    assert first["source"].endswith("BBBP.csv.gz") and first["line"] == 61 and "valence" in first["reason"]
    assert len(task.train) + len(task.valid) + len(task.test) == 2050 - 11


def test_scaffold_split_puts_each_scaffold_in_one_split(smiles):
    task = load_task(load_task_spec("moleculenet/bbbp"), smiles)
    scaffolds = {name: {bemis_murcko_scaffold(s[0]) for s in getattr(task, name).inputs}
                 for name in ("train", "valid", "test")}
    assert not scaffolds["train"] & scaffolds["test"]
    assert not scaffolds["train"] & scaffolds["valid"]
    assert not scaffolds["valid"] & scaffolds["test"]


@pytest.mark.parametrize("method", ["random", "random_scaffold", "scaffold"])
def test_splits_are_disjoint_complete_and_reproducible(smiles, method):
    task = load_task(load_task_spec("moleculenet/esol"), smiles)
    molecules = [inputs[0] for split in (task.train, task.valid, task.test) for inputs in split.inputs]
    parts = SPLITTERS[method](molecules, np.zeros((len(molecules), 1)), (0.8, 0.1, 0.1), 3)
    assert sorted(np.concatenate(parts).tolist()) == list(range(len(molecules)))
    assert abs(len(parts[0]) / len(molecules) - 0.8) < 0.05
    again = SPLITTERS[method](molecules, np.zeros((len(molecules), 1)), (0.8, 0.1, 0.1), 3)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))


def test_multi_task_labels_keep_missing_entries(smiles):
    task = load_task(load_task_spec("moleculenet/tox21"), smiles)
    assert task.n_outputs == 12 and np.isnan(task.train.labels).any()
    assert set(np.unique(task.train.labels[~np.isnan(task.train.labels)])) == {0.0, 1.0}


def test_deduplicate_drops_conflicting_copies():
    split = TaskSplit([("A",), ("B",), ("A",), ("C",), ("C",)], np.array([[1.0], [0.0], [1.0], [0.0], [1.0]]))
    kept, removed = deduplicate(split)
    assert kept.inputs == [("A",), ("B",)] and removed == 3


def test_missing_task_file_names_the_places_searched(smiles, tmp_path):
    spec = load_task_spec("moleculenet/hiv")
    with pytest.raises(DataError, match=r"task file 'HIV.csv' not found; looked in .*--data-dir"):
        load_task(spec, smiles, data_dir=tmp_path)


def test_other_label_merges_unlisted_string_classes(tmp_path):
    (tmp_path / "kinds.csv").write_text("smiles,kind\nCCO,alcohol\nCCN,amine\nCC=O,aldehyde\nCCS,thiol\n")
    raw = {"name": "kinds", "benchmark": "toy", "modality": "smiles", "kind": "multiclass", "files": {"all": "kinds.csv"},
           "input_columns": ["smiles"], "label_columns": ["kind"], "label_values": ["alcohol", "amine", "other"],
           "other_label": "other", "metric": "accuracy", "split": {"method": "random", "fractions": [0.5, 0.25, 0.25]}}
    task = load_task(TaskSpec.model_validate(raw), MODALITIES.get("smiles")(), data_dir=tmp_path)
    merged = dict(zip((s[0] for p in (task.train, task.valid, task.test) for s in p.inputs),
                      np.concatenate([p.labels[:, 0] for p in (task.train, task.valid, task.test)])))
    assert merged == {"CCO": 0.0, "CCN": 1.0, "CC=O": 2.0, "CCS": 2.0} and task.n_outputs == 3
    with pytest.raises(ValueError, match="other_label 'rest' must be one of label_values"):
        TaskSpec.model_validate({**raw, "other_label": "rest"})


@pytest.mark.parametrize("change, words", [
    ({"delimiter": ";;"}, "delimiter: String should have at most 1 character"),
    ({"input_columns": []}, "input_columns: List should have at least 1 item"),
    ({"input_columns": ["a", "b", "c"]}, "input_columns: List should have at most 2 items"),
    ({"split": {"method": "random", "fractions": [0.5, 0.5, 0.5]}},
     "split.fractions: the train/valid/test fractions must be at least 0 and add up to 1, not [0.5, 0.5, 0.5]"),
    ({"metric": "rmes"}, "metric: unknown metric 'rmes'; did you mean 'rmse'?"),
    ({"extra_metrics": ["mae", "r2"]}, "extra_metrics: unknown metric 'r2'"),
])
def test_a_task_yaml_the_loader_could_not_use_is_refused_naming_the_file(tmp_path, change, words):
    """Each of these was a traceback when the task was read (csv, DeepChem's assert, an IndexError, a KeyError)."""
    raw = {**yaml.safe_load((builtin_dir("tasks") / "moleculenet" / "esol.yaml").read_text()), **change}
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError) as error:
        load_task_spec(str(path))
    assert str(error.value).startswith(f"{path}: invalid task spec") and words in str(error.value)
