"""The DNA task specs: each loads with the sizes its source documents; stratified splits are disjoint,
keep class proportions and are fixed; rare 16S phyla are merged into "other" at load time.

Tasks whose files are committed (tasks/dna/data/) always run. The others are read from the shared data
directory ($POLYMASK_DATA_DIR, default /work/shared/data) and skipped with a reason when it is absent.
"""
import csv
import functools
import gzip
import hashlib
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from polymask.modalities.dna import Dna
from polymask.resources import builtin_dir
from polymask.tasks.data.loading import TaskData, load_task, with_caps
from polymask.tasks.data.spec import load_task_spec, task_names

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end

SHARED_DATA = Path(os.environ.get("POLYMASK_DATA_DIR", "/work/shared/data"))
COMMITTED = builtin_dir("tasks") / "dna" / "data"

#: train / valid / test sizes: GUE's own files (counts as in the GUE paper); the rest after deduplication.
EXPECTED_SIZES = {
    "dna/prom_core_all": (47356, 5920, 5920),
    "dna/prom_core_notata": (42452, 5307, 5307),
    "dna/prom_core_tata": (4904, 613, 613),
    "dna/prom_300_tata": (4904, 613, 613),
    "dna/tf_0": (32378, 1000, 1000),
    "dna/tf_1": (30672, 1000, 1000),
    "dna/tf_2": (19000, 1000, 1000),
    "dna/tf_3": (27294, 1000, 1000),
    "dna/tf_4": (19000, 1000, 1000),
    "dna/mouse_0": (6478, 810, 810),
    "dna/mouse_2": (2620, 328, 328),
    "dna/mouse_3": (1904, 239, 239),
    "dna/mouse_4": (15064, 1883, 1883),
    "dna/splice": (2400, 300, 300),
    "dna/ecoli_promoters": (63, 21, 22),
    "dna/16s_phylum": (4144, 518, 519),
}
STRATIFIED = ["dna/splice", "dna/ecoli_promoters", "dna/16s_phylum"]


def committed_file(name: str) -> Path | None:
    return next((p for p in (COMMITTED / name, COMMITTED / f"{name}.gz") if p.is_file()), None)


def is_committed(key: str) -> bool:
    return all(committed_file(name) for name in load_task_spec(key).files.values())


@functools.lru_cache(maxsize=None)
def committed_task(key: str) -> TaskData:
    return load_task(load_task_spec(key), Dna())


def rows(path: Path) -> list[dict[str, str]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as handle:
        return list(csv.DictReader(handle))


def test_every_dna_spec_is_checked_and_the_default_set_is_committed():
    assert set(task_names("dna")) == set(EXPECTED_SIZES)
    defaults = task_names("dna", default_only=True)
    assert defaults and all(is_committed(key) for key in defaults)
    for key in task_names("dna"):
        spec = load_task_spec(key)
        assert (spec.metric, spec.extra_metrics) == ("mcc", ["accuracy", "macro_f1"])
        assert spec.split.method == ("stratified" if key in STRATIFIED else "predefined")


@pytest.mark.parametrize("key", sorted(EXPECTED_SIZES))
def test_dna_task_loads_with_its_documented_sizes(key, monkeypatch):
    monkeypatch.delenv("POLYMASK_DATA_DIR", raising=False)
    data_dir = None
    if not is_committed(key):
        if not (SHARED_DATA / "dna").is_dir():
            pytest.skip(f"{key}: files not committed (large) and no shared data directory at {SHARED_DATA}")
        data_dir = SHARED_DATA
    spec = load_task_spec(key)
    task = committed_task(key) if data_dir is None else load_task(spec, Dna(), data_dir)
    assert (len(task.train), len(task.valid), len(task.test)) == EXPECTED_SIZES[key]
    assert not task.skipped
    classes = task.n_outputs if spec.kind == "multiclass" else 2
    for split in (task.train, task.valid, task.test):
        assert set(np.unique(split.labels)) == set(range(classes))  # every class in every split


@pytest.mark.parametrize("path", sorted(p.relative_to(COMMITTED) for p in COMMITTED.rglob("GUE/**/*.csv.gz")))
def test_committed_gue_files_are_the_shared_files_unchanged(path):
    shared = SHARED_DATA / "dna" / path
    if not shared.is_file():
        pytest.skip(f"no shared copy at {shared} to compare with")
    assert hashlib.sha256((COMMITTED / path).read_bytes()).digest() == hashlib.sha256(shared.read_bytes()).digest()


@pytest.mark.parametrize("key", STRATIFIED)
def test_stratified_splits_are_disjoint_fixed_and_keep_class_proportions(key):
    spec = load_task_spec(key)
    task = committed_task(key)
    parts = [task.train, task.valid, task.test]
    sequences = [{inputs[0] for inputs in part.inputs} for part in parts]
    assert [len(s) for s in sequences] == [len(part) for part in parts]  # no repeat within a split
    assert not (sequences[0] & sequences[1] or sequences[0] & sequences[2] or sequences[1] & sequences[2])
    totals = Counter(np.concatenate([part.labels[:, 0] for part in parts]))
    for part, fraction in zip(parts, spec.split.fractions):
        counts = Counter(part.labels[:, 0])
        assert all(abs(counts[label] - fraction * total) <= 1.5 for label, total in totals.items()), (counts, totals)
    again = load_task(spec, Dna())
    assert [p.inputs for p in (again.train, again.valid, again.test)] == [p.inputs for p in parts]


def test_splice_duplicates_and_the_conflicting_sequence_are_dropped_before_splitting():
    source = rows(committed_file("splice.csv"))
    labels_of: dict[str, set[str]] = {}
    for row in source:
        labels_of.setdefault(row["sequence"], set()).add(row["label"])
    conflicting = {sequence for sequence, labels in labels_of.items() if len(labels) > 1}
    assert len(source) == 3186 and len(labels_of) == 3001 and len(conflicting) == 1
    task = committed_task("dna/splice")
    kept = {inputs[0] for part in (task.train, task.valid, task.test) for inputs in part.inputs}
    assert task.duplicates_removed == 186 and kept == set(labels_of) - conflicting


def test_16s_keeps_the_phyla_with_100_sequences_or_more_and_merges_the_rest():
    spec = load_task_spec("dna/16s_phylum")
    phyla = Counter(row["phylum"] for row in rows(committed_file("16s_phylum.csv")))
    large = {name for name, count in phyla.items() if count >= 100}
    assert set(spec.label_values) == large | {spec.other_label}
    task = committed_task("dna/16s_phylum")
    labels = np.concatenate([part.labels[:, 0] for part in (task.train, task.valid, task.test)]).astype(int)
    counts = np.bincount(labels, minlength=len(spec.label_values))
    expected = [phyla[name] for name in spec.label_values[:-1]] + [sum(phyla.values()) - sum(phyla[n] for n in large)]
    assert counts.tolist() == expected and expected[-1] == 308


def test_train_cap_is_a_fixed_random_subset_per_seed():
    task = committed_task("dna/ecoli_promoters")
    first, again, other = (with_caps(task, seed, train=40) for seed in (0, 0, 1))
    assert len(first.train) == 40 and first.train.inputs == again.train.inputs != other.train.inputs
    assert set(first.train.inputs) <= set(task.train.inputs) and first.test.inputs == task.test.inputs
    assert with_caps(task, 0, train=100).train.inputs == task.train.inputs and with_caps(task, 0) is task
