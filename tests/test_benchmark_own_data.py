"""Benchmark on your own data: ``polymask benchmark --data FILE --target COLUMN --checkpoint A`` (and task YAML files,
and ``polymask.benchmark(data=...)``) runs the rows a built-in benchmark runs: the checkpoint, its untrained twin,
the modality's classical baseline and the majority class / mean, with the same report and Welch tests.

The tables hold real molecules and DNA: rows of the MoleculeNet and DNA files shipped in tasks/*/data/.
"""
import csv
import gzip
import json
from pathlib import Path

import pytest
import yaml
from conftest import ESOL_TARGET, moleculenet_rows, one_line_error, write_csv

import polymask
from polymask.benchmarking.constant import MEAN_ROW
from polymask.benchmarking.runner import distinct_tasks
from polymask.benchmarking.systems import reference_systems
from polymask.cli import build_parser, main
from polymask.errors import ConfigError, DataError
from polymask.finetune_config import FinetuneConfig
from polymask.modalities import MODALITIES
from polymask.resources import builtin_dir
from polymask.tasks.data.loading import load_task
from polymask.tasks.data.own_table import own_task_spec
from polymask.tasks.data.spec import TaskSpec, chosen_tasks, load_task_spec, task_names

pytestmark = pytest.mark.usefixtures("one_torch_thread")

#: Tiny caps: one epoch of a 2x64 encoder on ~50 molecules runs in a second or two.
QUICK = ["--epochs", "1", "--max-len", "64", "--batch-size", "16", "--quiet"]
CHECKPOINT_ROW = "run (mlm)"  # the tiny run's row: its folder's name and objective
ECFP_ROW = "ECFP4 + random forest (500 trees)"


@pytest.fixture(scope="module")
def esol_csv(tmp_path_factory) -> Path:
    """60 ESOL molecules and their measured solubility."""
    rows = moleculenet_rows("delaney-processed", ["smiles", ESOL_TARGET], 60)
    return write_csv(tmp_path_factory.mktemp("own") / "solubility.csv", ["smiles", "logS"], rows)


def splice_rows(count: int) -> list[list[str]]:
    """``count`` DNA windows of the shipped splice-site set, with their class."""
    with gzip.open(builtin_dir("tasks") / "dna" / "data" / "splice.csv.gz", "rt", newline="") as handle:
        reader = csv.reader(handle)
        next(reader)
        return [row for _, row in zip(range(count), reader)]


# --- the rows: the modality's classical baseline where it fits, and the constant row always ----------------------

@pytest.mark.parametrize("modality, family, kind, rows", [
    ("smiles", "moleculenet", "regression", [ECFP_ROW, MEAN_ROW.name]),
    ("smiles", "moleculenet", "multiclass", [MEAN_ROW.name]),  # the forest scores one positive class
    ("dna", "dna", "multiclass", ["k-mer profiles (k=1-6) + logistic regression", MEAN_ROW.name]),
    ("dna", "dna", "regression", [MEAN_ROW.name]),  # the k-mer model classifies
    ("text", "glue", "binary", [MEAN_ROW.name, "TF-IDF word 1-2-grams + char 2-5-grams + linear model"]),
])
def test_a_table_gets_its_modality_s_baseline_where_it_fits_and_the_constant_row(modality, family, kind, rows):
    assert MODALITIES.get(modality).finetune_recipe == family
    spec = TaskSpec(name="t", benchmark="own-data", modality=modality, kind=kind, files={"all": "t.csv"},
                    input_columns=["x"], label_columns=["y"], metric="accuracy", split={"method": "random"})
    systems = reference_systems(family, MODALITIES.get(modality)(), FinetuneConfig(), [MEAN_ROW], [spec])
    assert [system.name for system in systems] == rows


# --- a split column ---------------------------------------------------------------------------------------------

