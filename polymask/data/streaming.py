"""Streaming corpora: records are read, validated and tokenised on the fly (``datasets``
IterableDataset), never cached whole — for corpora too large to prepare up front.

The first ``max_val_records`` sequences of the stream are held out for validation (a corpus that
ends before that holds out ``val_fraction`` of its sequences instead); training reads the rest
through a shuffle buffer (reshuffled per epoch) and length-bucketed pools, epoch after epoch.
Invalid records are reported as the stream reaches them (``records`` counts rows of the first
epoch: sequences plus invalid records), or fail the run under ``strict``; a stream with nothing
left to train on fails with one line instead of waiting forever. A resumed run re-reads the stream
up to its position.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator, Sequence

import datasets
from datasets import Dataset, Features, IterableDataset, Sequence as ListFeature, Value
from tokenizers import Tokenizer

from polymask.data import pipeline
from polymask.data.corpus import RAW_FEATURES, CorpusReport, strict_error
from polymask.data.readers import check_corpus_file
from polymask.data.streams import MicroBatch, StreamPosition, bucketed
from polymask.data.token_store import TokenStore
from polymask.errors import DataError
from polymask.jsonio import append_jsonl
from polymask.modalities.base import Modality

SHUFFLE_BUFFER = 10_000


class StreamingBatches:
    """Micro-batches straight from corpus files; same ``take`` contract as ``IndexedBatches``."""

    def __init__(self, modality: Modality, tokenizer: Tokenizer, paths: Sequence[Path], *, column: str | None,
                 max_len: int, batch_size: int, pool_batches: int, max_val_records: int, seed: int,
                 skipped_file: Path | None, val_fraction: float = 0.0, strict: bool = False) -> None:
        datasets.disable_progress_bars()
        for path in paths:
            check_corpus_file(Path(path))
        keep_text = modality.config.augment and not modality.packed
        raw = IterableDataset.from_generator(
            pipeline.record_rows, features=RAW_FEATURES,
            gen_kwargs={"paths": [str(p) for p in paths], "column": column,
                        "default_columns": tuple(modality.default_columns)})
        self.tokens = raw.map(pipeline.normalize_batch, batched=True, fn_kwargs={"modality": modality}).map(
            pipeline.tokenize_batch, batched=True, remove_columns=list(RAW_FEATURES),
            fn_kwargs={"modality": modality, "tokenizer": tokenizer, "max_len": max_len, "keep_text": keep_text})
        self.batch_size, self.pool_batches, self.seed = batch_size, pool_batches, seed
        self.max_val_records, self.val_fraction, self.strict = max_val_records, val_fraction, strict
        self.skipped_file = skipped_file
        self.report = CorpusReport(cache="(streaming: nothing cached)")
        self._iterator: Iterator[MicroBatch] | None = None
        self._at: tuple[int, int] | None = None
        self.head_rows = 0

    def validation_store(self) -> TokenStore:
        """The held-out head of the stream (its first ``max_val_records`` sequences), in memory."""
        head, kept = [], []  # rows read; stream positions of the sequences among them
        with pipeline.unwrapped_errors():
            for row in self.tokens:
                if len(kept) == self.max_val_records:
                    break
                if row["reason"] is None and row["length"] > 0:
                    kept.append(len(head))
                head.append(row)
            else:  # the whole corpus fits in the head: hold out a fraction of it and train on the rest
                kept = kept[:min(self.max_val_records, round(self.val_fraction * len(kept)))]
        self.head_rows = kept[-1] + 1 if kept else 0
        for row in head[:self.head_rows]:
            self.report.records += 1
            if row["reason"] is not None:
                self._skip(row, 0)
            self.report.count_changes(row["changes"])
        rows = [head[i] for i in kept]
        self.report.valid_sequences = len(rows)
        features = Features({"input_ids": ListFeature(Value("int32")), "length": Value("int32")})
        return TokenStore(Dataset.from_dict({"input_ids": [r["input_ids"] for r in rows],
                                             "length": [r["length"] for r in rows]}, features=features))

    def _rows(self, epoch: int) -> Iterator[dict]:
        """Training rows of one epoch (after the validation head), reporting invalid ones on the way."""
        stream = self.tokens.skip(self.head_rows).shuffle(seed=self.seed, buffer_size=SHUFFLE_BUFFER)
        stream.set_epoch(epoch)
        for row in stream:
            self.report.records += epoch == 0
            if row["reason"] is not None:
                self._skip(row, epoch)
            elif row["length"] > 0:
                self.report.count_changes(row["changes"] if epoch == 0 else ())
                yield row

    def _skip(self, row: dict, epoch: int) -> None:
        if epoch:
            return  # reported during the first epoch already
        entry = {"source": row["source"], "line": row["line"], "reason": row["reason"], "kind": row["kind"]}
        if self.strict:
            raise strict_error(entry)
        self.report.count_skipped(entry)
        if self.skipped_file is not None:
            append_jsonl(self.skipped_file, entry)

    def take(self, count: int, position: StreamPosition) -> list[MicroBatch]:
        """The next ``count`` micro-batches; advances ``position`` (re-reading the stream after a resume)."""
        with pipeline.unwrapped_errors():
            return self._take(count, position)

    def _take(self, count: int, position: StreamPosition) -> list[MicroBatch]:
        if self._at != (position.epoch, position.batch_index):
            self._iterator = bucketed(self._rows(position.epoch), self.batch_size, self.pool_batches,
                                      (self.seed, position.epoch))
            for _ in range(position.batch_index):
                next(self._iterator)
        taken = []
        while len(taken) < count:
            batch = next(self._iterator, None)
            if batch is None:
                if position.batch_index == 0:
                    raise DataError(f"the streamed corpus has no training sequences after the {self.head_rows} rows "
                                    f"held out for validation ({self.report.skipped} invalid records skipped); "
                                    f"lower data.max_val_records or add data")
                position.epoch += 1
                position.batch_index = 0
                self._iterator = bucketed(self._rows(position.epoch), self.batch_size, self.pool_batches,
                                          (self.seed, position.epoch))
                continue
            position.batch_index += 1
            self.report.train_sequences += len(batch.sequences) if position.epoch == 0 else 0
            taken.append(batch)
        self._at = (position.epoch, position.batch_index)
        return taken
