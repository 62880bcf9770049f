"""MoleculeNet's reference baseline: ECFP4 fingerprints (Morgan radius 2, 2048 bits) + random forest."""
from __future__ import annotations

import time
from typing import Any

import numpy as np
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from polymask.benchmarking.systems import REFERENCES, Reference, reference_result
from polymask.tasks.data.loading import TaskData, TaskSplit
from polymask.tasks.finetune.features import morgan_bits

N_TREES = 500


def ecfp(split: TaskSplit) -> np.ndarray:
    """ECFP4 bit fingerprints of the split's molecules (the ``morgan`` extra-feature set)."""
    return morgan_bits([inputs[0] for inputs in split.inputs])


def _fit_predict(task: TaskData, seed: int, features: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One forest per task column (rows with a missing label left out); predictions per split."""
    outputs = {name: np.zeros((len(x), task.train.labels.shape[1])) for name, x in features.items()}
    for column in range(task.train.labels.shape[1]):
        labels = task.train.labels[:, column]
        present = ~np.isnan(labels)
        if task.spec.kind == "regression":
            model = RandomForestRegressor(N_TREES, n_jobs=-1, random_state=seed)
            model.fit(features["train"][present], labels[present])
            for name, x in features.items():
                outputs[name][:, column] = model.predict(x)
            continue
        classes = np.unique(labels[present])
        if len(classes) < 2:  # a task with one class in training: predict that class
            for name in features:
                outputs[name][:, column] = classes[0] if len(classes) else 0.5
            continue
        model = RandomForestClassifier(N_TREES, n_jobs=-1, random_state=seed, class_weight="balanced")
        model.fit(features["train"][present], labels[present].astype(int))
        for name, x in features.items():
            outputs[name][:, column] = model.predict_proba(x)[:, 1]
    return outputs


def ecfp_random_forest(task: TaskData, seed: int) -> dict[str, Any]:
    started = time.perf_counter()
    features = {"train": ecfp(task.train), "valid": ecfp(task.valid), "test": ecfp(task.test)}
    return reference_result(task, seed, _fit_predict(task, seed, features), started)


REFERENCES.register("moleculenet")([Reference(f"ECFP4 + random forest ({N_TREES} trees)", ecfp_random_forest,
                                               lambda spec: spec.kind in ("binary", "regression"))])
