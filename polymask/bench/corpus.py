"""``polymask bench --corpus FILE``: tokenisation throughput and peak memory of corpus preparation.

Prepares the corpus into a fresh, temporary cache (nothing reused), then reads every training
sequence back through the memory-mapped store, and reports records/s and the peak resident memory
of this process and of the worker processes.
"""
from __future__ import annotations

import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from polymask.data.corpus import prepare_corpus
from polymask.jsonio import dumps, make_dir, write_json, write_text
from polymask.modalities import MODALITIES
from polymask.runtime import machine


def _peak_rss_mib(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # Linux reports KiB


def bench_corpus(path: Path, modality_name: str, num_proc: int, max_len: int, out: Path | None) -> dict[str, Any]:
    """Measure one cold preparation of ``path``; write ``<out>/corpus-<file>.{md,json}``."""
    modality = MODALITIES.get(modality_name)()
    tokenizer = modality.load_tokenizer()
    with tempfile.TemporaryDirectory() as cache:
        started = time.perf_counter()
        corpus = prepare_corpus(modality, tokenizer, [path], column=None, max_len=max_len, val_fraction=0.001,
                                max_val_records=1000, seed=0, cache_dir=Path(cache), strict=False, num_proc=num_proc)
        prepared = time.perf_counter() - started
        started = time.perf_counter()
        tokens = sum(len(corpus.train[i]) for i in range(len(corpus.train)))
        read_back = time.perf_counter() - started
    report = corpus.report
    result = {"file": str(path), "modality": modality_name, "num_proc": num_proc, "records": report.records,
              "skipped": report.skipped, "train_sequences": report.train_sequences, "tokens": tokens,
              "prepare_s": round(prepared, 1), "records_per_s": round(report.records / prepared, 1),
              "read_back_s": round(read_back, 1),
              "peak_rss_main_mib": round(_peak_rss_mib(resource.RUSAGE_SELF), 1),
              "peak_rss_worker_mib": round(_peak_rss_mib(resource.RUSAGE_CHILDREN), 1), **machine()}
    if out is not None:
        make_dir(out)
        stem = out / f"corpus-{path.name.split('.')[0]}"
        write_json(stem.with_suffix(".json"), result)
        lines = [f"# Corpus preparation: {path.name}", "", "| measure | value |", "|---|---|"]
        lines += [f"| {key} | {value} |" for key, value in result.items()]
        write_text(stem.with_suffix(".md"), "\n".join(lines) + "\n")
    print(dumps(result, indent=1))
    return result
