"""Turn corpus files into tokenised, cached train/validation splits.

records (streamed into Arrow) -> Modality.normalize (invalid ones reported with file and line, or
fatal in strict mode) -> record-level train/validation split -> tokenizer (batched) -> sequences
of at most ``max_len`` tokens ([CLS] ... [SEP]; long ones windowed or skipped as the modality says;
text packed into full blocks) -> an Arrow dataset in the cache, keyed by the content of the corpus,
the tokenizer and the settings, memory-mapped by training and reused by the next run. Every step
runs through ``datasets.map`` in batches (``num_proc`` processes), so RAM stays bounded however
large the corpus.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import datasets
import numpy as np
import pyarrow.compute as pc
from datasets import Dataset, Features, Sequence as ListFeature, Value, load_from_disk
from tokenizers import Tokenizer

from polymask.data import pipeline
from polymask.data.exclusions import exclusion_files, in_held_out, load_exclusions
from polymask.data.readers import check_corpus_file, read_records
from polymask.data.token_store import TokenStore
from polymask.errors import DataError
from polymask.jsonio import atomic_path, dumps, make_dir
from polymask.locks import FolderLock, acquire
from polymask.modalities.base import Modality
from polymask.tokenization import fingerprint

PIPELINE_VERSION = 3
HASH_CONTENT_LIMIT = 256 * 2**20
SKIPPED_EXAMPLES = 10
AUTO_PARALLEL_RECORDS = 50_000
RAW_FEATURES = Features({"source": Value("string"), "line": Value("int64"), "text": Value("string"),
                         "reason": Value("string"), "kind": Value("string")})
TOKEN_FEATURES = Features({"input_ids": ListFeature(Value("int32")), "length": Value("int32"), "text": Value("string"),
                           "unknown": Value("int32"), "source": Value("string"), "line": Value("int64"),
                           "reason": Value("string"), "kind": Value("string"), "changes": ListFeature(Value("string"))})


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
    #: skipped records per kind of reason ("RDKit: AtomValenceException", "longer than max_len - 2 = 126 tokens")
    skipped_by_reason: dict[str, int] = field(default_factory=dict)
    #: records each optional normalisation step changed (SMILES standardisation: "largest_fragment", ...)
    changed_by_step: dict[str, int] = field(default_factory=dict)
    #: valid records kept out of both splits because an exclusion file holds them (``data.exclude``)
    held_out: int = 0
    #: the same per exclusion file (a record in several files counts in each)
    held_out_by_file: dict[str, int] = field(default_factory=dict)
    #: the corpus files, as passed to the run that built the cache entry (then renamed to those passed this time)
    files: list[str] = field(default_factory=list)
    cache: str = ""

    def count_skipped(self, entry: dict) -> None:
        """Count one skipped record (``entry``: source, line, reason, kind)."""
        self.skipped += 1
        if len(self.skipped_examples) < SKIPPED_EXAMPLES:
            self.skipped_examples.append({key: entry[key] for key in ("source", "line", "reason")})
        self.skipped_by_reason[entry["kind"]] = self.skipped_by_reason.get(entry["kind"], 0) + 1

    def count_changes(self, changes: Sequence[str], times: int = 1) -> None:
        """Count ``times`` records that the normalisation steps ``changes`` changed."""
        for step in changes:
            self.changed_by_step[step] = self.changed_by_step.get(step, 0) + times


@dataclass
class Corpus:
    train: TokenStore
    valid: TokenStore
    report: CorpusReport
    skipped_file: Path
    #: the name each corpus file had when the cache entry was built -> the name passed this time (where they differ)
    renamed: dict[str, str] = field(default_factory=dict)


def copy_skipped(skipped_file: Path, out: Path, renamed: dict[str, str]) -> None:
    """Copy a cache entry's skipped records to ``out`` (atomically), each naming the file passed (``renamed``)."""
    with atomic_path(out) as tmp:
        if not renamed:
            shutil.copyfile(skipped_file, tmp)
            return
        with open(skipped_file) as source, open(tmp, "w") as sink:
            for line in source:
                entry = json.loads(line)
                sink.write(dumps({**entry, "source": renamed.get(entry["source"], entry["source"])}) + "\n")


def _as_passed(report: CorpusReport, sources: Sequence[Path] | Dataset) -> dict[str, str]:
    """Make ``report`` name the corpus files passed this time (the cache is keyed by content: another run may have
    built it from a copy elsewhere); returns {name at build time: name now} where they differ."""
    if isinstance(sources, Dataset):
        return {}
    passed = [str(path) for path in sources]
    renamed = {built: now for built, now in zip(report.files, passed) if built != now}
    report.files = passed
    report.skipped_examples = [{**entry, "source": renamed.get(entry["source"], entry["source"])}
                               for entry in report.skipped_examples]
    return renamed


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


