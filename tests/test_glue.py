"""GLUE: specs, loading (GLUE layout quirks included), parquet and ``datasets.Dataset`` tables,
held-out validation, extra test sets, metrics, and real fine-tunes.

Committed real excerpts: WNLI (CC BY 4.0) and QNLI (CC BY-SA 4.0) only, the GLUE tasks whose
licences allow it. The layout quirks of CoLA (no header), MRPC (UTF-8 BOM, leading quotes) and
SST-2 (TeX quotes) are checked on small files written here in those layouts. Tests on the full
GLUE files run when a GLUE folder is found ($POLYMASK_DATA_DIR/glue or the steering repo's
shared/data/glue) and are skipped otherwise.
"""
import json
import os
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as skm

from polymask.checkpoints.pretrained import read_checkpoint
from polymask.cli import main
from polymask.errors import DataError
from polymask.finetune_config import FinetuneConfig
from polymask.modalities import MODALITIES
from polymask.tasks.data.loading import load_task
from polymask.tasks.data.spec import TaskSpec, load_task_spec, task_names
from polymask.tasks.finetune.tables import finetune
from polymask.tasks.metrics.scoring import score

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end

EXCERPTS = Path(__file__).parent / "data" / "glue"
CANDIDATES = [Path(os.environ.get("POLYMASK_DATA_DIR", "/nonexistent")) / "glue",
              Path(__file__).resolve().parents[2] / "shared" / "data" / "glue"]
GLUE = next((path for path in CANDIDATES if (path / "SST-2" / "train.tsv").is_file()), None)
needs_glue = pytest.mark.skipif(GLUE is None, reason="the full GLUE files are not available here")


@pytest.fixture(scope="module")
def text():
    return MODALITIES.get("text")()


def write_layout(folder: Path, name: str, train: str, dev: str) -> Path:
    """Files in a GLUE task's layout (format fixtures; the sentences are written for these tests)."""
    (folder / name).mkdir(parents=True, exist_ok=True)
    (folder / name / "train.tsv").write_bytes(train.encode())
    (folder / name / "dev.tsv").write_bytes(dev.encode())
    return folder


