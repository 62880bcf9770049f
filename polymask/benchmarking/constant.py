"""The constant reference row: the training split's majority class (its mean for regression), predicted for every
example. It shows what a model that learnt nothing from the inputs scores: accuracy is the majority share, Matthews
correlation 0, ROC-AUC 0.5, and correlations are undefined (n/a) for a constant. GLUE's tables have it, and every
table of tasks that are not a built-in benchmark's (a user's own table, task YAML files)."""
from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np
from scipy import stats

from polymask.benchmarking.systems import Reference, reference_result
from polymask.tasks.data.loading import TaskData
from polymask.tasks.data.spec import TABLE_KINDS


def constant_prediction(task: TaskData, count: int) -> np.ndarray:
    """``count`` rows of each label column's majority class (binary: 0/1; multiclass: one-hot) or training mean
    (regression)."""
    labels = task.train.labels
    if task.spec.kind == "regression":
        return np.tile(np.nanmean(labels, axis=0), (count, 1))
    if task.spec.kind == "binary":
        return np.tile((np.nanmean(labels, axis=0) >= 0.5).astype(float), (count, 1))
    one_hot = np.zeros((count, task.n_outputs))
    one_hot[:, np.bincount(labels[:, 0].astype(int)).argmax()] = 1.0
    return one_hot


def majority_class(task: TaskData, seed: int) -> dict[str, Any]:
    started = time.perf_counter()
    splits = {"valid": task.valid, "test": task.test, **task.extra_tests}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        return reference_result(task, seed, {name: constant_prediction(task, len(split)) for name, split in splits.items()},
                                started)


MEAN_ROW = Reference("majority class of train (mean for regression)", majority_class,
                     lambda spec: spec.kind in TABLE_KINDS)