def prepare_corpus(modality: Modality, tokenizer: Tokenizer, sources: Sequence[Path] | Dataset, *,
                   column: str | None, max_len: int, val_fraction: float, max_val_records: int,
                   seed: int, cache_dir: Path, strict: bool, num_proc: int | None = 1,
                   exclude: Sequence[Path] = ()) -> Corpus:
    """Tokenise (or load from the cache) a corpus into train and validation ``TokenStore``s; records found in the
    ``exclude`` files are held out of both (``polymask.data.exclusions``)."""
    settings = {"version": PIPELINE_VERSION, "column": column, "max_len": max_len, "val_fraction": val_fraction,
                "max_val_records": max_val_records, "seed": seed,
                "modality": modality.config.model_dump(mode="json", exclude={"tokenizer"})}
    key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    key.update(fingerprint(tokenizer).encode())
    if isinstance(sources, Dataset):
        key.update(sources._fingerprint.encode())
    else:
        for path in sources:
            check_corpus_file(Path(path))
            key.update(file_digest(Path(path)).encode())
    for path in exclusion_files(exclude):
        key.update(f"exclude:{path.name}:{file_digest(path)}".encode())
    folder = cache_dir / f"{modality.name}-{key.hexdigest()[:20]}"
    if not (folder / "report.json").is_file():
        with _build_lock(folder):
            if not (folder / "report.json").is_file():  # another process may have built it meanwhile
                _build(folder, modality, tokenizer, sources, column=column, max_len=max_len, val_fraction=val_fraction,
                       max_val_records=max_val_records, seed=seed, strict=strict, num_proc=num_proc,
                       exclude=exclude)
    report = CorpusReport(**json.loads((folder / "report.json").read_text()))
    report.cache = str(folder)
    renamed = _as_passed(report, sources)
    if strict and report.skipped:
        raise strict_error(report.skipped_examples[0])
    return Corpus(_load_split(folder / "train", report.train_sequences),
                  _load_split(folder / "valid", report.valid_sequences), report, folder / "skipped.jsonl", renamed)


def processes(num_proc: int | None, records: int) -> int | None:
    """Worker processes for ``datasets.map`` (None: this process): ``num_proc``, or with None every available
    core once the corpus has ``AUTO_PARALLEL_RECORDS`` records (fewer do not repay starting the workers)."""
    if num_proc is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        num_proc = cores if records >= AUTO_PARALLEL_RECORDS else 1
    return num_proc if num_proc > 1 else None


def strict_error(first: dict) -> DataError:
    """The error ``--strict`` raises for the first invalid record of a corpus."""
    return DataError(f"{first['source']}:{first['line']}: {first['reason']} "
                     f"(strict mode; drop --strict / data.strict to skip and count such records)")


def _build_lock(folder: Path) -> FolderLock:
    """One builder per cache entry: a second process preparing the same corpus waits, then reuses it."""
    make_dir(folder.parent)
    return acquire(folder.with_name(folder.name + ".lock"), str, wait=True, on_wait=lambda owner: print(
        f"waiting for {owner}, which is preparing the same corpus in {folder}", file=sys.stderr))


def _load_split(path: Path, size: int) -> TokenStore:
    """A split memory-mapped from the cache (``datasets`` cannot reload an empty one)."""
    if size:
        return TokenStore(load_from_disk(str(path)))
    empty = {"input_ids": ListFeature(Value("int32")), "length": Value("int32")}
    return TokenStore(Dataset.from_dict({"input_ids": [], "length": []}, features=Features(empty)))


