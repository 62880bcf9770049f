"""DNA's reference baseline: k-mer frequency profiles (k = 1..6) + logistic regression.

Each sequence becomes, for every k, the frequencies of its overlapping k-mers of A/C/G/T (k-mers
that contain an N are skipped). The features are scaled on the training split and the L2 strength
is chosen on the validation split's headline metric. The fit is deterministic: seeds differ only
through the training subset that a cap on training examples draws.
"""
from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np
from scipy import sparse
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from polymask.benchmarking.systems import REFERENCES, Reference, one_label_of, reference_result
from polymask.errors import ConfigError
from polymask.tasks.data.loading import TaskData
from polymask.tasks.metrics.scoring import better, score

K_VALUES = (1, 2, 3, 4, 5, 6)
C_GRID = (0.01, 0.1, 1.0)
MAX_ITER = 2000
#: Byte -> 0..3 for A/C/G/T, 4 for anything else (N).
BASE_CODES = np.full(256, 4, dtype=np.int64)
BASE_CODES[[ord(base) for base in "ACGT"]] = np.arange(4)


def kmer_codes(sequence: str, k: int) -> np.ndarray:
    """The index (a base-4 number, A=0 ... T=3) of every overlapping k-mer without N, in order."""
    codes = BASE_CODES[np.frombuffer(sequence.encode("ascii"), dtype=np.uint8)]
    if len(codes) < k:
        return np.empty(0, dtype=np.int64)
    windows = np.lib.stride_tricks.sliding_window_view(codes, k)
    return windows[(windows < 4).all(axis=1)] @ (4 ** np.arange(k - 1, -1, -1))


def kmer_profiles(sequences: Sequence[str], k_values: Sequence[int] = K_VALUES) -> sparse.csr_matrix:
    """(N, sum of 4^k) sparse matrix: per sequence and k, the frequency of each k-mer."""
    blocks = []
    for k in k_values:
        per_sequence = [kmer_codes(sequence, k) for sequence in sequences]
        counts = np.array([len(codes) for codes in per_sequence])
        rows = np.repeat(np.arange(len(sequences)), counts)
        weights = np.repeat(1.0 / np.maximum(counts, 1), counts)
        columns = np.concatenate(per_sequence) if per_sequence else np.empty(0, dtype=np.int64)
        blocks.append(sparse.csr_matrix((weights, (rows, columns)), shape=(len(sequences), 4 ** k)))
    return sparse.hstack(blocks, format="csr")


def _probabilities(model: LogisticRegression, features: sparse.csr_matrix, n_outputs: int) -> np.ndarray:
    """Predictions in the metrics' convention: P(class 1) as (N, 1) for binary, (N, C) for multiclass."""
    probabilities = np.zeros((features.shape[0], max(n_outputs, 2)))
    probabilities[:, model.classes_] = model.predict_proba(features)
    return probabilities[:, [1]] if n_outputs == 1 else probabilities


def kmer_logistic_regression(task: TaskData, seed: int) -> dict[str, Any]:
    """Fit one model per C in ``C_GRID``; keep the best on validation; score it on test."""
    if task.spec.kind == "regression" or task.train.labels.shape[1] != 1:
        raise ConfigError(f"{task.spec.key}: the k-mer reference handles single-label classification only")
    started = time.perf_counter()
    profiles = {name: kmer_profiles([inputs[0] for inputs in getattr(task, name).inputs])
                for name in ("train", "valid", "test")}
    scaler = StandardScaler(with_mean=False).fit(profiles["train"])
    features = {name: scaler.transform(matrix) for name, matrix in profiles.items()}
    labels = task.train.labels[:, 0].astype(int)
    metric = task.spec.metric
    best: tuple[float, LogisticRegression, np.ndarray] | None = None
    for c in C_GRID:
        with threadpool_limits(1):  # small fits: extra threads only add waiting on a busy machine
            model = LogisticRegression(C=c, max_iter=MAX_ITER).fit(features["train"], labels)
        valid = _probabilities(model, features["valid"], task.n_outputs)
        value = score([metric], task.valid.labels, valid)[metric]
        if best is None or better(metric, value, best[0]):
            best = (value, model, valid)
    _, model, valid = best
    predictions = {"valid": valid, **{name: _probabilities(model, scaler.transform(kmer_profiles(
        [inputs[0] for inputs in split.inputs])), task.n_outputs) for name, split in task.extra_tests.items()},
        "test": _probabilities(model, features["test"], task.n_outputs)}
    return reference_result(task, seed, predictions, started)


REFERENCES.register("dna")([Reference(f"k-mer profiles (k={K_VALUES[0]}-{K_VALUES[-1]}) + logistic regression",
                                      kmer_logistic_regression, one_label_of(("binary", "multiclass")))])
