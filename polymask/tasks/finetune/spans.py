"""Fine-tuning a pretrained encoder for extractive question answering (SQuAD), with early stopping.

Training and early stopping are those of every task (``loop.fit``); what differs is the span
head over context windows, and that predictions are whole answers scored by the SQuAD metrics.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np
import torch
from tokenizers import Tokenizer
from torch import Tensor

from polymask.checkpoints.finetuned import SaveTarget, save_finetuned
from polymask.checkpoints.finetuned_meta import SavedSpan
from polymask.data.batching import BatchSampler, collate
from polymask.finetune_config import FinetuneConfig
from polymask.modalities.base import Modality
from polymask.model.encoder import Encoder
from polymask.model.heads import SpanPredictor
from polymask.runtime import autocast, precision_used, resolve_device, where_run
from polymask.tasks.data.loading import cap_indices
from polymask.tasks.data.squad import QAExample, SquadTask
from polymask.tasks.finetune.loop import fit
from polymask.tasks.finetune.span_features import (
    SpanFeatures,
    allowed_positions,
    answer_predictions,
    best_spans,
    build_features,
    span_loss,
)
from polymask.tasks.finetune.saved_meta import finetuned_meta
from polymask.tasks.metrics.scoring import score
from polymask.tasks.metrics.squad import best_threshold
from polymask.tokenization import SpecialIds
from polymask.tracking import Reporter

Forward = Callable[[SpanFeatures, np.ndarray], tuple[Tensor, Tensor]]


def _capped(examples: list[QAExample], limit: int | None, seed: int) -> list[QAExample]:
    return [examples[i] for i in cap_indices(len(examples), limit, seed)]


def span_forward(model: SpanPredictor, pad: int, device: torch.device, precision: str) -> Forward:
    """Start and end scores of some windows (rows) of ``features``, with [CLS] and context positions allowed."""
    def forward(features: SpanFeatures, rows: np.ndarray) -> tuple[Tensor, Tensor]:
        batch = collate([features.ids[i] for i in rows], pad).to(device)
        allowed = allowed_positions(features, rows, batch.input_ids.shape[1]).to(device)
        with autocast(device, precision):
            return model(batch.input_ids, batch.attention_mask, allowed)

    return forward


def predict_answers(model: torch.nn.Module, forward: Forward, features: SpanFeatures, examples: list[QAExample],
                    config: FinetuneConfig, allow_null: bool) -> list[tuple[str, float]]:
    """(best answer text, no-answer score) per example, from the best span of each of its windows."""
    training = model.training
    model.eval()
    count = len(features)
    scores, starts, ends, nulls = np.zeros(count), np.zeros(count, int), np.zeros(count, int), np.zeros(count)
    lengths = np.array([len(ids) for ids in features.ids])
    with torch.no_grad():
        for rows in BatchSampler(lengths, config.batch_size, 0, shuffle=False).epoch(0):
            best = best_spans(*forward(features, rows), config.span.max_answer_len)
            scores[rows], starts[rows], ends[rows], nulls[rows] = (value.cpu().numpy() for value in best)
    model.train(training)
    return answer_predictions(features, examples, scores, starts, ends, nulls, allow_null)


def finetune_span(task: SquadTask, encoder: Encoder, tokenizer: Tokenizer, modality: Modality,
                  config: FinetuneConfig, seed: int, save_to: SaveTarget | None = None,
                  reporter: Reporter | None = None) -> dict[str, Any]:
    """Fine-tune ``encoder`` with a span head on ``task``; SQuAD metrics of the best validation epoch (and,
    with ``save_to``, the model of that epoch saved there); ``reporter`` gets each epoch's loss and metrics."""
    task.spec.task_kind.refuse_settings(config, task.spec.key)
    started = time.perf_counter()
    torch.manual_seed(seed)
    device = resolve_device(config.device)
    spec = task.spec
    metric_names = [spec.metric, *spec.extra_metrics]
    fixed = spec.split.seed  # capped validation and test questions are the same for every system and seed
    train = _capped(task.train, config.max_train_examples, seed)
    valid = _capped(task.valid, config.max_valid_examples, fixed)
    test = _capped(task.test, config.max_test_examples, fixed)
    train_f = build_features(train, tokenizer, config.max_len, config.span)
    valid_f, test_f = (build_features(part, tokenizer, config.max_len, config.span, targets=False)
                       for part in (valid, test))
    model = SpanPredictor(encoder).to(device)
    if config.freeze_encoder:
        model.encoder.requires_grad_(False)
    pad = SpecialIds.of(tokenizer).pad
    sampler = BatchSampler(np.array([len(ids) for ids in train_f.ids]), config.batch_size, seed)
    starts, ends = torch.tensor(train_f.starts), torch.tensor(train_f.ends)
    forward = span_forward(model, pad, device, config.precision)

    def loss_of(rows: np.ndarray) -> Tensor:
        return span_loss(*forward(train_f, rows), starts[rows].to(device), ends[rows].to(device))

    def evaluate(examples: list[QAExample], features: SpanFeatures) -> tuple[dict[str, float], list]:
        predictions = predict_answers(model, forward, features, examples, config, task.version_2)
        return score(metric_names, task.golds(examples), predictions), predictions

    fitted = fit(model, config, sampler.epoch, loss_of, lambda: evaluate(valid, valid_f)[0], spec.metric, reporter)
    test_metrics, predictions = evaluate(test, test_f)
    if save_to is not None:
        save_finetuned(save_to.folder, model, tokenizer, finetuned_meta(
            spec, task.label_names, 2, modality, encoder, config, seed, fitted.valid, fitted.best_epoch, save_to,
            span=SavedSpan(**config.span.model_dump(), allow_no_answer=task.version_2)))
    result = {
        "task": spec.key, "seed": seed, "metric": spec.metric, "best_epoch": fitted.best_epoch,
        "epochs_run": fitted.epochs_run, "valid": fitted.valid, "test": test_metrics,
        "n_train": len(train), "n_valid": len(valid), "n_test": len(test),
        "windows": {"train": len(train_f), "valid": len(valid_f), "test": len(test_f)},
        "truncated": train_f.questions_cut + valid_f.questions_cut + test_f.questions_cut,
        "skipped": len(task.skipped), "duplicates_removed": 0,
        "split": "standard" if task.standard else "dev split (not standard)",
        "precision": precision_used(device, config.precision), **where_run(device),
        "time_s": round(time.perf_counter() - started, 2),
    }
    if task.version_2:
        golds = task.golds(test)
        result["oracle_no_answer_threshold"] = {name: best_threshold(golds, predictions, name)[1]
                                                for name in ("exact", "f1")}
    return result
