"""GLUE: every spec loads from real excerpts in the GLUE layout (quirks included), parquet and
``datasets.Dataset`` tables, held-out validation, extra test sets, metrics, and a real fine-tune."""
import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as skm

from polymask.cli import main
from polymask.errors import DataError
from polymask.modalities import MODALITIES
from polymask.tasks.data import load_task
from polymask.tasks.finetune import FinetuneConfig, finetune
from polymask.tasks.metrics import score
from polymask.tasks.spec import TaskSpec, load_task_spec, task_names
from polymask.training.checkpoint import load_checkpoint

EXCERPTS = Path(__file__).parent / "data" / "glue"
# task -> (train rows in the excerpt, dev rows); the excerpts are the first lines of the GLUE files
PRESENT = {"cola": (300, 100), "sst2": (4000, 872), "mrpc": (120, 60), "stsb": (100, 60), "rte": (100, 50),
           "wnli": (100, 40)}


@pytest.fixture(scope="module")
def text():
    return MODALITIES.get("text")()


def test_specs_cover_glue():
    assert set(task_names("glue")) == {f"glue/{t}" for t in
                                       ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")}
    assert load_task_spec("glue/mnli").extra_test_files == {"mismatched": "MNLI/dev_mismatched.tsv"}


@pytest.mark.parametrize("name", sorted(PRESENT))
def test_each_present_task_loads_every_row_with_a_held_out_validation_split(text, name):
    task = load_task(load_task_spec(f"glue/{name}"), text, EXCERPTS)
    train_rows, dev_rows = PRESENT[name]
    assert not task.skipped
    assert len(task.train) + len(task.valid) == train_rows and len(task.test) == dev_rows
    assert len(task.valid) == round(0.1 * train_rows)
    assert "10% of train held out" in task.protocol
    again = load_task(load_task_spec(f"glue/{name}"), text, EXCERPTS)
    assert again.valid.inputs == task.valid.inputs  # the same fixed-seed hold-out every time
    assert len(task.train.inputs[0]) == len(task.spec.input_columns)


def test_cola_has_no_header_row(text):
    task = load_task(load_task_spec("glue/cola"), text, EXCERPTS)
    first = (EXCERPTS / "CoLA" / "dev.tsv").read_text().splitlines()[0].split("\t")
    assert task.test.inputs[0] == (first[3],) and task.test.labels[0, 0] == float(first[1])


def test_mrpc_bom_header_and_quotes_are_read_verbatim(text):
    assert (EXCERPTS / "MRPC" / "dev.tsv").read_bytes().startswith(b"\xef\xbb\xbfQuality")
    task = load_task(load_task_spec("glue/mrpc"), text, EXCERPTS)
    assert task.test.inputs[0][1].startswith('" The foodservice pie business does not fit')
    pairs = [inputs for inputs in task.train.inputs + task.valid.inputs if inputs[1].startswith('" This is an extremely')]
    assert len(pairs) == 1  # the pair a quote-aware reader loses (2750203/2750153)


def test_sst2_quotes_are_plain_text(text):
    task = load_task(load_task_spec("glue/sst2"), text, EXCERPTS)
    assert any("`` crossroads ''" in inputs[0] for inputs in task.test.inputs)


def test_string_labels_map_to_label_values(text):
    task = load_task(load_task_spec("glue/rte"), text, EXCERPTS)
    raw = [line.split("\t")[3] for line in (EXCERPTS / "RTE" / "dev.tsv").read_text().splitlines()[1:]]
    assert task.test.labels[:, 0].tolist() == [float(label == "entailment") for label in raw]


def test_a_task_without_its_files_is_reported_missing(text):
    with pytest.raises(DataError, match="QNLI/train.tsv' not found"):
        load_task(load_task_spec("glue/qnli"), text, EXCERPTS)


def test_parquet_and_datasets_tables_load_like_the_tsv(text, tmp_path):
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    spec = load_task_spec("glue/stsb")
    tsv = load_task(spec, text, EXCERPTS)
    rows = [line.split("\t") for line in (EXCERPTS / "STS-B" / "train.tsv").read_text().splitlines()[1:]]
    columns = {"sentence1": [r[7] for r in rows], "sentence2": [r[8] for r in rows], "score": [float(r[9]) for r in rows]}
    pq.write_table(pa.table(columns), tmp_path / "train.parquet")
    from_parquet = load_task(spec, text, EXCERPTS, tables={"train": tmp_path / "train.parquet"})
    from_dataset = load_task(spec, text, EXCERPTS, tables={"train": datasets.Dataset.from_dict(columns)})
    for loaded in (from_parquet, from_dataset):
        assert loaded.valid.inputs == tsv.valid.inputs and np.allclose(loaded.train.labels, tsv.train.labels)
    assert "train: datasets.Dataset" in from_dataset.files


def test_extra_test_sets_are_scored_at_the_best_epoch(text, tiny_text_checkpoint, tmp_path):
    raw = load_task_spec("glue/rte").model_dump()
    spec = TaskSpec.model_validate({**raw, "extra_test_files": {"again": "RTE/dev.tsv"}})
    task = load_task(spec, text, EXCERPTS)
    checkpoint = load_checkpoint(tiny_text_checkpoint)
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


def test_sst2_fine_tune_beats_the_majority_class(text, tiny_text_checkpoint):
    task = load_task(load_task_spec("glue/sst2"), text, EXCERPTS)
    checkpoint = load_checkpoint(tiny_text_checkpoint)
    result = finetune(task, checkpoint.build_encoder(), checkpoint.tokenizer, text,
                      FinetuneConfig(epochs=3, lr=2e-3, max_train_examples=2000, max_valid_examples=200,
                                     precision="fp32"), seed=0)
    majority = max(task.test.labels.mean(), 1 - task.test.labels.mean())  # 444 of the 872 dev sentences
    assert result["n_train"] == 2000 and result["n_valid"] == 200 and result["n_test"] == 872
    assert result["test"]["accuracy"] > majority + 0.07, result


def test_benchmark_cli_reports_dev_scores_further_metrics_and_missing_tasks(tiny_text_checkpoint, tmp_path):
    out = tmp_path / "glue"
    assert main(["benchmark", "glue", "--checkpoint", str(tiny_text_checkpoint), "--tasks", "mrpc", "qnli",
                 "--seeds", "1", "--epochs", "1", "--no-references", "--data-dir", str(EXCERPTS),
                 "--out", str(out), "--quiet"]) == 0
    markdown = (out / "results.md").read_text()
    assert "GLUE dev set (GLUE test labels are hidden)" in markdown
    assert "| glue/mrpc | accuracy |" in markdown  # MRPC's F1 heads the table, its accuracy follows
    assert "glue/qnli: task file 'QNLI/train.tsv' not found" in markdown
    report = json.loads((out / "results.json").read_text())
    assert [row["task"] for row in report["rows"]] == ["glue/mrpc"]
    assert set(report["rows"][0]) >= {"f1_mean", "accuracy_mean"}


def test_majority_class_reference_scores_what_a_constant_scores(text):
    from polymask.tasks.glue import majority_class

    sst2 = load_task(load_task_spec("glue/sst2"), text, EXCERPTS)
    share = max(sst2.test.labels.mean(), 1 - sst2.test.labels.mean())
    assert majority_class(sst2, 0)["test"]["accuracy"] == pytest.approx(share)
    assert majority_class(load_task(load_task_spec("glue/cola"), text, EXCERPTS), 0)["test"]["mcc"] == 0.0
    mrpc = load_task(load_task_spec("glue/mrpc"), text, EXCERPTS)
    positive = mrpc.test.labels.mean()  # the majority of MRPC's pairs are paraphrases
    assert majority_class(mrpc, 0)["test"]["f1"] == pytest.approx(2 * positive / (1 + positive))
    assert np.isnan(majority_class(load_task(load_task_spec("glue/stsb"), text, EXCERPTS), 0)["test"]["pearson"])
