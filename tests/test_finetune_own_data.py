"""A chemist's own table in one command: ``polymask finetune --data FILE --target COLUMN``, then ``polymask predict``.

The tables hold real molecules: rows of the MoleculeNet files that ship in tasks/moleculenet/data/ (ESOL, BBBP,
ClinTox), written out as a user would have them (CSV, TSV, JSON lines, parquet).
"""
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import ESOL_TARGET, moleculenet_rows, one_line_error, write_csv

import polymask
from polymask.benchmarking.own_data import own_data_task
from polymask.benchmarking.systems import read_polymask_checkpoints
from polymask.cli import main
from polymask.data.records import normalize_record
from polymask.errors import ConfigError, DataError, InvalidRecord
from polymask.modalities import MODALITIES
from polymask.tasks.data.loading import load_task
from polymask.tasks.data.own_table import OwnTable, _reads_negative, describe_own_task, own_task_spec, target_kind
from polymask.tasks.finetune.recipe import benchmark_recipe

#: Tiny caps: one epoch of a 2x64 encoder on ~50 molecules runs in a second or two.
QUICK = ["--epochs", "1", "--max-len", "64", "--batch-size", "16", "--quiet"]


@pytest.fixture(scope="module")
def esol_csv(tmp_path_factory) -> Path:
    """60 ESOL molecules and their measured solubility, with the column names a chemist might use."""
    rows = moleculenet_rows("delaney-processed", ["smiles", ESOL_TARGET], 60)
    return write_csv(tmp_path_factory.mktemp("own") / "solubility.csv", ["smiles", "logS"], rows)


@pytest.fixture(scope="module")
def smiles() -> object:
    return MODALITIES.get("smiles")()


# --- the kind of task, read off the target values --------------------------------------------------------------

@pytest.mark.parametrize("file, columns, kind, classes", [
    ("delaney-processed", [ESOL_TARGET], "regression", None),
    ("BBBP", ["p_np"], "binary", None),
    ("clintox", ["FDA_APPROVED", "CT_TOX"], "binary", None),  # several 0/1 columns: one binary task each
])
def test_the_kind_is_inferred_from_real_targets(file, columns, kind, classes):
    rows = moleculenet_rows(file, columns, 200)
    values = {name: [row[i] for row in rows] for i, name in enumerate(columns)}
    assert target_kind(values) == (kind, classes)


@pytest.mark.parametrize("values, kind, expected", [
    ({"y": ["active", "inactive", "active"]}, None, ("binary", ["inactive", "active"])),  # [negative, positive]
    ({"y": ["BBB+", "BBB-"]}, None, ("binary", ["BBB-", "BBB+"])),
    ({"y": ["non-toxic", "toxic"]}, None, ("binary", ["non-toxic", "toxic"])),
    ({"y": ["yes", "no"]}, None, ("binary", ["no", "yes"])),
    ({"y": ["-1", "1", "1"]}, None, ("binary", ["-1", "1"])),
    ({"y": ["1.5", "-2", "3", "1e-3"]}, None, ("regression", None)),
    ({"y": ["1.5", "inf", "3"]}, None, ("regression", None)),  # the row with inf is skipped when the task loads
    ({"y": ["low", "mid", "high"]}, None, ("multiclass", ["high", "low", "mid"])),
    ({"y": ["0", "1", "", "nan", "1.0"]}, None, ("binary", None)),  # blanks and "nan" are missing labels
    ({"y": ["2", "0", "1", "10"]}, "multiclass", ("multiclass", ["0", "1", "2", "10"])),
    ({"y": ["0", "1"]}, "regression", ("regression", None)),
])
def test_text_classes_and_explicit_kinds(values, kind, expected):
    assert target_kind(values, kind) == expected


