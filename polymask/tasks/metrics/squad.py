"""SQuAD exact match and F1, scored as the official evaluation scripts (v1.1 and v2.0) score them.

Answers are normalised (lower case, punctuation removed, the articles a/an/the removed, white
space collapsed); a question scores the maximum over its gold answers. The v2.0 rules drop gold
answers that normalise to nothing, and a question without an answer has the single gold answer "",
so it scores 1 only for a prediction that normalises to nothing. The v1.1 rules keep every gold
answer as is, and F1 is 0 whenever no token is shared. Totals are percentages.

Predictions are (best non-empty answer, no-answer score) pairs: the no-answer score is the
null score minus the best span's score. The system answers "" when it is above 0; the ``best_*``
metrics instead pick the threshold that maximises the score on the evaluated questions themselves,
by the official script's best-threshold sweep (an oracle threshold, reported as such).
"""
from __future__ import annotations

import re
import string
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

Prediction = tuple[str, float]

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower case, drop punctuation, drop articles, collapse white space."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_score(gold: str, prediction: str) -> int:
    return int(normalize_answer(gold) == normalize_answer(prediction))


def f1_score(gold: str, prediction: str, version_2: bool = True) -> float:
    """Token-overlap F1 of the normalised answers; v2.0: 1 when both are empty, 0 when only one is."""
    gold_tokens, predicted_tokens = normalize_answer(gold).split(), normalize_answer(prediction).split()
    if version_2 and (not gold_tokens or not predicted_tokens):
        return float(gold_tokens == predicted_tokens)
    common = sum((Counter(gold_tokens) & Counter(predicted_tokens)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


@dataclass(frozen=True)
class Golds:
    """Gold answer texts per question (empty: no answer) and which script's rules score them."""

    answers: list[list[str]]
    version_2: bool

    def __len__(self) -> int:
        return len(self.answers)

    def scored(self, index: int) -> list[str]:
        """The answers question ``index`` is scored against (v2.0: without empty ones, else [""])."""
        answers = self.answers[index]
        if not self.version_2:
            return list(answers)
        return [answer for answer in answers if normalize_answer(answer)] or [""]


def answer_text(prediction: Prediction, threshold: float = 0.0) -> str:
    """The system's answer: "" when the no-answer score is above ``threshold``."""
    text, no_answer_score = prediction
    return "" if no_answer_score > threshold else text


def _raw(golds: Golds, texts: Sequence[str], metric: str) -> list[float]:
    """Per question: the best ``metric`` ("exact" or "f1") of its answer text over its gold answers."""
    def per_gold(gold: str, text: str) -> float:
        return exact_score(gold, text) if metric == "exact" else f1_score(gold, text, golds.version_2)

    return [max(per_gold(gold, text) for gold in golds.scored(i)) for i, text in enumerate(texts)]


def _total(golds: Golds, predictions: Sequence[Prediction], metric: str) -> float:
    return 100.0 * sum(_raw(golds, [answer_text(p) for p in predictions], metric)) / len(golds)


def exact_match(golds: Golds, predictions: Sequence[Prediction]) -> float:
    """Exact match in percent (no-answer threshold 0)."""
    return _total(golds, predictions, "exact")


def f1(golds: Golds, predictions: Sequence[Prediction]) -> float:
    """F1 in percent (no-answer threshold 0)."""
    return _total(golds, predictions, "f1")


def best_threshold(golds: Golds, predictions: Sequence[Prediction], metric: str) -> tuple[float, float]:
    """The official best-threshold sweep for ``metric``: start from "no answer" everywhere, then answer the
    questions in order of increasing no-answer score, keeping the best running total; returns
    (percent, threshold)."""
    scores = _raw(golds, [p[0] for p in predictions], metric)
    total = best = sum(1 for answers in golds.answers if not answers)
    threshold = 0.0
    for index in sorted(range(len(golds)), key=lambda i: predictions[i][1]):
        if golds.answers[index]:
            total += scores[index]
        elif predictions[index][0]:
            total -= 1
        if total > best:
            best, threshold = total, predictions[index][1]
    return 100.0 * best / len(golds), threshold


def best_exact_match(golds: Golds, predictions: Sequence[Prediction]) -> float:
    """Exact match in percent at the threshold that maximises it on these questions (an oracle)."""
    return best_threshold(golds, predictions, "exact")[0]


def best_f1(golds: Golds, predictions: Sequence[Prediction]) -> float:
    """F1 in percent at the threshold that maximises it on these questions (an oracle)."""
    return best_threshold(golds, predictions, "f1")[0]


def _among(golds: Golds, predictions: Sequence[Prediction], answerable: bool) -> float:
    """F1 in percent (threshold 0) over the answerable, or the unanswerable, questions only."""
    chosen = [i for i, answers in enumerate(golds.answers) if bool(answers) == answerable]
    if not chosen:
        return float("nan")
    subset = Golds([golds.answers[i] for i in chosen], golds.version_2)
    return _total(subset, [predictions[i] for i in chosen], "f1")


def has_answer_f1(golds: Golds, predictions: Sequence[Prediction]) -> float:
    """F1 in percent over the answerable questions (the official script's HasAns_f1)."""
    return _among(golds, predictions, True)


def no_answer_f1(golds: Golds, predictions: Sequence[Prediction]) -> float:
    """F1 in percent over the unanswerable questions, i.e. the share answered with "" (NoAns_f1)."""
    return _among(golds, predictions, False)
