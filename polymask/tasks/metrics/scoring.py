"""Metrics as each field reports them.

Every metric takes ``labels`` (N, T) with NaN for missing entries and ``predictions``: class-1
probabilities (N, T) for binary tasks, class probabilities (N, C) for multiclass, values (N, T) in
original units for regression. Multi-task binary metrics average over the tasks that have both
classes present in the split (MoleculeNet's convention). The SQuAD metrics take the gold answers
(``squad.Golds``) and (answer, no-answer score) pairs, and give percentages.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from scipy import stats
from sklearn import metrics as skm

from polymask.tasks.metrics import squad


@dataclass(frozen=True)
class Metric:
    function: Callable[[Any, Any], float]
    higher_is_better: bool
    #: Undefined unless some label column holds both classes (a ranking of positives against negatives).
    needs_both_classes: bool = False


def _per_binary_task(score: Callable[[np.ndarray, np.ndarray], float]) -> Callable[[np.ndarray, np.ndarray], float]:
    def mean_over_tasks(labels: np.ndarray, predictions: np.ndarray) -> float:
        values = []
        for task in range(labels.shape[1]):
            present = ~np.isnan(labels[:, task])
            truth = labels[present, task]
            if len(np.unique(truth)) == 2:
                values.append(score(truth, predictions[present, task]))
        return float(np.mean(values)) if values else float("nan")

    return mean_over_tasks


def _regression(score: Callable[[np.ndarray, np.ndarray], float]) -> Callable[[np.ndarray, np.ndarray], float]:
    def mean_over_targets(labels: np.ndarray, predictions: np.ndarray) -> float:
        values = [score(labels[~np.isnan(labels[:, t]), t], predictions[~np.isnan(labels[:, t]), t])
                  for t in range(labels.shape[1])]
        return float(np.mean(values))

    return mean_over_targets


def _classes(labels: np.ndarray, predictions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(true class, predicted class) for single-label tasks (binary: threshold 0.5)."""
    truth = labels[:, 0].astype(int)
    if predictions.shape[1] == 1:
        return truth, (predictions[:, 0] >= 0.5).astype(int)
    return truth, predictions.argmax(axis=1)


def _single_label(score: Callable[[np.ndarray, np.ndarray], float]) -> Callable[[np.ndarray, np.ndarray], float]:
    return lambda labels, predictions: float(score(*_classes(labels, predictions)))


def _mcc(truth: np.ndarray, predicted: np.ndarray) -> float:
    """Matthews correlation; 0 when truth and predictions hold one class between them (sklearn's value
    there, without its warning in the middle of a benchmark's progress bar)."""
    return 0.0 if len(np.union1d(truth, predicted)) < 2 else float(skm.matthews_corrcoef(truth, predicted))


METRICS: dict[str, Metric] = {
    "roc_auc": Metric(_per_binary_task(skm.roc_auc_score), True, needs_both_classes=True),
    "prc_auc": Metric(_per_binary_task(skm.average_precision_score), True, needs_both_classes=True),
    "rmse": Metric(_regression(lambda y, p: np.sqrt(np.mean((y - p) ** 2))), False),
    "mae": Metric(_regression(lambda y, p: np.mean(np.abs(y - p))), False),
    "pearson": Metric(_regression(lambda y, p: stats.pearsonr(y, p)[0]), True),
    "spearman": Metric(_regression(lambda y, p: stats.spearmanr(y, p)[0]), True),
    "accuracy": Metric(_single_label(skm.accuracy_score), True),
    "mcc": Metric(_single_label(_mcc), True),
    "f1": Metric(_single_label(skm.f1_score), True),
    "macro_f1": Metric(_single_label(lambda y, p: skm.f1_score(y, p, average="macro")), True),
    "exact_match": Metric(squad.exact_match, True),
    "squad_f1": Metric(squad.f1, True),
    "best_exact_match": Metric(squad.best_exact_match, True),
    "best_squad_f1": Metric(squad.best_f1, True),
    "has_answer_f1": Metric(squad.has_answer_f1, True),
    "no_answer_f1": Metric(squad.no_answer_f1, True),
}


def score(names: list[str], labels: Any, predictions: Any) -> dict[str, float]:
    """Compute the named metrics."""
    return {name: METRICS[name].function(labels, predictions) for name in names}


def better(metric: str, candidate: float, incumbent: float | None) -> bool:
    """Whether ``candidate`` beats ``incumbent`` under ``metric`` (NaN never does)."""
    if np.isnan(candidate):
        return False
    if incumbent is None or np.isnan(incumbent):
        return True
    return candidate > incumbent if METRICS[metric].higher_is_better else candidate < incumbent
