"""Extractive question answering: context windows with character offsets, the span loss, best-span decoding.

A context longer than the model is cut into overlapping windows of tokens; every window is encoded
as ``[CLS] question [SEP] context window [SEP]``. The tokenizer's character offsets map the gold
answer to token positions (``[CLS]`` when the answer is not inside the window, or there is none)
and map a predicted span back to the context's characters.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field

import numpy as np
import torch
from tokenizers import Tokenizer
from torch import Tensor, nn

from polymask.errors import ConfigError
from polymask.finetune_config import SpanOptions
from polymask.tasks.data.squad import QAExample
from polymask.tokenization import SpecialIds

MIN_CONTEXT_TOKENS = 32


@dataclass
class SpanFeatures:
    """One row per window: token ids, the example it belongs to, where its context tokens start in the
    row, their character offsets in the context, and the target span (0, 0 = [CLS])."""

    ids: list[list[int]] = field(default_factory=list)
    example: list[int] = field(default_factory=list)
    context_from: list[int] = field(default_factory=list)
    offsets: list[list[tuple[int, int]]] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    questions_cut: int = 0

    def __len__(self) -> int:
        return len(self.ids)


def windows(length: int, size: int, stride: int) -> list[tuple[int, int]]:
    """[begin, end) token ranges of width ``size`` every ``stride`` tokens, together covering ``length``."""
    begins = [0]
    while begins[-1] + size < length:
        begins.append(begins[-1] + min(stride, size))
    return [(begin, min(begin + size, length)) for begin in begins]


def answer_tokens(offsets: list[tuple[int, int]], start: int, end: int) -> tuple[int, int]:
    """First and last token overlapping the characters [start, end)."""
    first = next(i for i, (_, token_end) in enumerate(offsets) if token_end > start)
    last = max(i for i, (token_start, _) in enumerate(offsets) if token_start < end)
    return first, last


def build_features(examples: list[QAExample], tokenizer: Tokenizer, max_len: int, options: SpanOptions,
                   targets: bool = True) -> SpanFeatures:
    """Windows of every example, with target spans from the first gold answer (all [CLS] without ``targets``)."""
    room = max_len - options.max_query_len - 3
    if room < MIN_CONTEXT_TOKENS:
        raise ConfigError(f"max_len {max_len} leaves {room} context tokens next to a {options.max_query_len}-token "
                          f"question; at least {MIN_CONTEXT_TOKENS} are needed")
    special = SpecialIds.of(tokenizer)
    contexts = sorted({example.context for example in examples})
    encoded = dict(zip(contexts, tokenizer.encode_batch(contexts, add_special_tokens=False)))
    questions = tokenizer.encode_batch([example.question for example in examples], add_special_tokens=False)
    features = SpanFeatures()
    for index, (example, question) in enumerate(zip(examples, questions)):
        query = question.ids[:options.max_query_len]
        features.questions_cut += len(question.ids) > options.max_query_len
        context = encoded[example.context]
        target = None
        if targets and example.answers:
            target = answer_tokens(context.offsets, example.answer_start,
                                   example.answer_start + len(example.answers[0]))
        context_from = len(query) + 2
        for begin, end in windows(len(context.ids), max_len - len(query) - 3, options.doc_stride):
            features.ids.append([special.cls, *query, special.sep, *context.ids[begin:end], special.sep])
            features.example.append(index)
            features.context_from.append(context_from)
            features.offsets.append(context.offsets[begin:end])
            inside = target is not None and begin <= target[0] and target[1] < end
            features.starts.append(context_from + target[0] - begin if inside else 0)
            features.ends.append(context_from + target[1] - begin if inside else 0)
    return features


def allowed_positions(features: SpanFeatures, rows: np.ndarray, width: int) -> Tensor:
    """(B, width) mask of the positions a span may start or end at: [CLS] and the context tokens."""
    positions = np.arange(width)[None, :]
    begin = np.array([features.context_from[i] for i in rows])[:, None]
    end = begin + np.array([len(features.offsets[i]) for i in rows])[:, None]
    return torch.from_numpy((positions == 0) | ((positions >= begin) & (positions < end)))


def span_loss(start_logits: Tensor, end_logits: Tensor, starts: Tensor, ends: Tensor) -> Tensor:
    """Mean of the start and end cross-entropies."""
    cross_entropy = nn.functional.cross_entropy
    return (cross_entropy(start_logits, starts) + cross_entropy(end_logits, ends)) / 2


def best_spans(start_logits: Tensor, end_logits: Tensor, max_answer_len: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Per row: the best span (score, start, end) with start <= end < start + max_answer_len, both past
    position 0, and the null ([CLS], [CLS]) score."""
    width = start_logits.shape[1]
    pairs = start_logits[:, 1:, None] + end_logits[:, None, 1:]
    offset = torch.arange(width - 1, device=pairs.device)
    gap = offset[None, :] - offset[:, None]
    pairs = pairs.masked_fill(~((gap >= 0) & (gap < max_answer_len)), float("-inf"))
    scores, flat = pairs.flatten(1).max(dim=1)
    return scores, flat // (width - 1) + 1, flat % (width - 1) + 1, start_logits[:, 0] + end_logits[:, 0]


def span_end(context: str, start: int, end: int) -> int:
    """``end`` moved past the characters NFC composes into the one before them (the combining accent of decomposed
    text, "a\u0300"): the tokenizer's NFC normaliser aligns a composed character with its first code point only."""
    def composed(stop: int) -> int:
        return len(unicodedata.normalize("NFC", context[start:stop]))

    while end < len(context) and not context[end].isascii() and composed(end + 1) == composed(end):
        end += 1
    return end


def answer_predictions(features: SpanFeatures, examples: list[QAExample], scores: np.ndarray, starts: np.ndarray,
                       ends: np.ndarray, null_scores: np.ndarray, allow_null: bool) -> list[tuple[str, float]]:
    """Per example: the best span over its windows as context text, and its no-answer score (the lowest
    null score over its windows minus the best span's score; -inf when answers are always given)."""
    best: dict[int, tuple[float, str]] = {}
    null: dict[int, float] = {}
    for row, index in enumerate(features.example):
        offsets = features.offsets[row]
        first, last = starts[row] - features.context_from[row], ends[row] - features.context_from[row]
        context = examples[index].context
        text = context[offsets[first][0]:span_end(context, offsets[first][0], offsets[last][1])].strip()
        if index not in best or scores[row] > best[index][0]:
            best[index] = (float(scores[row]), text)
        null[index] = min(null.get(index, float("inf")), float(null_scores[row]))
    return [(best[i][1], null[i] - best[i][0] if allow_null else float("-inf")) for i in range(len(examples))]