@pytest.mark.parametrize("values, kind, words", [
    ({"y": ["0", "1", "2", "3", "4", "5"]}, "binary", "--kind binary needs two classes"),
    ({"y": ["active", "inactive"]}, "regression", "--kind regression needs numbers"),
    ({"y": ["0.5", "1.5", "2"]}, "multiclass", "class labels"),
    ({"a": ["x", "y", "z"], "b": ["x", "y", "z"]}, None, "several targets need numbers"),
    ({"a": ["x", "y", "z"], "b": ["x", "y", "z"]}, "multiclass", "predicts one column"),
    ({"y": ["1", "1"]}, None, "one class only"),
    ({"y": ["", "nan"]}, None, "hold no values"),
    ({"y": ["-0.66", "?", "1.2", "0.5"]}, None, r"column 'y' mixes numbers and text \(\?\)"),  # a stray cell
    ({"y": ["1.5", ">10", "2.3", "4.1"]}, None, "mixes numbers and text"),  # a censored value
    ({"y": ["0.0", "1", "0", "2"]}, "multiclass", r"column 'y': one class is written two ways \(0, 0\.0\)"),
    ({"id": [f"mol-{i}" for i in range(40)]}, None, "column 'id' holds 40 different texts in 40 rows: an identifier"),
])
def test_an_impossible_kind_is_one_clear_error(values, kind, words):
    with pytest.raises(ConfigError, match=words):
        target_kind(values, kind)


# --- the spec: the same loader, the same record guard, as a task file's --------------------------------------

def test_a_smiles_table_gets_a_scaffold_split_and_its_bad_rows_counted(tmp_path, smiles):
    rows = moleculenet_rows("delaney-processed", ["smiles", ESOL_TARGET], 60)
    rows[5][0] = "C1CC"          # an unparsable SMILES
    rows[9][1] = ""              # no target
    rows[12] = rows[12] + ["x"]  # a field too many
    path = write_csv(tmp_path / "solubility.csv", ["SMILES", "logS"], rows)
    spec = own_task_spec(path, ["logS"], smiles)
    assert (spec.input_columns, spec.kind, spec.metric, spec.split.method) == (["SMILES"], "regression", "rmse",
                                                                              "scaffold")
    task = load_task(spec, smiles)
    assert len(task.train) + len(task.valid) + len(task.test) == 57
    assert 44 <= len(task.train) <= 48 and len(task.test) >= 5
    assert sorted((s["line"], s["reason"].split(":")[0]) for s in task.skipped)[1:] == [(11, "no label"),
                                                                                     (14, "3 fields, the header has 2")]
    assert task.skipped[0]["line"] == 7 and task.skipped[0]["source"] == str(path.resolve())


def test_a_label_that_is_not_finite_is_a_counted_row(tmp_path, smiles):
    rows = moleculenet_rows("delaney-processed", ["smiles", ESOL_TARGET], 40)
    rows[3][1] = "inf"
    task = load_task(own_task_spec(write_csv(tmp_path / "s.csv", ["smiles", "logS"], rows), ["logS"], smiles), smiles)
    assert [(s["line"], s["reason"]) for s in task.skipped] == [(5, "label 'inf' is not finite")]
    assert np.isfinite(task.train.labels).all()


@pytest.mark.parametrize("header, targets, words", [
    (["smiles", "logS", "logS"], ["logS"], r"names column 'logS' 2 times \(columns \[2, 3\]\)"),
    (["smiles", "logS", "x"], ["logS", "logS"], "column 'logS' is asked for twice"),
])
def test_a_column_named_twice_is_one_error(tmp_path, smiles, header, targets, words):
    rows = [row + ["1.0"] for row in moleculenet_rows("delaney-processed", ["smiles", ESOL_TARGET], 20)]
    with pytest.raises(DataError, match=words):
        own_task_spec(write_csv(tmp_path / "s.csv", header, rows), targets, smiles)


def test_a_tab_separated_file_named_csv_says_so(tmp_path, smiles):
    rows = moleculenet_rows("delaney-processed", ["smiles", ESOL_TARGET], 20)
    path = write_csv(tmp_path / "s.csv", ["smiles", "logS"], rows, delimiter="\t")
    with pytest.raises(DataError, match=r"holds tabs: a tab-separated file is read as one when named \.tsv"):
        own_task_spec(path, ["logS"], smiles)


