"""Turn corpus files into tokenised, cached train/validation splits.

records -> Modality.normalize (invalid ones reported with file and line, or fatal in strict mode)
-> record-level train/validation split -> tokenizer (batched) -> sequences of at most ``max_len``
tokens ([CLS] ... [SEP]; long ones windowed or skipped as the modality says; text packed into full
blocks) -> an Arrow dataset (``datasets``) in the cache, keyed by the content of the corpus, the
tokenizer and the settings, and reused by the next run.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import datasets
from datasets import Dataset, Features, Sequence as ListFeature, Value, load_from_disk
from tokenizers import Tokenizer

from polymask.data.readers import Record, pick_column, read_records
from polymask.data.tokens import TokenStore
from polymask.errors import DataError, InvalidRecord
from polymask.modalities.base import Modality
from polymask.tokenization import SpecialIds, fingerprint

PIPELINE_VERSION = 1
HASH_CONTENT_LIMIT = 256 * 2**20
ENCODE_CHUNK = 4096
SKIPPED_EXAMPLES = 10


@dataclass
class CorpusReport:
    """What happened to the corpus: counts that go into the run summary."""

    records: int = 0
    skipped: int = 0
    train_sequences: int = 0
    valid_sequences: int = 0
    tokens: int = 0
    unknown_tokens: int = 0
    skipped_examples: list[dict] = field(default_factory=list)
    cache: str = ""


@dataclass
class Corpus:
    train: TokenStore
    valid: TokenStore
    report: CorpusReport
    skipped_file: Path


@dataclass
class _Builder:
    """Accumulates sequences for one split."""

    sequences: list[list[int]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    stream: list[int] = field(default_factory=list)


def file_digest(path: Path) -> str:
    """Content hash of a file (path, size and mtime for files over 256 MiB)."""
    stat = path.stat()
    if stat.st_size > HASH_CONTENT_LIMIT:
        return f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


def iter_source_records(sources: Sequence[Path] | Dataset, column: str | None,
                        default_columns: Sequence[str]) -> Iterator[Record]:
    """Records of local files, or of one column of a ``datasets.Dataset``."""
    if isinstance(sources, Dataset):
        name = pick_column(sources.column_names, column, default_columns, "dataset")
        for row, value in enumerate(sources[name], start=1):
            yield Record("<dataset>", row, "" if value is None else str(value),
                         error="null value" if value is None else None)
        return
    for path in sources:
        yield from read_records(Path(path), column, default_columns)


def prepare_corpus(modality: Modality, tokenizer: Tokenizer, sources: Sequence[Path] | Dataset, *,
                   column: str | None, max_len: int, val_fraction: float, max_val_records: int,
                   seed: int, cache_dir: Path, strict: bool) -> Corpus:
    """Tokenise (or load from the cache) a corpus into train and validation ``TokenStore``s."""
    settings = {"version": PIPELINE_VERSION, "column": column, "max_len": max_len, "val_fraction": val_fraction,
                "max_val_records": max_val_records, "seed": seed,
                "modality": modality.config.model_dump(mode="json", exclude={"tokenizer"})}
    key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    key.update(fingerprint(tokenizer).encode())
    if isinstance(sources, Dataset):
        key.update(sources._fingerprint.encode())
    else:
        for path in sources:
            if not Path(path).is_file():
                raise DataError(f"corpus file not found: {path}")
            key.update(file_digest(Path(path)).encode())
    folder = cache_dir / f"{modality.name}-{key.hexdigest()[:20]}"
    if not (folder / "report.json").is_file():
        _build(folder, modality, tokenizer, sources, column=column, max_len=max_len, val_fraction=val_fraction,
               max_val_records=max_val_records, seed=seed, strict=strict)
    report = CorpusReport(**json.loads((folder / "report.json").read_text()))
    report.cache = str(folder)
    return Corpus(_load_split(folder / "train", report.train_sequences),
                  _load_split(folder / "valid", report.valid_sequences), report, folder / "skipped.jsonl")


def _load_split(path: Path, size: int) -> TokenStore:
    """A split memory-mapped from the cache (``datasets`` cannot reload an empty one)."""
    return TokenStore(load_from_disk(str(path)) if size else _to_dataset(_Builder(), keep_text=False))


def _build(folder: Path, modality: Modality, tokenizer: Tokenizer, sources: Sequence[Path] | Dataset, *,
           column: str | None, max_len: int, val_fraction: float, max_val_records: int, seed: int,
           strict: bool) -> None:
    report = CorpusReport()
    skipped: list[dict] = []

    def skip(source: str, line: int, reason: str) -> None:
        if strict:
            raise DataError(f"{source}:{line}: {reason} (strict mode; drop data.strict to skip and count such records)")
        report.skipped += 1
        skipped.append({"source": source, "line": line, "reason": reason})

    texts, origins = [], []
    for record in iter_source_records(sources, column, modality.default_columns):
        report.records += 1
        try:
            if record.error:
                raise InvalidRecord(record.error)
            texts.append(modality.normalize(record.text))
            origins.append((record.source, record.line))
        except InvalidRecord as exc:
            skip(record.source, record.line, exc.reason)
    if not texts:
        raise DataError(f"no usable records in the corpus ({report.records} read, {report.skipped} invalid)")

    order = np.random.default_rng(seed).permutation(len(texts))
    n_valid = min(max_val_records, int(round(val_fraction * len(texts))))
    is_valid = np.zeros(len(texts), dtype=bool)
    is_valid[order[:n_valid]] = True

    specials = SpecialIds.of(tokenizer)
    body = max_len - 2
    keep_text = modality.config.augment and not modality.packed
    splits = {False: _Builder(), True: _Builder()}
    for start in range(0, len(texts), ENCODE_CHUNK):
        chunk = texts[start:start + ENCODE_CHUNK]
        encodings = tokenizer.encode_batch([modality.tokenizer_input(t) for t in chunk], add_special_tokens=False)
        for offset, (text, encoding) in enumerate(zip(chunk, encodings)):
            index = start + offset
            ids = encoding.ids
            split = splits[bool(is_valid[index])]
            report.unknown_tokens += ids.count(specials.unk)
            if not ids:
                skip(*origins[index], "no tokens after tokenisation")
            elif modality.packed:
                split.stream.extend(ids)
                split.stream.append(specials.sep)
            elif len(ids) <= body:
                split.sequences.append([specials.cls, *ids, specials.sep])
                split.texts.append(text)
            elif modality.overflow == "window":
                for window_start in range(0, len(ids), body):
                    window = ids[window_start:window_start + body]
                    split.sequences.append([specials.cls, *window, specials.sep])
                    split.texts.append(modality.decode(tokenizer, window) if keep_text else "")
            else:
                skip(*origins[index], f"{len(ids)} tokens, more than max_len - 2 = {body}")

    datasets.disable_progress_bars()
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for is_valid_split, builder in splits.items():
        if modality.packed:
            stream = builder.stream
            builder.sequences = [[specials.cls, *stream[i:i + body], specials.sep] for i in range(0, len(stream), body)]
        name = "valid" if is_valid_split else "train"
        if builder.sequences:
            _to_dataset(builder, keep_text).save_to_disk(str(tmp / name))
        setattr(report, f"{name}_sequences", len(builder.sequences))
        report.tokens += sum(map(len, builder.sequences))
    if report.train_sequences == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise DataError("the corpus yields no training sequences")
    report.skipped_examples = skipped[:SKIPPED_EXAMPLES]
    with open(tmp / "skipped.jsonl", "w") as handle:
        for item in skipped:
            handle.write(json.dumps(item) + "\n")
    (tmp / "report.json").write_text(json.dumps(asdict(report), indent=1))
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)


def _to_dataset(builder: _Builder, keep_text: bool) -> Dataset:
    columns: dict[str, list] = {"input_ids": builder.sequences, "length": [len(s) for s in builder.sequences]}
    features = {"input_ids": ListFeature(Value("int32")), "length": Value("int32")}
    if keep_text:
        columns["text"] = builder.texts
        features["text"] = Value("string")
    return Dataset.from_dict(columns, features=Features(features))
