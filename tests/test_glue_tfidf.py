"""GLUE's TF-IDF + linear model reference: it runs on sentence, pair and regression tasks built from the
committed WNLI excerpt (CC BY 4.0), tunes its strength on validation from its grid, and its pair features
learn a task that only word overlap decides."""
import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from polymask.benchmarking.constant import majority_class
from polymask.benchmarking.families.glue import ALPHA_GRID, C_GRID, tfidf_features, tfidf_linear, tuned
from polymask.benchmarking.systems import REFERENCES
from polymask.errors import ConfigError
from polymask.modalities import MODALITIES
from polymask.tasks.data.loading import TaskData, TaskSplit, load_task
from polymask.tasks.data.spec import load_task_spec

EXCERPTS = Path(__file__).parent / "data" / "glue"


@pytest.fixture(scope="module")
def text():
    return MODALITIES.get("text")()


@pytest.fixture(scope="module")
def wnli(text):
    return load_task(load_task_spec("glue/wnli"), text, EXCERPTS)


def write_from_wnli(folder: Path, name: str, header: str, row: str) -> Path:
    """A task in ``name``'s layout whose train and dev rows are ``row`` formatted with each WNLI row's fields."""
    (folder / name).mkdir(parents=True)
    for part in ("train", "dev"):
        rows = [line.split("\t") for line in (EXCERPTS / "WNLI" / f"{part}.tsv").read_text().splitlines()[1:]]
        lines = [row.format(first=first, second=second, label=int(label)) for _, first, second, label in rows]
        (folder / name / f"{part}.tsv").write_text("\n".join([header, *lines]) + "\n")
    return folder


def assert_finite_scores(result: dict) -> None:
    metrics = [value for split in ("valid", "test") for value in result[split].values()]
    assert result["valid"] and result["test"] and all(math.isfinite(value) for value in metrics), result


def test_the_reference_is_registered_beside_the_majority_class():
    names = [reference.name for reference in REFERENCES.get("glue")]
    assert names == ["majority class of train (mean for regression)",
                     "TF-IDF word 1-2-grams + char 2-5-grams + linear model"]


def test_pair_task_scores_and_chooses_c_from_the_grid(wnli):
    assert_finite_scores(tfidf_linear(wnli, 0))
    chosen, predictions = tuned(wnli, 0, tfidf_features(wnli))
    assert chosen in C_GRID and predictions["test"].shape == (len(wnli.test), 1)


def test_single_sentence_task_scores_and_chooses_c_from_the_grid(text, tmp_path):
    folder = write_from_wnli(tmp_path, "SST-2", "sentence\tlabel", "{first}\t{label}")
    sst2 = load_task(load_task_spec("glue/sst2"), text, folder)
    assert_finite_scores(tfidf_linear(sst2, 0))
    assert tuned(sst2, 0, tfidf_features(sst2))[0] in C_GRID


def test_regression_task_scores_and_chooses_alpha_from_the_grid(text, tmp_path):
    folder = write_from_wnli(tmp_path, "STS-B", "sentence1\tsentence2\tscore", "{first}\t{second}\t{label}.5")
    stsb = load_task(load_task_spec("glue/stsb"), text, folder)
    result = tfidf_linear(stsb, 0)
    assert_finite_scores(result)
    assert set(result["test"]) == {"pearson", "spearman"}
    assert tuned(stsb, 0, tfidf_features(stsb))[0] in ALPHA_GRID


def test_multi_label_tasks_are_refused_in_one_line(wnli):
    two_labels = TaskSplit(wnli.train.inputs, np.hstack([wnli.train.labels, wnli.train.labels]))
    with pytest.raises(ConfigError, match="glue/wnli: the TF-IDF reference handles single-label"):
        tfidf_linear(dataclasses.replace(wnli, train=two_labels), 0)


def overlap_split(rng: np.random.Generator, count: int, shared: tuple[int, ...] = (1, 6)) -> TaskSplit:
    """Pairs of made-up 8-word sentences: with label k, the second keeps ``shared[k]`` of the first's words."""
    vocabulary = [f"tok{index:03d}" for index in range(300)]
    inputs, labels = [], []
    for label in rng.integers(0, len(shared), size=count):
        first = list(rng.choice(vocabulary, 8, replace=False))
        kept = list(rng.choice(first, shared[label], replace=False))
        fresh = [word for word in rng.choice(vocabulary, 12, replace=False) if word not in first]
        second = kept + fresh[:8 - len(kept)]
        inputs.append((" ".join(first), " ".join(rng.permutation(second))))
        labels.append([float(label)])
    return TaskSplit(inputs, np.array(labels))


def test_pair_features_learn_word_overlap_well_above_the_majority_class():
    rng = np.random.default_rng(0)
    task = TaskData(load_task_spec("glue/rte"), ["label"], overlap_split(rng, 200), overlap_split(rng, 100),
                    overlap_split(rng, 100), files=[])
    result = tfidf_linear(task, 3)
    majority = majority_class(task, 3)["valid"]["accuracy"]
    assert result["valid"]["accuracy"] > majority + 0.3 and result["test"]["accuracy"] > 0.85, (result, majority)
    again = tfidf_linear(task, 3)
    assert (again["valid"], again["test"]) == (result["valid"], result["test"])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # separable: large C never converges
def test_multiclass_pairs_and_extra_test_sets_are_scored():
    rng = np.random.default_rng(1)
    splits = [overlap_split(rng, count, shared=(1, 4, 7)) for count in (150, 60, 60, 40)]
    task = TaskData(load_task_spec("glue/mnli"), ["gold_label"], *splits[:3], files=[],
                    extra_tests={"mismatched": splits[3]})
    result = tfidf_linear(task, 0)
    assert result["test"]["accuracy"] > 0.8 and result["test"]["mismatched_accuracy"] > 0.8, result