def _readable(modality, record: str) -> bool:
    try:
        normalize_record(modality, record)
    except InvalidRecord:
        return False
    return True


def test_a_validation_split_with_one_class_is_one_error(tmp_path, smiles):
    """60 BBBP molecules whose only 2 positives fall in the scaffold training split: ROC-AUC is undefined on
    validation, which the run would have chosen its epoch by."""
    rows = moleculenet_rows("BBBP", ["smiles", "p_np"], 80)
    rows = [row for row in rows if _readable(smiles, row[0])][:60]  # BBBP holds a few molecules RDKit refuses
    path = write_csv(tmp_path / "bbb.csv", ["smiles", "y"], [[m, str(i % 2)] for i, (m, _) in enumerate(rows)])
    training = set(load_task(own_task_spec(path, ["y"], smiles), smiles).train.inputs)
    positives = [i for i, (m, _) in enumerate(rows) if (normalize_record(smiles, m),) in training][:2]
    write_csv(path, ["smiles", "y"], [[m, "1" if i in positives else "0"] for i, (m, _) in enumerate(rows)])
    with pytest.raises(DataError, match=r"bbb.csv: own-data/bbb-y: its scaffold validation split "
                                        r"\(\d+ of 60 usable rows\) holds one class only in every label column "
                                        r"\(positives: 'y' 0 of \d+\), so roc_auc is undefined there: add rows or "
                                        r"try --split random"):
        load_task(own_task_spec(path, ["y"], smiles), smiles)


def test_one_class_is_refused_only_where_the_metric_needs_both(tmp_path, smiles):
    """A split with one class has an accuracy or MCC (GUE's, GLUE's metrics), not a ROC-AUC."""
    from polymask.tasks.data.spec import as_task_spec

    rows = [row for row in moleculenet_rows("BBBP", ["num", "name", "p_np", "smiles"], 80) if _readable(smiles, row[3])]
    path = write_csv(tmp_path / "bbbp.csv", ["num", "name", "p_np", "smiles"],
                     [[*row[:2], "1" if i < 2 else "0", row[3]] for i, row in enumerate(rows[:60])])
    spec = as_task_spec("moleculenet/bbbp")
    with pytest.raises(DataError, match="so roc_auc is undefined there: check the task's files"):
        load_task(spec, smiles, tables={"all": path})
    task = load_task(spec.model_copy(update={"metric": "accuracy", "extra_metrics": []}), smiles, tables={"all": path})
    assert len(task.train) + len(task.valid) + len(task.test) == 60


@pytest.mark.parametrize("label, negative", [("inactive", True), ("non-toxic", True), ("nontoxic", True),
                                             ("not active", True), ("BBB-", True), ("NOTCH1", False),
                                             ("nothing", False), ("active", False), ("BBB+", False)])
def test_which_label_reads_as_the_negative_class(label, negative):
    assert _reads_negative(label) is negative


def test_how_the_table_was_read_is_said(tmp_path, smiles):
    rows = [[molecule, "active" if y == "1" else "inactive"]
            for molecule, y in moleculenet_rows("BBBP", ["smiles", "p_np"], 40)]
    spec = own_task_spec(write_csv(tmp_path / "b.csv", ["smiles", "y"], rows), ["y"], smiles)
    assert describe_own_task(spec) == (f"{tmp_path / 'b.csv'}: 'y' read as binary (inactive = 0, active = 1 "
                                       f"(positive)), scored by roc_auc; scaffold split 80/10/10 (--kind and --split "
                                       f"choose otherwise)")


