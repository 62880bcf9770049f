"""Records -> token ids for applying a model, and running a network over them in batches.

``tokenize_normalised`` is the one place a normalised record becomes the ids a model reads, on every path that
applies one: fine-tuning and benchmark cells, ``predict`` and ``embed``. A record longer than the model is read from
its first ``max_len`` tokens (DNA: its first window, ``Modality.first_window``), whatever its modality, and counted
as truncated. ``encode_records`` (predict, embed) first checks and normalises each record; one the modality rejects
(unparsable SMILES, empty) keeps its place with ids None and a reason, never disappears.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import torch
from tokenizers import Tokenizer

from polymask.data.batching import Batch, BatchSampler, collate
from polymask.data.records import normalize_record
from polymask.errors import ConfigError, InvalidRecord
from polymask.modalities.base import Modality
from polymask.runtime import autocast, progress_bar
from polymask.tokenization import SpecialIds, cut_encoding

#: One record: its input strings (one, or two for a pair task), or None when it could not even be read.
Inputs = tuple[str, ...] | None


@dataclass
class Encoded:
    """Token ids per record (None where rejected), the reason for each rejection, and counts."""

    ids: list[list[int] | None]
    reasons: list[str | None]
    #: how many records were longer than the model and read from their first ``max_len`` tokens
    truncated: int
    #: how many hold a token outside the vocabulary
    unknown: int
    #: each record as the model reads it, normalised and cut to its window (``model_windows``; None where rejected)
    records: list[tuple[str, ...] | None]

    @property
    def accepted(self) -> np.ndarray:
        """Indices of the records that have token ids."""
        return np.array([i for i, ids in enumerate(self.ids) if ids is not None], dtype=np.int64)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def as_inputs(records: Any, columns: Sequence[str]) -> tuple[list[Inputs], list[str | None], Any]:
    """(inputs, reasons, index) from a list of strings (or of tuples for pair tasks), a pandas Series, or a
    DataFrame holding ``columns``; a missing value (None, NaN) is rejected with a reason."""
    import pandas as pd

    index = None
    if isinstance(records, pd.DataFrame):
        absent = [c for c in columns if c not in records.columns]
        if absent:
            raise ConfigError(f"the DataFrame has no column {absent}; the model reads {list(columns)}")
        index = records.index
        rows: Iterable[Any] = records[list(columns)].itertuples(index=False, name=None)
    elif isinstance(records, pd.Series):
        index, rows = records.index, records.tolist()
    elif isinstance(records, str):
        raise ConfigError("pass a list of records, not one string")
    else:
        rows = records
    inputs: list[Inputs] = []
    reasons: list[str | None] = []
    for row in rows:
        values = tuple(row) if isinstance(row, (tuple, list)) else (row,)
        if len(values) != len(columns):
            raise ConfigError(f"a record has {len(values)} fields; the model reads {len(columns)}: {list(columns)}")
        absent = [name for name, value in zip(columns, values) if _missing(value)]
        inputs.append(None if absent else tuple(str(value) for value in values))
        reasons.append(f"no value for {', '.join(absent)}" if absent else None)
    return inputs, reasons, index


def encode_records(inputs: Sequence[Inputs], reasons: Sequence[str | None], modality: Modality, tokenizer: Tokenizer,
                   max_len: int) -> Encoded:
    """Check and normalise each record as training does (``normalize_record``; a rejected one keeps a reason) and
    read the others as fine-tuning does (``tokenize_normalised``: an over-long record cut and counted)."""
    unknown = SpecialIds.of(tokenizer).unk
    reasons = list(reasons)
    normalised: list[tuple[str, ...] | None] = []
    for index, parts in enumerate(inputs):
        try:
            if parts is None:
                raise InvalidRecord(reasons[index] or "no value")
            normalised.append(tuple(normalize_record(modality, part) for part in parts))
        except InvalidRecord as exc:
            normalised.append(None)
            reasons[index] = exc.reason
    accepted = [i for i, parts in enumerate(normalised) if parts is not None]
    read = tokenize_normalised([normalised[i] for i in accepted], modality, tokenizer, max_len)
    encoded = Encoded([None] * len(inputs), reasons, read.truncated, sum(unknown in ids for ids in read.ids),
                      [None] * len(inputs))
    for index, ids, window in zip(accepted, read.ids, read.windows):
        encoded.ids[index], encoded.records[index] = ids, window
    return encoded


@dataclass
class Tokenised:
    """Normalised records as a model reads them: their token ids, which were cut, and the text each id list holds."""

    ids: list[list[int]]
    #: which records were longer than the model (cut to their first ``max_len`` tokens, or their first window)
    cut: list[bool]
    #: each record cut to the window the model reads (``Modality.first_window``; the record itself for most)
    windows: list[tuple[str, ...]]

    @property
    def truncated(self) -> int:
        """How many records were cut."""
        return sum(self.cut)


def model_windows(inputs: Sequence[tuple[str, ...]], modality: Modality, tokenizer: Tokenizer,
                  max_len: int) -> list[tuple[str, ...]]:
    """Each part of each normalised record cut to the window a model of ``max_len`` tokens reads
    (``Modality.first_window``: DNA cuts a long record before tokenising; other modalities keep it whole)."""
    return [tuple(modality.first_window(text, max_len, tokenizer) for text in parts) for parts in inputs]


def tokenize_normalised(inputs: Sequence[tuple[str, ...]], modality: Modality, tokenizer: Tokenizer,
                        max_len: int) -> Tokenised:
    """The token ids of records already normalised (a task's splits, their augmented or test-time variants, the
    records ``encode_records`` accepted): each cut to ``model_windows``, encoded [CLS] a [SEP] or [CLS] a [SEP] b
    [SEP], and cut to ``max_len`` by ``cut_encoding`` (its first tokens; a pair's longer part loses its end first).
    Never normalised again: a randomised SMILES stays the atom order it was drawn in."""
    windows = model_windows(inputs, modality, tokenizer, max_len)
    prepared = [tuple(modality.tokenizer_input(text) for text in parts) for parts in windows]
    encodings = tokenizer.encode_batch([parts if len(parts) == 2 else parts[0] for parts in prepared])
    cut = [len(encoding.ids) > max_len or window != parts
           for encoding, window, parts in zip(encodings, windows, inputs)]
    return Tokenised([cut_encoding(encoding, max_len) for encoding in encodings], cut, windows)


def run_batched(sequences: Sequence[list[int]], forward: Callable[[Batch, np.ndarray], np.ndarray], width: int,
                batch_size: int, pad: int, device: torch.device, precision: str = "fp32", progress: bool = False,
                desc: str = "batches") -> np.ndarray:
    """``forward(batch, indices)`` over length-sorted batches of ``sequences`` (little padding; ``indices``: the
    batch's positions in ``sequences``), results back in input order: an array (len(sequences), width)."""
    lengths = np.array([len(s) for s in sequences], dtype=np.int64)
    batches = BatchSampler(lengths, batch_size, 0, shuffle=False).epoch(0)
    results = np.full((len(sequences), width), np.nan, dtype=np.float64)
    bar = progress_bar(total=len(batches), disable=not progress, unit="batch", desc=desc)
    with torch.no_grad():
        for indices in batches:
            batch = collate([sequences[i] for i in indices], pad).to(device)
            with autocast(device, precision):
                results[indices] = forward(batch, indices)
            bar.update(1)
    bar.close()
    return results
