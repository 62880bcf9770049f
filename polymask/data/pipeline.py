"""The batched steps of corpus preparation, run through ``datasets.map`` (optionally in parallel).

Each function maps a batch of rows to a batch of rows, so any corpus streams through on-disk Arrow
files with bounded memory.
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator, Sequence

from datasets import Dataset, Features
from tokenizers import Tokenizer

from polymask.data.readers import pick_column, read_records, value_problem
from polymask.data.records import normalize_record_with_changes
from polymask.errors import InvalidRecord, ModalityFailed, PolymaskError
from polymask.modalities.base import Modality
from polymask.fast_encode import encode_batch
from polymask.tokenization import SpecialIds


@contextlib.contextmanager
def unwrapped_errors() -> Iterator[None]:
    """Re-raise a polymask error that ``datasets`` wrapped (``DatasetGenerationError``, worker errors) as
    itself, so that a bad file ends in its own one-line message."""
    try:
        yield
    except PolymaskError:
        raise
    except Exception as exc:
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, PolymaskError):
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            raise
        raise cause from None


def record_rows(paths: Sequence[str], column: str | None, default_columns: Sequence[str]) -> Iterator[dict[str, Any]]:
    """Generator of raw rows (for ``raw_rows`` and the streaming ``IterableDataset.from_generator``)."""
    for path in paths:
        for record in read_records(Path(path), column, default_columns):
            yield {"source": record.source, "line": record.line, "text": record.text, "reason": record.error,
                   "kind": record.error}


def raw_rows(paths: Sequence[str], column: str | None, default_columns: Sequence[str], features: Features,
             path: Path, chunk: int = 50_000) -> Dataset:
    """The raw rows of every file written to one Arrow file ``path`` in chunks, then memory-mapped back
    (``Dataset.from_generator`` encodes row by row: ~100 µs a row, 3 of MOSES's 5 preparation minutes)."""
    import pyarrow as pa

    path.parent.mkdir(parents=True, exist_ok=True)
    schema = features.arrow_schema
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
        columns: dict[str, list] = {name: [] for name in schema.names}
        for row in record_rows(paths, column, default_columns):
            for name, value in row.items():
                columns[name].append(value)
            if len(columns["text"]) == chunk:
                writer.write_batch(pa.RecordBatch.from_pydict(columns, schema=schema))
                columns = {name: [] for name in schema.names}
        if columns["text"]:
            writer.write_batch(pa.RecordBatch.from_pydict(columns, schema=schema))
    return Dataset.from_file(str(path))


def dataset_rows(dataset: Dataset, column: str | None, default_columns: Sequence[str]) -> Dataset:
    """The same rows from one column of a ``datasets.Dataset``."""
    name = pick_column(dataset.column_names, column, default_columns, "dataset")

    def convert(batch: dict[str, list], indices: list[int]) -> dict[str, list]:
        values = batch[name]
        reasons = [value_problem(v, name) for v in values]
        return {"source": ["<dataset>"] * len(values), "line": [i + 1 for i in indices],
                "text": [v if reason is None else "" for v, reason in zip(values, reasons)], "reason": reasons,
                "kind": reasons}

    return dataset.map(convert, batched=True, with_indices=True, remove_columns=dataset.column_names,
                       new_fingerprint=f"{dataset._fingerprint}-rows-{name}")


def normalize_batch(batch: dict[str, list], modality: Modality) -> dict[str, list]:
    """Validate and canonicalise; an invalid record keeps its row with ``reason`` and ``kind`` set, a valid one
    lists the optional normalisation steps that changed it in ``changes``."""
    out: dict[str, list] = {"text": [], "reason": [], "kind": [], "changes": []}
    for text, reason, kind, source, line in zip(batch["text"], batch["reason"], batch["kind"], batch["source"],
                                                batch["line"]):
        try:
            if reason:
                raise InvalidRecord(reason, kind)
            normalized, changes = normalize_record_with_changes(modality, text)
            out["text"].append(normalized)
            out["reason"].append(None)
            out["kind"].append(None)
            out["changes"].append(list(changes))
        except InvalidRecord as exc:
            out["text"].append("")
            out["reason"].append(exc.reason)
            out["kind"].append(exc.kind)
            out["changes"].append([])
        except ModalityFailed as exc:
            raise ModalityFailed(f"{source}:{line}: {exc}") from None
    return out


def tokenize_batch(batch: dict[str, list], modality: Modality, tokenizer: Tokenizer, max_len: int,
                   keep_text: bool) -> dict[str, list]:
    """Token ids of at most ``max_len`` ([CLS] ... [SEP]) per output row.

    One record may give several rows (windows of a long DNA sequence; full blocks of packed text)
    or a row with ``length`` 0 and a ``reason`` (too long for a modality that skips, or no tokens).
    """
    specials = SpecialIds.of(tokenizer)
    body = max_len - 2
    out: dict[str, list] = {"input_ids": [], "length": [], "text": [], "unknown": [], "source": [], "line": [],
                            "reason": [], "kind": [], "changes": []}

    def emit(ids: list[int], text: str, unknown: int, source: str = "", line: int = 0, reason: str | None = None,
             kind: str | None = None, changes: Sequence[str] = ()) -> None:
        out["input_ids"].append(ids)
        out["length"].append(len(ids))
        out["text"].append(text if keep_text else "")
        out["unknown"].append(unknown)
        out["source"].append(source)
        out["line"].append(line)
        out["reason"].append(reason)
        out["kind"].append(kind or reason)
        out["changes"].append(list(changes))

    all_ids = encode_batch(tokenizer, [modality.tokenizer_input(t) for t in batch["text"]])
    reasons = batch.get("reason") or [None] * len(all_ids)
    kinds = batch.get("kind") or reasons
    all_changes = batch.get("changes") or [()] * len(all_ids)
    stream: list[int] = []
    for text, ids, source, line, reason, kind, changes in zip(batch["text"], all_ids, batch["source"], batch["line"],
                                                              reasons, kinds, all_changes):
        unknown = ids.count(specials.unk)
        if reason is not None:  # invalid before tokenisation (streaming keeps such rows to report them)
            emit([], "", 0, source, line, reason, kind)
        elif not ids:
            emit([], "", 0, source, line, "no tokens after tokenisation")
        elif modality.packed:
            stream += [*ids, specials.sep]
            emit([], "", unknown, changes=changes)  # counts unknown tokens and changes; dropped as an empty row
        elif len(ids) <= body:
            emit([specials.cls, *ids, specials.sep], text, unknown, changes=changes)
        elif modality.overflow == "window":
            for start in range(0, len(ids), body):
                window = ids[start:start + body]
                emit([specials.cls, *window, specials.sep], modality.decode(tokenizer, window) if keep_text else "",
                     unknown if start == 0 else 0, changes=changes if start == 0 else ())
        else:
            emit([], "", unknown, source, line, f"{len(ids)} tokens, more than max_len - 2 = {body}",
                 f"longer than max_len - 2 = {body} tokens")
    for start in range(0, len(stream), body):
        emit([specials.cls, *stream[start:start + body], specials.sep], "", 0)
    return out