@pytest.mark.parametrize("suffix", [".tsv", ".jsonl", ".parquet"])
def test_tsv_jsonl_and_parquet_tables_read_as_the_csv(tmp_path, smiles, suffix):
    every = moleculenet_rows("clintox", ["smiles", "FDA_APPROVED", "CT_TOX"], 2000)
    toxic, other = ([row for row in every if row[2] == flag][:30] for flag in ("1", "0"))
    rows = [row for pair in zip(toxic, other) for row in pair]  # both classes in each split
    csv_file = write_csv(tmp_path / "tox.csv", ["smiles", "approved", "toxic"], rows)
    csv_spec = own_task_spec(csv_file, ["approved", "toxic"], smiles, split="random")
    frame = pd.DataFrame(rows, columns=["smiles", "approved", "toxic"]).astype({"approved": int, "toxic": int})
    path = tmp_path / f"tox{suffix}"
    if suffix == ".tsv":
        write_csv(path, list(frame.columns), rows, delimiter="\t")
    elif suffix == ".jsonl":
        frame.to_json(path, orient="records", lines=True)
    else:
        frame.to_parquet(path)
    spec = own_task_spec(path, ["approved", "toxic"], smiles, split="random")
    assert (spec.kind, spec.label_values, spec.metric) == ("binary", None, "roc_auc")
    expected, got = load_task(csv_spec, smiles), load_task(spec, smiles)
    assert got.train.inputs == expected.train.inputs and (got.test.labels == expected.test.labels).all()


def test_a_bad_json_line_is_a_counted_row(tmp_path, smiles):
    rows = moleculenet_rows("BBBP", ["smiles", "p_np"], 30)
    lines = [json.dumps({"smiles": s, "bbb": int(y)}) for s, y in rows]
    lines[3] = lines[3][:-1]  # cut short
    path = tmp_path / "bbb.jsonl"
    path.write_text("\n".join(lines) + "\n")
    task = load_task(own_task_spec(path, ["bbb"], smiles, split="random"), smiles)
    assert [(s["line"], s["reason"].split(" (")[0]) for s in task.skipped] == [(4, "not valid JSON")]


# --- the command line and Python, end to end ------------------------------------------------------------------

