"""Records -> token ids for applying a model, and running a network over them in batches.

Every record keeps its place: one the modality rejects (unparsable SMILES, empty, longer than the
model for a modality whose records are never cut, as SMILES: half a molecule is another molecule) gets
ids None and a reason, never disappears. Longer records of the other modalities (text, which
pretraining packs and cuts; DNA, which it cuts into windows) are truncated as at fine-tuning, and counted.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
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
    truncated: int = 0
    unknown: int = 0
    #: each record's normalised input strings (None where rejected)
    records: list[tuple[str, ...] | None] = field(default_factory=list)

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
    """Check and normalise each record as training does (``normalize_record``), keep the window a model reads
    (``Modality.first_window``) and tokenise it as at fine-tuning ([CLS] a [SEP] or [CLS] a [SEP] b [SEP]). Too long:
    rejected if the modality never cuts a record (SMILES), else truncated."""
    specials = SpecialIds.of(tokenizer)
    reasons = list(reasons)
    prepared: list[tuple[str, ...] | None] = []
    records: list[tuple[str, ...] | None] = []
    windowed = [False] * len(inputs)
    for index, parts in enumerate(inputs):
        try:
            if parts is None:
                raise InvalidRecord(reasons[index] or "no value")
            normalised = tuple(normalize_record(modality, part) for part in parts)
            records.append(tuple(modality.first_window(part, max_len, tokenizer) for part in normalised))
            windowed[index] = records[-1] != normalised
            prepared.append(tuple(modality.tokenizer_input(part) for part in records[-1]))
        except InvalidRecord as exc:
            records.append(None)
            prepared.append(None)
            reasons[index] = exc.reason
    accepted = [i for i, parts in enumerate(prepared) if parts is not None]
    encodings = tokenizer.encode_batch([prepared[i] if len(prepared[i]) == 2 else prepared[i][0] for i in accepted])
    encoded = Encoded([None] * len(prepared), reasons, records=records)
    for index, encoding in zip(accepted, encodings):
        ids = encoding.ids
        if len(ids) > max_len:
            if modality.never_cuts:
                reasons[index] = f"{len(ids)} tokens, more than the model's max_len {max_len}"
                records[index] = None
                continue
            ids = cut_encoding(encoding, max_len)
            encoded.truncated += 1
        elif windowed[index]:
            encoded.truncated += 1
        encoded.unknown += specials.unk in ids
        encoded.ids[index] = ids
    return encoded


def tokenize_normalised(inputs: Sequence[tuple[str, ...]], modality: Modality, tokenizer: Tokenizer,
                        max_len: int) -> tuple[list[list[int]], list[bool]]:
    """Token ids of records already normalised (a task's splits, their augmented or test-time variants), as
    fine-tuning reads them: [CLS] a [SEP] or [CLS] a [SEP] b [SEP], cut to ``max_len`` by ``cut_encoding`` (the record
    first cut to ``Modality.first_window``); and which were cut. Never normalised again: a randomised SMILES stays the atom
    order it was drawn in."""
    windows = [tuple(modality.first_window(text, max_len, tokenizer) for text in parts) for parts in inputs]
    prepared = [tuple(modality.tokenizer_input(text) for text in parts) for parts in windows]
    encodings = tokenizer.encode_batch([parts if len(parts) == 2 else parts[0] for parts in prepared])
    cut = [len(encoding.ids) > max_len or window != parts
           for encoding, window, parts in zip(encodings, windows, inputs)]
    return [cut_encoding(encoding, max_len) for encoding in encodings], cut


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
