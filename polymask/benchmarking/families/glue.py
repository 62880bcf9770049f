"""GLUE's reference rows: the training split's majority class (``constant.MEAN_ROW``), and TF-IDF n-grams + a
linear model.

The TF-IDF row is the classical text baseline: word 1-2-grams and character 2-5-grams (inside word
boundaries), sublinear term frequencies, n-grams of at least two training texts, all fitted on the training
split's texts. A sentence is its two TF-IDF vectors; a pair (a, b) is |a - b| and a * b (elementwise) of each
kind of vector, plus word and character cosine, word Jaccard overlap and length difference in words
(standardised on train). Logistic regression (classification) or ridge (regression) on top, its strength
chosen on the validation split's headline metric.
"""
from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from polymask.benchmarking.constant import MEAN_ROW
from polymask.benchmarking.systems import REFERENCES, Reference, one_label_of, reference_result
from polymask.errors import ConfigError
from polymask.tasks.data.loading import TaskData
from polymask.tasks.metrics.scoring import better, score

WORD_NGRAMS = (1, 2)
CHAR_NGRAMS = (2, 5)
C_GRID = (0.1, 0.3, 1.0, 3.0, 10.0)
ALPHA_GRID = (0.1, 1.0, 10.0, 100.0)
MAX_ITER = 1000
#: The task kinds the TF-IDF linear reference fits (``_model``, ``_predict``).
LINEAR_KINDS = ("binary", "multiclass", "regression")


def tfidf_vectorizers(texts: Sequence[str]) -> tuple[TfidfVectorizer, TfidfVectorizer]:
    """Word and character (inside word boundaries) n-gram TF-IDF, fitted on ``texts``."""
    options: dict[str, Any] = {"sublinear_tf": True, "min_df": 2}
    return (TfidfVectorizer(ngram_range=WORD_NGRAMS, **options).fit(texts),
            TfidfVectorizer(analyzer="char_wb", ngram_range=CHAR_NGRAMS, **options).fit(texts))


def pair_features(vectorizers: Sequence[TfidfVectorizer],
                  pairs: Sequence[tuple[str, ...]]) -> tuple[sparse.csr_matrix, np.ndarray]:
    """Sparse [|a - b|, a * b] per vectorizer; dense (word cosine, char cosine, word Jaccard, |length difference|)."""
    firsts, seconds = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
    blocks, cosines = [], []
    for vectorizer in vectorizers:
        a, b = vectorizer.transform(firsts), vectorizer.transform(seconds)
        product = a.multiply(b).tocsr()
        blocks += [abs(a - b), product]
        cosines.append(np.asarray(product.sum(axis=1)).ravel())  # TF-IDF rows have unit L2 norm (or none)
    words = vectorizers[0].build_tokenizer()
    tokens = [(words(first.lower()), words(second.lower())) for first, second in zip(firsts, seconds)]
    jaccard = [len(set(a) & set(b)) / max(len(set(a) | set(b)), 1) for a, b in tokens]
    lengths = [abs(len(a) - len(b)) for a, b in tokens]
    return sparse.hstack(blocks, format="csr"), np.column_stack([*cosines, jaccard, lengths])


def tfidf_features(task: TaskData) -> dict[str, sparse.csr_matrix]:
    """Features of train, valid, test and any extra test set; vectorizers (and scaler) fitted on train only."""
    splits = {"train": task.train, "valid": task.valid, "test": task.test, **task.extra_tests}
    vectorizers = tfidf_vectorizers([text for inputs in task.train.inputs for text in inputs])
    if len(task.spec.input_columns) == 1:
        return {name: sparse.hstack([v.transform([inputs[0] for inputs in split.inputs]) for v in vectorizers],
                                    format="csr") for name, split in splits.items()}
    pairs = {name: pair_features(vectorizers, split.inputs) for name, split in splits.items()}
    scaler = StandardScaler().fit(pairs["train"][1])
    return {name: sparse.hstack([tfidf, scaler.transform(dense)], format="csr")
            for name, (tfidf, dense) in pairs.items()}


def _model(kind: str, strength: float, seed: int) -> LogisticRegression | Ridge:
    """Ridge of penalty ``strength`` for regression, else logistic regression of inverse penalty ``strength``."""
    if kind == "regression":
        return Ridge(alpha=strength, random_state=seed)
    return LogisticRegression(C=strength, solver="liblinear" if kind == "binary" else "saga", max_iter=MAX_ITER,
                              random_state=seed)


def _predict(model: LogisticRegression | Ridge, features: sparse.csr_matrix, task: TaskData) -> np.ndarray:
    """Predictions in the metrics' convention: values or P(class 1) as (N, 1), class probabilities as (N, C)."""
    if task.spec.kind == "regression":
        return model.predict(features)[:, None]
    probabilities = np.zeros((features.shape[0], max(task.n_outputs, 2)))
    probabilities[:, model.classes_] = model.predict_proba(features)
    return probabilities[:, [1]] if task.spec.kind == "binary" else probabilities


def tuned(task: TaskData, seed: int, features: dict[str, sparse.csr_matrix]) -> tuple[float, dict[str, np.ndarray]]:
    """The grid's strength (C or alpha) best on validation, and its model's predictions on every split but train."""
    regression = task.spec.kind == "regression"
    labels = task.train.labels[:, 0] if regression else task.train.labels[:, 0].astype(int)
    metric = task.spec.metric
    best: tuple[float, float, LogisticRegression | Ridge] | None = None
    with threadpool_limits(1):  # sparse linear fits: extra threads only add waiting on a busy machine
        for strength in ALPHA_GRID if regression else C_GRID:
            model = _model(task.spec.kind, strength, seed).fit(features["train"], labels)
            value = score([metric], task.valid.labels, _predict(model, features["valid"], task))[metric]
            if best is None or better(metric, value, best[0]):
                best = (value, strength, model)
    _, strength, model = best
    return strength, {name: _predict(model, matrix, task) for name, matrix in features.items() if name != "train"}


def tfidf_linear(task: TaskData, seed: int) -> dict[str, Any]:
    """Fit one model per strength of the grid on TF-IDF features; keep the best on validation; score it on test."""
    if task.spec.kind not in LINEAR_KINDS or task.train.labels.shape[1] != 1:
        raise ConfigError(f"{task.spec.key}: the TF-IDF reference handles single-label classification and "
                          f"regression only")
    started = time.perf_counter()
    _, predictions = tuned(task, seed, tfidf_features(task))
    return reference_result(task, seed, predictions, started)


REFERENCES.register("glue")([
    MEAN_ROW,
    Reference(f"TF-IDF word {WORD_NGRAMS[0]}-{WORD_NGRAMS[1]}-grams + char {CHAR_NGRAMS[0]}-{CHAR_NGRAMS[1]}-grams "
              f"+ linear model", tfidf_linear, one_label_of(LINEAR_KINDS)),
])