def _build(folder: Path, modality: Modality, tokenizer: Tokenizer, sources: Sequence[Path] | Dataset, *,
           column: str | None, max_len: int, val_fraction: float, max_val_records: int, seed: int,
           strict: bool, num_proc: int | None, exclude: Sequence[Path]) -> None:
    """Build the cache entry in a temporary folder of this process, then rename it into place; the
    temporary folder goes whatever happens."""
    datasets.disable_progress_bars()
    tmp = folder.with_name(f"{folder.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        with pipeline.unwrapped_errors():
            _build_into(tmp, folder.name, modality, tokenizer, sources, column=column, max_len=max_len,
                        val_fraction=val_fraction, max_val_records=max_val_records, seed=seed, strict=strict,
                        num_proc=num_proc, exclude=exclude)
        shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _hold_out(rows: Dataset, held_out: dict[str, tuple[str, ...]], report: CorpusReport, name: str,
              workers: int | None) -> Dataset:
    """``rows`` without the records of ``held_out``, counted into ``report`` (in total and per file)."""
    matched = rows.filter(in_held_out, batched=True, num_proc=workers, fn_kwargs={"held_out": held_out, "keep": True},
                          new_fingerprint=f"{name}-held-out")
    report.held_out = len(matched)
    for text in matched["text"]:
        for file_name in held_out[text]:
            report.held_out_by_file[file_name] = report.held_out_by_file.get(file_name, 0) + 1
    return rows.filter(in_held_out, batched=True, num_proc=workers, fn_kwargs={"held_out": held_out, "keep": False},
                       new_fingerprint=f"{name}-not-held-out")


def _build_into(tmp: Path, name: str, modality: Modality, tokenizer: Tokenizer, sources: Sequence[Path] | Dataset, *,
                column: str | None, max_len: int, val_fraction: float, max_val_records: int, seed: int,
                strict: bool, num_proc: int | None, exclude: Sequence[Path]) -> None:
    """Read, normalise, split and tokenise through ``datasets.map`` into ``tmp`` (its report last)."""
    if isinstance(sources, Dataset):
        rows = pipeline.dataset_rows(sources, column, modality.default_columns)
    else:
        if not any(next(read_records(Path(p), column, modality.default_columns), None) for p in sources):
            raise DataError(f"no records in {', '.join(map(str, sources))} (only blank or comment lines)")
        rows = pipeline.raw_rows([str(p) for p in sources], column, tuple(modality.default_columns),
                                 RAW_FEATURES, tmp / "hf" / "raw.arrow")
    report = CorpusReport(records=len(rows), files=[] if isinstance(sources, Dataset) else [str(p) for p in sources])
    workers = processes(num_proc, len(rows))
    normalized = rows.map(pipeline.normalize_batch, batched=True, num_proc=workers, fn_kwargs={"modality": modality},
                          new_fingerprint=f"{name}-normalized", load_from_cache_file=False)
    invalid = normalized.filter(lambda batch: [r is not None for r in batch["reason"]], batched=True,
                                num_proc=workers, new_fingerprint=f"{name}-invalid")
    skipped = [{"source": r["source"], "line": r["line"], "reason": r["reason"], "kind": r["kind"]} for r in invalid]
    if strict and skipped:
        raise strict_error(skipped[0])
    valid_rows = normalized.filter(lambda batch: [r is None for r in batch["reason"]], batched=True,
                                   num_proc=workers, new_fingerprint=f"{name}-kept")
    held_out = load_exclusions(modality, exclude)
    if held_out:
        valid_rows = _hold_out(valid_rows, held_out, report, name, workers)
    if len(valid_rows) == 0 and report.held_out:
        raise DataError(f"every valid record of the corpus is in data.exclude ({report.held_out:,} held out)")
    if len(valid_rows) == 0:
        first = skipped[0]
        raise DataError(f"{first['source']}:{first['line']}: {first['reason']}; no usable record in the corpus "
                        f"({report.records} read, all invalid)")
    order = np.random.default_rng(seed).permutation(len(valid_rows))
    n_valid = min(max_val_records, int(round(val_fraction * len(valid_rows))))
    parts = {"valid": np.sort(order[:n_valid]), "train": np.sort(order[n_valid:])}
    keep_text = modality.config.augment and not modality.packed
    for part, indices in parts.items():
        if not len(indices):
            continue
        tokenized = valid_rows.select(indices).map(
            pipeline.tokenize_batch, batched=True, num_proc=workers, remove_columns=valid_rows.column_names,
            fn_kwargs={"modality": modality, "tokenizer": tokenizer, "max_len": max_len, "keep_text": keep_text},
            features=TOKEN_FEATURES, new_fingerprint=f"{name}-{part}-tokens", load_from_cache_file=False)
        report.unknown_tokens += int(pc.sum(tokenized.data.column("unknown")).as_py() or 0)
        too_long = tokenized.filter(lambda batch: [r is not None for r in batch["reason"]], batched=True,
                                    new_fingerprint=f"{name}-{part}-skipped")
        skipped += [{"source": r["source"], "line": r["line"], "reason": r["reason"], "kind": r["kind"]}
                    for r in too_long]
        for count in pc.value_counts(pc.list_flatten(tokenized.data.column("changes"))).to_pylist():
            report.count_changes([count["values"]], count["counts"])
        sequences = tokenized.filter(lambda batch: [n > 0 for n in batch["length"]], batched=True, num_proc=workers,
                                     new_fingerprint=f"{name}-{part}-kept")
        sequences = sequences.select_columns(["input_ids", "length", *(["text"] if keep_text else [])])
        setattr(report, f"{part}_sequences", len(sequences))
        report.tokens += int(pc.sum(sequences.data.column("length")).as_py() or 0)
        if len(sequences):
            sequences.save_to_disk(str(tmp / part))
    if strict and skipped:
        raise strict_error(skipped[0])
    if report.train_sequences == 0:
        first = f"; first skipped: {skipped[0]['source']}:{skipped[0]['line']}: {skipped[0]['reason']}" if skipped else ""
        raise DataError(f"the corpus yields no training sequences ({report.records} records read, {len(skipped)} "
                        f"skipped, {report.valid_sequences} held out for validation){first}")
    for entry in skipped:
        report.count_skipped(entry)
    with open(tmp / "skipped.jsonl", "w") as handle:
        for item in skipped:
            handle.write(dumps(item) + "\n")
    shutil.rmtree(tmp / "hf", ignore_errors=True)
    (tmp / "report.json").write_text(dumps(asdict(report), indent=1))
