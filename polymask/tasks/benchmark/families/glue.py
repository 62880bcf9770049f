"""GLUE's reference row: always predict the training split's majority class (its mean for regression).

It shows what a model that learnt nothing from the inputs scores on each dev set: accuracy is the
majority share, Matthews correlation 0, F1 that of labelling everything with the majority class,
and correlations are undefined (n/a) for a constant.
"""
from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np
from scipy import stats

from polymask.tasks.benchmark.systems import REFERENCES, Reference, reference_result
from polymask.tasks.data.loading import TaskData


def constant_prediction(task: TaskData, count: int) -> np.ndarray:
    """``count`` rows of the majority class (probabilities / one-hot) or of the train mean (regression)."""
    labels = task.train.labels[:, 0]
    if task.spec.kind == "regression":
        return np.full((count, 1), labels.mean())
    if task.spec.kind == "binary":
        return np.full((count, 1), float(labels.mean() >= 0.5))
    one_hot = np.zeros((count, task.n_outputs))
    one_hot[:, np.bincount(labels.astype(int)).argmax()] = 1.0
    return one_hot


def majority_class(task: TaskData, seed: int) -> dict[str, Any]:
    started = time.perf_counter()
    splits = {"valid": task.valid, "test": task.test, **task.extra_tests}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        return reference_result(task, seed, {name: constant_prediction(task, len(split)) for name, split in splits.items()},
                                started)


REFERENCES.register("glue")([Reference("majority class of train (mean for regression)", majority_class)])
