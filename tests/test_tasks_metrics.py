"""Metrics against scikit-learn/scipy on fixed predictions; heads mask missing labels; report task averages."""
import numpy as np
import torch
from scipy import stats
from sklearn import metrics as skm

from polymask.benchmarking.report import _task_average
from polymask.tasks.finetune.kinds.binary import Binary
from polymask.tasks.finetune.kinds.regression import Regression
from polymask.tasks.metrics.scoring import METRICS, better, score

RNG = np.random.default_rng(0)


def test_multitask_roc_auc_skips_missing_labels_and_single_class_tasks():
    labels = np.array([[1, 0, 1], [0, np.nan, 1], [1, 1, 1], [0, 0, np.nan], [1, np.nan, 1]], dtype=float)
    predictions = RNG.random(labels.shape)
    expected = np.mean([skm.roc_auc_score(labels[:, 0], predictions[:, 0]),
                        skm.roc_auc_score(labels[[0, 2, 3], 1], predictions[[0, 2, 3], 1])])  # task 3: one class
    assert np.isclose(METRICS["roc_auc"].function(labels, predictions), expected)


def test_regression_metrics():
    labels = RNG.normal(size=(50, 1))
    predictions = labels + RNG.normal(scale=0.3, size=(50, 1))
    values = score(["rmse", "mae", "pearson", "spearman"], labels, predictions)
    assert np.isclose(values["rmse"], np.sqrt(skm.mean_squared_error(labels, predictions)))
    assert np.isclose(values["mae"], skm.mean_absolute_error(labels, predictions))
    assert np.isclose(values["pearson"], stats.pearsonr(labels[:, 0], predictions[:, 0])[0])
    assert np.isclose(values["spearman"], stats.spearmanr(labels[:, 0], predictions[:, 0])[0])


def test_single_label_classification_metrics():
    truth = RNG.integers(0, 3, size=60)
    probabilities = RNG.random((60, 3))
    predicted = probabilities.argmax(1)
    labels = truth[:, None].astype(float)
    values = score(["accuracy", "mcc", "macro_f1"], labels, probabilities)
    assert np.isclose(values["accuracy"], skm.accuracy_score(truth, predicted))
    assert np.isclose(values["mcc"], skm.matthews_corrcoef(truth, predicted))
    assert np.isclose(values["macro_f1"], skm.f1_score(truth, predicted, average="macro"))
    binary = RNG.integers(0, 2, size=40)
    p = RNG.random((40, 1))
    assert np.isclose(score(["f1"], binary[:, None].astype(float), p)["f1"], skm.f1_score(binary, p[:, 0] >= 0.5))


def test_mcc_of_one_class_everywhere_is_zero_without_a_warning(recwarn):
    labels = np.ones((8, 1))
    assert score(["mcc"], labels, np.full((8, 1), 0.9))["mcc"] == 0.0  # every prediction the one true class
    assert not recwarn.list


def test_better_respects_direction_and_nan():
    assert better("roc_auc", 0.8, 0.7) and not better("roc_auc", 0.6, 0.7)
    assert better("rmse", 0.5, 0.7) and not better("rmse", float("nan"), None)


def test_binary_head_masks_missing_labels_out_of_loss_and_gradient():
    logits = torch.randn(4, 3, requires_grad=True)
    labels = torch.tensor([[1.0, float("nan"), 0.0], [0.0, 1.0, float("nan")], [1.0, 1.0, 1.0], [0.0, float("nan"), 0.0]])
    loss = Binary(labels.numpy()).loss(logits, labels)
    present = ~torch.isnan(labels)
    expected = torch.nn.functional.binary_cross_entropy_with_logits(logits[present], labels[present])
    assert torch.isclose(loss, expected)
    loss.backward()
    assert (logits.grad[~present] == 0).all()


def test_regression_head_standardises_and_reports_original_units():
    train = np.array([[10.0], [20.0], [30.0]])
    head = Regression(train)
    assert np.allclose(head.predict(torch.zeros(2, 1)), 20.0)
    zero_loss = head.loss(torch.tensor([[-1.2247449], [0.0], [1.2247449]]), torch.tensor(train, dtype=torch.float32))
    assert zero_loss < 1e-6


def test_task_average_carries_the_seed_spread_of_per_seed_averages():
    rows = [{"metric": "rmse", "rmse_mean": 1.5, "rmse_values": [1.0, 2.0]},
            {"metric": "rmse", "rmse_mean": 3.5, "rmse_values": [3.0, 4.0]}]
    assert _task_average(rows) == "2.500 ± 0.500"  # per-seed averages 2.0 and 3.0
    single = [{"metric": "rmse", "rmse_mean": 1.0, "rmse_values": [1.0]},
              {"metric": "rmse", "rmse_mean": 3.0, "rmse_values": [3.0]}]
    assert _task_average(single) == "2.000"
    unfinished = [rows[0], {"metric": "rmse", "rmse_mean": 3.0, "rmse_values": [3.0]}]  # a seed still running
    assert _task_average(unfinished) == "2.250 (tasks with other seed counts)"