def test_a_split_column_decides_each_row_s_split(tmp_path):
    dna = MODALITIES.get("dna")()
    words = ["train"] * 30 + ["Validation"] * 8 + ["test"] * 9 + ["dev"] * 2 + ["holdout"]
    rows = [[*row, word] for row, word in zip(splice_rows(50), words)]
    path = write_csv(tmp_path / "splice.csv", ["sequence", "label", "fold"], rows)
    spec = own_task_spec(path, ["label"], dna, split_column="fold")
    assert (spec.split.method, spec.split.column, spec.kind) == ("column", "fold", "multiclass")
    task = load_task(spec, dna)
    assert (len(task.train), len(task.valid), len(task.test), task.protocol) == (30, 10, 9, "column 'fold'")
    assert [(s["line"], s["reason"]) for s in task.skipped] == [(51, "split 'holdout' is not train, valid or test")]
    assert task.test.inputs[0] == (rows[38][0],)


def test_a_split_column_with_no_validation_rows_says_which_word_to_write(tmp_path):
    dna = MODALITIES.get("dna")()
    rows = [[*row, "test" if index % 5 == 0 else "train"] for index, row in enumerate(splice_rows(40))]
    path = write_csv(tmp_path / "splice.csv", ["sequence", "label", "fold"], rows)
    with pytest.raises(DataError, match=r"validation split \(0 of 40 usable rows\) is empty: mark rows 'valid' in "
                                        r"column 'fold'"):
        load_task(own_task_spec(path, ["label"], dna, split_column="fold"), dna)


@pytest.mark.parametrize("options, words", [
    ({"split": "random", "split_column": "fold"}, "--split random and --split-column fold: give one"),
    ({"split_column": "label"}, "column 'label' is the input or a target"),
    ({"split_column": "folds"}, r"columns \['folds'\] not found"),
])
def test_split_column_faults_are_one_error(tmp_path, options, words):
    rows = [[*row, "train"] for row in splice_rows(20)]
    path = write_csv(tmp_path / "splice.csv", ["sequence", "label", "fold"], rows)
    with pytest.raises((ConfigError, DataError), match=words):
        own_task_spec(path, ["label"], MODALITIES.get("dna")(), **options)


@pytest.mark.parametrize("verb", [["finetune", "--checkpoint", "run"], ["benchmark", "--checkpoint", "run"]])
def test_a_repeated_target_or_invariance_adds_to_the_first(verb):
    """--target a --target b predicts both: argparse alone would keep b and silently drop a."""
    args = build_parser().parse_args([*verb, "--data", "t.csv", "--target", "a", "--target", "b", "c",
                                      "--invariant-to", "shift", "--invariant-to", "reverse_complement"])
    assert (args.target, args.invariant_to) == (["a", "b", "c"], ["shift", "reverse_complement"])


# --- which tasks a benchmark is given --------------------------------------------------------------------------

def test_task_yaml_files_and_folders_stand_among_the_task_names(tmp_path):
    esol = builtin_dir("tasks") / "moleculenet" / "esol.yaml"
    (tmp_path / "mine").mkdir()
    for name in ("b.yaml", "a.yml", "recipe.yaml", "notes.txt"):
        (tmp_path / "mine" / name).write_text(esol.read_text())
    assert chosen_tasks("moleculenet", ["bbbp", str(esol)]) == ["moleculenet/bbbp", str(esol)]
    assert chosen_tasks(None, ["glue/rte", str(tmp_path / "mine")]) == [
        "glue/rte", str(tmp_path / "mine" / "a.yml"), str(tmp_path / "mine" / "b.yaml")]
    assert chosen_tasks("dna", None) == task_names("dna", default_only=True)


@pytest.mark.parametrize("benchmark, names, words", [
    (None, None, "name a benchmark"),
    (None, ["rte"], "unknown task 'rte'; did you mean 'glue/rte'?"),
    ("glue", ["nope"], r"unknown tasks \['glue/nope'\]"),
    ("glue", ["absent.yaml"], "task file absent.yaml not found"),
])
def test_a_task_that_is_nowhere_is_one_error(benchmark, names, words):
    with pytest.raises(ConfigError, match=words):
        chosen_tasks(benchmark, names)


def test_two_different_tasks_of_one_key_are_refused_and_a_task_given_twice_runs_once():
    """Their cells would share a folder: the second task's scores were the first's, shown twice (or, with the
    built-in moleculenet/esol beside a YAML named like it, the built-in's column held the YAML's data)."""
    esol = load_task_spec("moleculenet/esol")
    mine = esol.model_copy(update={"files": {"all": "/data/mine.csv"}})
    assert distinct_tasks([esol, esol]) == [esol]
    for other in (mine, mine.model_copy(update={"name": "ESOL"})):  # cells are named in lower case
        with pytest.raises(ConfigError, match=r"two different tasks would share their cells: moleculenet/esol \(files "
                                              r"delaney-processed.csv\) and moleculenet/(esol|ESOL) \(files "
                                              r"/data/mine.csv\); give one another name or benchmark"):
            distinct_tasks([esol, other])