def test_specs_cover_glue():
    assert set(task_names("glue")) == {f"glue/{t}" for t in
                                       ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")}
    assert load_task_spec("glue/mnli").extra_test_files == {"mismatched": "MNLI/dev_mismatched.tsv"}


def test_wnli_loads_every_row_with_a_fixed_held_out_validation_split(text):
    task = load_task(load_task_spec("glue/wnli"), text, EXCERPTS)
    assert not task.skipped
    assert len(task.train) + len(task.valid) == 100 and len(task.test) == 40 and len(task.valid) == 10
    assert "10% of train held out" in task.protocol
    again = load_task(load_task_spec("glue/wnli"), text, EXCERPTS)
    assert again.valid.inputs == task.valid.inputs
    assert len(task.train.inputs[0]) == 2


def test_cola_layout_has_no_header_row(text, tmp_path):
    rows = "gj04\t1\t\tThe cat sat on the mat.\ngj04\t0\t*\tCat the mat on sat.\n"
    folder = write_layout(tmp_path, "CoLA", rows * 5, rows)
    task = load_task(load_task_spec("glue/cola"), text, folder)
    assert task.test.inputs == [("The cat sat on the mat.",), ("Cat the mat on sat.",)]
    assert task.test.labels[:, 0].tolist() == [1.0, 0.0]


def test_mrpc_layout_bom_header_and_leading_quotes_are_read_verbatim(text, tmp_path):
    header = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    rows = '1\t1\t2\tIt rained all day.\t" It rained from dawn to dusk.\n0\t3\t4\tShe left early.\tHe stayed late.\n'
    folder = write_layout(tmp_path, "MRPC", header + rows * 5, header + rows)
    task = load_task(load_task_spec("glue/mrpc"), text, folder)
    assert task.test.inputs[0] == ("It rained all day.", '" It rained from dawn to dusk.')


def test_sst2_layout_quotes_are_plain_text(text, tmp_path):
    rows = "sentence\tlabel\na `` great '' film \t1\nit 's \" dull \t0\n"
    folder = write_layout(tmp_path, "SST-2", rows + rows.split("\n", 1)[1] * 4, rows)
    task = load_task(load_task_spec("glue/sst2"), text, folder)
    assert task.test.inputs == [("a `` great '' film",), ('it \'s " dull',)]


def test_string_labels_map_to_label_values(text, tmp_path):
    header = "index\tsentence1\tsentence2\tlabel\n"
    rows = "0\tA dog barks.\tAn animal makes a sound.\tentailment\n1\tA dog barks.\tA cat sleeps.\tnot_entailment\n"
    folder = write_layout(tmp_path, "RTE", header + rows * 5, header + rows)
    task = load_task(load_task_spec("glue/rte"), text, folder)
    assert task.test.labels[:, 0].tolist() == [1.0, 0.0]
    (folder / "RTE" / "dev.tsv").write_text(header + rows + "2\tA.\tB.\tmaybe\n")  # (a file of only such rows fails)
    assert "is not one of" in load_task(load_task_spec("glue/rte"), text, folder).skipped[0]["reason"]


def test_a_class_label_outside_the_task_is_skipped_with_its_line(text, tmp_path):
    """A binary label other than 0/1 (MRPC's 2) trained as a BCE target and crashed F1 on a dev file; a class
    number that is negative or fractional crashed cross-entropy: each such row is skipped, named by line."""
    header = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    rows = "1\t1\t2\tIt rained all day.\tIt poured.\n0\t3\t4\tShe left early.\tHe stayed late.\n"
    folder = write_layout(tmp_path, "MRPC", header + rows * 5, header + rows + "2\t5\t6\tA.\tB.\n0.5\t7\t8\tC.\tD.\n")
    task = load_task(load_task_spec("glue/mrpc"), text, folder)
    assert task.test.labels[:, 0].tolist() == [1.0, 0.0]
    assert [(entry["line"], entry["reason"]) for entry in task.skipped] == [
        (4, "label 2 is not 0 or 1 (a binary task)"), (5, "label 0.5 is not 0 or 1 (a binary task)")]
    spec = load_task_spec("glue/mnli").model_copy(update={"label_values": None, "extra_test_files": {}})
    header = "sentence1\tsentence2\tgold_label\n"
    rows = "A dog barks.\tA sound.\t0\nA dog barks.\tA cat.\t1\nA dog.\tAn animal.\t2\n"
    write_layout(tmp_path, "MNLI", header + rows * 4, header + rows + "A.\tB.\t-1\nC.\tD.\t1.5\n")
    (tmp_path / "MNLI" / "dev_matched.tsv").write_bytes((tmp_path / "MNLI" / "dev.tsv").read_bytes())
    task = load_task(spec, text, tmp_path)
    assert task.test.labels[:, 0].tolist() == [0.0, 1.0, 2.0]
    assert [entry["reason"] for entry in task.skipped] == ["class label -1 is not a class number (0, 1, 2, ...)",
                                                           "class label 1.5 is not a class number (0, 1, 2, ...)"]


def test_a_task_without_its_files_is_reported_missing(text):
    with pytest.raises(DataError, match="QNLI/train.tsv' not found"):
        load_task(load_task_spec("glue/qnli"), text, EXCERPTS)


def test_parquet_and_datasets_tables_load_like_the_tsv(text, tmp_path):
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    spec = load_task_spec("glue/wnli")
    tsv = load_task(spec, text, EXCERPTS)
    rows = [line.split("\t") for line in (EXCERPTS / "WNLI" / "train.tsv").read_text().splitlines()[1:]]
    columns = {"sentence1": [r[1] for r in rows], "sentence2": [r[2] for r in rows], "label": [int(r[3]) for r in rows]}
    pq.write_table(pa.table(columns), tmp_path / "train.parquet")
    from_parquet = load_task(spec, text, EXCERPTS, tables={"train": tmp_path / "train.parquet"})
    from_dataset = load_task(spec, text, EXCERPTS, tables={"train": datasets.Dataset.from_dict(columns)})
    for loaded in (from_parquet, from_dataset):
        assert loaded.valid.inputs == tsv.valid.inputs and np.allclose(loaded.train.labels, tsv.train.labels)
    assert "train: datasets.Dataset" in from_dataset.files


def test_extra_test_sets_are_scored_at_the_best_epoch(text, tiny_text_checkpoint):
    raw = load_task_spec("glue/wnli").model_dump()
    spec = TaskSpec.model_validate({**raw, "extra_test_files": {"again": "WNLI/dev.tsv"}})
    task = load_task(spec, text, EXCERPTS)
    checkpoint = read_checkpoint(tiny_text_checkpoint)
    result = finetune(task, checkpoint.build_encoder(), checkpoint.tokenizer, text,
                      FinetuneConfig(epochs=1, precision="fp32"), seed=0)
    assert result["test"]["again_accuracy"] == result["test"]["accuracy"]


def test_glue_metrics_against_scikit_learn_and_scipy():
    rng = np.random.default_rng(1)
    truth = rng.integers(0, 2, size=80)
    probability = np.clip(truth * 0.3 + rng.random(80) * 0.7, 0, 1)[:, None]
    predicted = probability[:, 0] >= 0.5
    values = score(["mcc", "accuracy", "f1"], truth[:, None].astype(float), probability)
    assert np.isclose(values["mcc"], skm.matthews_corrcoef(truth, predicted))
    assert np.isclose(values["accuracy"], skm.accuracy_score(truth, predicted))
    assert np.isclose(values["f1"], skm.f1_score(truth, predicted))
    similarity = rng.uniform(0, 5, size=(50, 1))
    guess = similarity + rng.normal(size=(50, 1))
    values = score(["pearson", "spearman"], similarity, guess)
    assert np.isclose(values["pearson"], stats.pearsonr(similarity[:, 0], guess[:, 0])[0])
    assert np.isclose(values["spearman"], stats.spearmanr(similarity[:, 0], guess[:, 0])[0])


def test_benchmark_cli_reports_dev_scores_and_missing_tasks(tiny_text_checkpoint, tmp_path):
    out = tmp_path / "glue"
    assert main(["benchmark", "glue", "--checkpoint", str(tiny_text_checkpoint), "--tasks", "wnli", "qnli",
                 "--seeds", "1", "--epochs", "1", "--no-references", "--data-dir", str(EXCERPTS),
                 "--out", str(out), "--quiet"]) == 0
    markdown = (out / "results.md").read_text()
    assert "GLUE dev set (GLUE test labels are hidden)" in markdown
    assert "glue/qnli: task file 'QNLI/train.tsv' not found" in markdown
    report = json.loads((out / "results.json").read_text())
    assert [row["task"] for row in report["rows"]] == ["glue/wnli"]


def test_majority_class_reference_scores_what_a_constant_scores(text, tmp_path):
    from polymask.benchmarking.constant import majority_class

    wnli = load_task(load_task_spec("glue/wnli"), text, EXCERPTS)
    train_majority = float(wnli.train.labels.mean() >= 0.5)
    share = float((wnli.test.labels[:, 0] == train_majority).mean())  # WNLI's dev is adversarial to train
    assert majority_class(wnli, 0)["test"]["accuracy"] == pytest.approx(share)
    rows = "gj04\t1\t\tThe cat sat.\ngj04\t0\t*\tSat cat the.\ngj04\t1\t\tA dog ran.\n"
    cola = load_task(load_task_spec("glue/cola"), text, write_layout(tmp_path, "CoLA", rows * 4, rows))
    assert majority_class(cola, 0)["test"]["mcc"] == 0.0


@needs_glue
@pytest.mark.parametrize("name, folder", [("cola", "CoLA"), ("sst2", "SST-2"), ("mrpc", "MRPC"), ("stsb", "STS-B"),
                                          ("rte", "RTE"), ("wnli", "WNLI")])
def test_every_full_glue_task_loads_without_skipping_a_row(text, name, folder):
    task = load_task(load_task_spec(f"glue/{name}"), text, GLUE)
    lines = (GLUE / folder / "dev.tsv").read_text(encoding="utf-8-sig").splitlines()
    header_lines = 0 if name == "cola" else 1
    assert not task.skipped and len(task.test) == len(lines) - header_lines


@needs_glue
def test_sst2_fine_tune_beats_the_majority_class(text, tiny_text_checkpoint):
    task = load_task(load_task_spec("glue/sst2"), text, GLUE)
    checkpoint = read_checkpoint(tiny_text_checkpoint)
    result = finetune(task, checkpoint.build_encoder(), checkpoint.tokenizer, text,
                      FinetuneConfig(epochs=3, lr=2e-3, max_train_examples=2000, max_valid_examples=200,
                                     precision="fp32"), seed=0)
    majority = max(task.test.labels.mean(), 1 - task.test.labels.mean())  # 444 of the 872 dev sentences
    assert result["n_train"] == 2000 and result["n_test"] == 872
    assert result["test"]["accuracy"] > majority + 0.07, result