@pytest.mark.integration
def test_finetune_on_my_csv_then_predict(esol_csv, tiny_smiles_run, tmp_path):
    out = tmp_path / "ft"
    assert main(["finetune", "--data", str(esol_csv), "--target", "logS", "--checkpoint", str(tiny_smiles_run),
                 *QUICK, "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    cell = results["cells"][0]
    assert (cell["task"], cell["split"], cell["n_train"] + cell["n_valid"] + cell["n_test"]) == \
           ("own-data/solubility-logS", "scaffold", 60)
    new = moleculenet_rows("delaney-processed", ["smiles"], 5, skip=100)  # molecules the model never saw
    data = write_csv(tmp_path / "new.csv", ["smiles"], new)
    assert main(["predict", "--model", str(out / cell["model_dir"]), "--data", str(data),
                 "--out", str(tmp_path / "predicted.csv"), "--quiet"]) == 0
    predicted = pd.read_csv(tmp_path / "predicted.csv")
    assert predicted["predicted_logS"].notna().all() and len(predicted) == 5


@pytest.mark.integration
def test_a_table_of_molecules_gets_the_moleculenet_recipe_under_the_given_options(esol_csv, tiny_smiles_run):
    """The recipe chosen on MoleculeNet's validation splits, not the generic defaults, unless an option says so."""
    recipe = benchmark_recipe("moleculenet")
    modality, spec, config = own_data_task(OwnTable(esol_csv, ("logS",)), [tiny_smiles_run],
                                           read_polymask_checkpoints([tiny_smiles_run]), {"epochs": 2})
    assert (config.lr, config.patience, config.epochs) == (recipe["lr"], recipe["patience"], 2)
    assert modality.finetune_recipe == "moleculenet" and spec.kind == "regression"
    assert config.task_settings == {}  # the recipe's per-task settings name MoleculeNet's tasks, not this one


@pytest.mark.integration
def test_the_report_names_the_skipped_rows(tiny_smiles_run, tmp_path):
    rows = moleculenet_rows("delaney-processed", ["smiles", ESOL_TARGET], 60)
    rows[5][0] = "C1CC"  # an unparsable SMILES, on line 7
    path = write_csv(tmp_path / "solubility.csv", ["smiles", "logS"], rows)
    out = tmp_path / "ft"
    assert main(["finetune", "--data", str(path), "--target", "logS", "--checkpoint", str(tiny_smiles_run), *QUICK,
                 "--out", str(out)]) == 0
    assert f"- own-data/solubility-logS: {path.resolve()}:7: RDKit" in (out / "results.md").read_text()


@pytest.mark.integration
def test_polymask_finetune_from_python_gives_a_loadable_model(tiny_smiles_run, tmp_path):
    rows = moleculenet_rows("clintox", ["smiles", "FDA_APPROVED", "CT_TOX"], 60)
    path = write_csv(tmp_path / "tox.csv", ["smiles", "approved", "toxic"], rows)
    folder = polymask.finetune(tiny_smiles_run, data=path, target=["approved", "toxic"], out=tmp_path / "ft", epochs=1,
                               max_len=64, batch_size=16)
    model = polymask.load_model(folder)
    predicted = model.predict([row[0] for row in moleculenet_rows("clintox", ["smiles"], 3, skip=200)])
    assert list(predicted.columns[-3:]) == ["prob_approved", "prob_toxic", "reason"]
    assert predicted[["prob_approved", "prob_toxic"]].apply(lambda p: p.between(0, 1)).all().all()


@pytest.mark.integration
def test_table_faults_end_in_one_line(esol_csv, tiny_smiles_run, tmp_path, capsys):
    run = ["--checkpoint", str(tiny_smiles_run), *QUICK, "--out", str(tmp_path / "ft")]
    one_line_error(capsys, main(["finetune", "--data", str(esol_csv), "--target", "logP", *run]), "solubility.csv",
                   "['logP'] not found")
    one_line_error(capsys, main(["finetune", "--data", str(tmp_path / "absent.csv"), "--target", "y", *run]),
                   "absent.csv", "not found")
    (tmp_path / "empty.csv").write_text("")
    one_line_error(capsys, main(["finetune", "--data", str(tmp_path / "empty.csv"), "--target", "y", *run]),
                   "empty.csv", "empty file")
    one_line_error(capsys, main(["finetune", "--data", str(esol_csv), "--target", "logS", "--kind", "binary", *run]),
                   "solubility.csv", "--kind binary needs two classes")
    one_line_error(capsys, main(["finetune", "--data", str(esol_csv), "--input-column", "mol", "--target", "logS",
                                 *run]), "no column 'mol'")
    one_line_error(capsys, main(["finetune", "--data", str(esol_csv), *run]), "needs --target")
    one_line_error(capsys, main(["finetune", "--task", "moleculenet/esol", "--target", "logS", *run]), "--target")


@pytest.mark.parametrize("argv, words", [
    (["--task", "moleculenet/esol", "--data", "my.csv"], "argument --data: not allowed with argument --task"),
    ([], "one of the arguments --task --data is required"),
])
def test_task_and_data_are_mutually_exclusive(argv, words, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["finetune", *argv, "--target", "y", "--checkpoint", "runs/x"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(words)


@pytest.mark.integration
def test_a_table_benchmark_reads_each_checkpoint_once(esol_csv, tiny_smiles_run, monkeypatch, tmp_path):
    """The table's modality and the rows come from one read of each checkpoint (every file's checksum)."""
    from polymask.benchmarking import api
    from polymask.checkpoints import pretrained

    reads, verify = [], pretrained.verify_checkpoint
    monkeypatch.setattr(pretrained, "verify_checkpoint", lambda folder: reads.append(folder) or verify(folder))
    monkeypatch.setattr(api, "run_benchmark", lambda *args, **kwargs: None)
    api.run_benchmark_verb(None, [tiny_smiles_run], None, 1, True, tmp_path / "out", None, False, {"epochs": 1},
                           table=OwnTable(esol_csv, ("logS",)))
    assert len(reads) == 1