# --- end to end: the command line and Python -------------------------------------------------------------------

@pytest.mark.integration
def test_benchmark_on_my_csv_gives_the_rows_a_built_in_benchmark_gives(esol_csv, tiny_smiles_run, tmp_path,
                                                                       monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the default --out is under runs/, named after the file
    assert main(["benchmark", "--data", str(esol_csv), "--target", "logS", "--checkpoint", str(tiny_smiles_run),
                 "--seeds", "2", *QUICK]) == 0
    out = tmp_path / "runs" / "benchmark-own-data-solubility-logs"
    results = json.loads((out / "results.json").read_text())
    assert list(results["systems"]) == [CHECKPOINT_ROW, "no pretraining", ECFP_ROW, MEAN_ROW.name]
    assert {(row["system"], row["task"], row["seeds"]) for row in results["rows"]} == {
        (system, "own-data/solubility-logS", 2) for system in results["systems"]}
    printed = capsys.readouterr().out
    assert printed.strip() == (out / "results.md").read_text().strip()
    assert "## Pretrained rows against no pretraining" in printed and "Welch's t-test" in printed
    assert f"| {CHECKPOINT_ROW} | " in printed.split("## Pretrained rows against no pretraining")[1]
    assert "'logS' read as regression, scored by rmse; scaffold split 80/10/10" in printed
    assert "fine-tuned with the moleculenet recipe" in printed and (out / "results.png").is_file()


@pytest.mark.integration
def test_a_folder_of_task_yaml_files_is_benchmarked_like_a_table(esol_csv, tiny_smiles_run, tmp_path):
    """Tasks of no built-in benchmark: the recipe and baseline of their modality's, and the constant row."""
    folder = tmp_path / "mylab"
    folder.mkdir()
    spec = yaml.safe_load((builtin_dir("tasks") / "moleculenet" / "esol.yaml").read_text())
    spec.update(benchmark="mylab", files={"all": str(esol_csv)}, input_columns=["smiles"], label_columns=["logS"])
    (folder / "solubility.yaml").write_text(yaml.safe_dump(spec))
    out = tmp_path / "bench"
    assert main(["benchmark", "--tasks", str(folder), "--checkpoint", str(tiny_smiles_run), "--seeds", "1",
                 "--out", str(out), *QUICK]) == 0
    results = json.loads((out / "results.json").read_text())
    assert list(results["systems"]) == [CHECKPOINT_ROW, "no pretraining", ECFP_ROW, MEAN_ROW.name]
    assert results["task_order"] == ["mylab/esol"] and results["title"] == "mylab benchmark"


@pytest.mark.integration
def test_a_fine_tuning_that_diverges_is_n_a_in_the_report_not_a_traceback(esol_csv, tiny_smiles_run, tmp_path,
                                                                          capsys):
    """A learning rate that turns the loss NaN leaves the validation metric undefined at every epoch: the last epoch
    stands, its scores null, and the report says n/a (it raised KeyError on the empty validation scores before)."""
    out = tmp_path / "nan"
    assert main(["benchmark", "--data", str(esol_csv), "--target", "logS", "--checkpoint", str(tiny_smiles_run),
                 "--seeds", "1", "--no-references", "--set", "lr=1e30", "--out", str(out), *QUICK]) == 0
    cell = json.loads(next((out / "cells").glob("*/*/seed-0.json")).read_text())
    assert (cell["valid"], cell["test"], cell["best_epoch"]) == ({"rmse": None, "mae": None},
                                                                 {"rmse": None, "mae": None}, 1)
    assert f"| {CHECKPOINT_ROW} | n/a |" in capsys.readouterr().out


@pytest.mark.integration
def test_per_task_settings_must_name_the_table_s_task(esol_csv, tiny_smiles_run, tmp_path, capsys):
    """No recipe check covers a table's task or tasks of no benchmark: a misspelt name changed nothing, silently."""
    run = ["--checkpoint", str(tiny_smiles_run), *QUICK, "--out", str(tmp_path / "b")]
    for verb in ("finetune", "benchmark"):
        one_line_error(capsys, main([verb, "--data", str(esol_csv), "--target", "logS", "--set",
                                     "task_settings={solubility: {lr: 1}}", *run]),
                       "task_settings names no task of this run: solubility (its tasks: solubility-logS)")
    with pytest.raises(ConfigError, match="task_settings names no task of this run: esl"):
        polymask.benchmark(checkpoints=tiny_smiles_run, tasks=["moleculenet/esol"], seeds=1, out=tmp_path / "c",
                           task_settings={"esl": {"lr": 1e-4}})


@pytest.mark.integration
def test_checkpoints_of_two_modalities_are_refused(esol_csv, tiny_smiles_run, tiny_text_checkpoint, tmp_path,
                                                   capsys):
    """A text row keeps records a SMILES row rejects (or reads them otherwise): the rows were scored on different
    examples, the report listing the first row's counts."""
    code = main(["benchmark", "--data", str(esol_csv), "--target", "logS", "--checkpoint", str(tiny_smiles_run),
                 "--checkpoint", str(tiny_text_checkpoint), "--out", str(tmp_path / "b"), *QUICK])
    one_line_error(capsys, code, "checkpoints of 2 modalities", f"{tiny_smiles_run} (smiles)",
                   f"{tiny_text_checkpoint} (text)")


@pytest.mark.integration
def test_polymask_benchmark_from_python_takes_a_table_and_its_split_column(tiny_smiles_run, tmp_path):
    rows = moleculenet_rows("delaney-processed", ["smiles", ESOL_TARGET], 60)
    folds = ["test" if index % 10 == 0 else "valid" if index % 10 == 1 else "train" for index in range(60)]
    path = write_csv(tmp_path / "solubility.csv", ["smiles", "logS", "fold"],
                     [[*row, fold] for row, fold in zip(rows, folds)])
    table = polymask.benchmark(checkpoints=tiny_smiles_run, data=path, target="logS", split_column="fold", seeds=1,
                               out=tmp_path / "b", epochs=1, max_len=64, batch_size=16)
    assert list(dict.fromkeys(table["system"])) == [CHECKPOINT_ROW, "no pretraining", ECFP_ROW, MEAN_ROW.name]
    assert set(table["task"]) == {"own-data/solubility-logS"} and table["mean"].notna().all()
    assert set(zip(table["split"], table["n_train"], table["n_valid"], table["n_test"])) == {("column", 48, 6, 6)}


@pytest.mark.integration
def test_table_faults_end_in_one_line(esol_csv, tiny_smiles_run, tmp_path, capsys):
    run = ["--checkpoint", str(tiny_smiles_run), *QUICK, "--out", str(tmp_path / "b")]
    one_line_error(capsys, main(["benchmark", "--data", str(tmp_path / "absent.csv"), "--target", "y", *run]),
                   "absent.csv", "not found")
    one_line_error(capsys, main(["benchmark", "--data", str(esol_csv), "--target", "logP", *run]), "solubility.csv",
                   "['logP'] not found")
    one_line_error(capsys, main(["benchmark", "--data", str(esol_csv), "--target", "logS", "--checkpoint",
                                 str(tmp_path), *QUICK]), str(tmp_path))
    one_line_error(capsys, main(["benchmark", "--data", str(esol_csv), *run]), "needs --target")
    one_line_error(capsys, main(["benchmark", "moleculenet", "--data", str(esol_csv), "--target", "logS", *run]),
                   "leave out the benchmark name")
    one_line_error(capsys, main(["benchmark", "--target", "logS", *run]), "--target: for your own table")
    with pytest.raises(SystemExit) as stop:
        main(["benchmark", "--data", str(esol_csv), "--target", "logS", "--kind", "count", *run])
    assert stop.value.code == 2 and "argument --kind: invalid choice: 'count'" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="--kind count: a table's targets are read as one of binary"):
        polymask.benchmark(checkpoints=tiny_smiles_run, data=esol_csv, target="logS", kind="count")
