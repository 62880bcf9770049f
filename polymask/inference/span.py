"""Predicting with a span (extractive question answering) model: a question and a context in, the answer
text out, read from the context by the best span over its windows, as at fine-tuning."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from polymask.data.model_inputs import Inputs
from polymask.data.records import normalize_record
from polymask.errors import InvalidRecord
from polymask.finetune_config import FinetuneConfig
from polymask.inference.columns import REASON, Applied
from polymask.tasks.data.squad import QAExample
from polymask.tasks.finetune.span_features import build_features
from polymask.tasks.finetune.spans import predict_answers, span_forward
from polymask.tasks.metrics.squad import answer_text

if TYPE_CHECKING:
    from polymask.inference.model import FinetunedModel

ANSWER = "predicted_answer"
NO_ANSWER_SCORE = "no_answer_score"


def predict_answers_of(model: "FinetunedModel", inputs: Sequence[Inputs], reasons: Sequence[str | None],
                       batch_size: int) -> Applied:
    """``predicted_answer`` per (question, context) record: a span of the context; for a model trained with
    unanswerable questions (SQuAD v2.0) empty when ``no_answer_score`` > 0. Long contexts are read in windows."""
    import pandas as pd

    reasons = list(reasons)
    examples, rows = [], []
    for row, parts in enumerate(inputs):
        try:
            if parts is None:
                raise InvalidRecord(reasons[row] or "no value")
            for part in parts:
                normalize_record(model.modality, part)
        except InvalidRecord as exc:
            reasons[row] = exc.reason
            continue
        examples.append(QAExample(str(row), parts[0].strip(), parts[1], (), -1, ""))  # as read, as at fine-tuning
        rows.append(row)
    span = model.meta.span
    allow_null = span.allow_no_answer
    config = FinetuneConfig.model_validate({**model.meta.finetune.model_dump(), "batch_size": batch_size,
                                            "span": span.model_dump(exclude={"allow_no_answer"})})
    features = build_features(examples, model.tokenizer, model.max_len, config.span, targets=False)
    forward = span_forward(model.network, model.pad, model.device, "fp32")
    predictions = predict_answers(model.network, forward, features, examples, config, allow_null) if examples else []
    answers: list[str | None] = [None] * len(inputs)
    scores = np.full(len(inputs), np.nan)
    for row, prediction in zip(rows, predictions):
        answers[row], scores[row] = answer_text(prediction), prediction[1]
    frame = pd.DataFrame({ANSWER: answers, **({NO_ANSWER_SCORE: scores} if allow_null else {}), REASON: reasons})
    return Applied(frame, len(rows), len(inputs) - len(rows), features.questions_cut, 0, cut="questions cut")
