"""Fuzz the record pipeline end to end: hostile records in every corpus format through `polymask train`.

For each modality (smiles, dna, text) and format (.txt, .smi, .csv, .tsv, .fasta, .jsonl, .parquet)
it writes a corpus of real records from the built-in corpora mixed with mutated and hostile ones
(random Unicode, control and zero-width characters, unbalanced brackets, 5,000-60,000-character
records, deep nesting, JSON values that are not strings, ragged CSV rows, stray FASTA headers),
runs `python -m polymask train` on it for one step in its own process, and records the outcome:
a crash (signal, traceback, or an exit status other than 0 and 2), a clean one-line refusal, or a
run, with the records read and the invalid records counted. NUL characters are left out: a NUL in
the first 8 KiB marks a file as binary, which is a whole-file fault tested on its own.

    python benchmarks/fuzz_records.py --records 2000 --out docs/results/fuzz
"""
from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPORA = REPO / "polymask" / "corpora"
FORMATS = (".txt", ".smi", ".csv", ".tsv", ".fasta", ".jsonl", ".parquet")
ALPHABETS = {"smiles": "CNOSPFIBrcnosp()[]=#@+-\\/%0123456789.:*", "dna": "ACGTUNRYacgtun-*", "text": "abc XYZ .,;'\"!?"}
ODD = "\x01\x07\x1b\x7f\u200b\u200d\u202e\u2028\ufeff\ufffd\U0001F600\u00e9\u4e2d\ud7ff"


def real_records(modality: str, count: int) -> list[str]:
    if modality == "smiles":
        lines = gzip.open(CORPORA / "smiles" / "wehi_mols.smi.gz", "rt").read().split("\n")
        return [line.split()[0] for line in lines if line.strip()][:count]
    if modality == "dna":
        text = gzip.open(CORPORA / "dna" / "16s_gold.fasta.gz", "rt").read()
        return ["".join(block.split("\n")[1:]) for block in text.split(">")[1:]][:count]
    return [line for line in gzip.open(CORPORA / "text" / "austen.txt.gz", "rt").read().split("\n") if line.strip()][:count]


def hostile(modality: str, real: list[str], rng: random.Random) -> object:
    """One record: real, mutated, or hostile (a non-string value for the structured formats)."""
    base = rng.choice(real)
    alphabet = ALPHABETS[modality]
    kind = rng.randrange(12)
    if kind < 3:
        return base
    if kind == 3:  # point mutations
        chars = list(base)
        for _ in range(rng.randint(1, 5)):
            chars.insert(rng.randrange(len(chars) + 1), rng.choice(alphabet + ODD))
        return "".join(chars)
    if kind == 4:  # random Unicode
        return "".join(chr(rng.choice([rng.randint(1, 0xD7FF), rng.randint(0xE000, 0x10FFFF)])) for _ in range(rng.randint(1, 80)))
    if kind == 5:  # control, format and space characters only
        return "".join(rng.choice("\x01\x02\x0b\x0c\x1f \t\u200b\u2028\u00a0") for _ in range(rng.randint(1, 20)))
    if kind == 6:  # huge
        unit = {"smiles": "C", "dna": "ACGT", "text": "word "}[modality]
        return unit * (rng.randint(5_000, 60_000) // len(unit))
    if kind == 7:  # deep nesting / many ring closures
        depth = rng.randint(50, 3_000)
        return "C(" * depth + "C" + ")" * depth if rng.random() < 0.5 else "C1" * depth
    if kind == 8:  # unbalanced and truncated
        return base[: rng.randrange(len(base) + 1)] + rng.choice(["(", "[", "]", ")", "%", "%1", "\\", "'", '"'])
    if kind == 9:  # a value that is not a string (structured formats)
        return rng.choice([rng.randint(-10**12, 10**12), rng.random() * 1e300, None, True, ["C", "C"], {"s": "CCO"}])
    if kind == 10:  # separators and quotes inside the record
        return base[: len(base) // 2] + rng.choice([",", "\t", '"', "\n", "\r", ">", "#", "\\n"]) + base[len(base) // 2:]
    return rng.choice(alphabet) * rng.randint(1, 3)


def as_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def one_line(value: object) -> str:
    return as_text(value).replace("\n", " ").replace("\r", " ")


def write_corpus(path: Path, records: list[object], rng: random.Random) -> None:
    suffix = path.suffix
    if suffix in (".txt", ".smi"):
        path.write_text("".join(one_line(r) + "\n" for r in records), encoding="utf-8")
    elif suffix in (".csv", ".tsv"):
        delimiter = "," if suffix == ".csv" else "\t"
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle, delimiter=delimiter)
            writer.writerow(["sequence", "label"])
            for record in records:
                row = [as_text(record), str(rng.randrange(2))]
                writer.writerow(row + ["extra"] if rng.random() < 0.03 else row)  # a few ragged rows
    elif suffix == ".fasta":
        lines = []
        for index, record in enumerate(records):
            lines.append(f">record-{index}" + (" >nested" if rng.random() < 0.05 else ""))
            text = one_line(record)
            lines += [text[i:i + 70] for i in range(0, len(text), 70)] or [""]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    elif suffix == ".jsonl":
        path.write_text("".join(json.dumps({"sequence": r}) + "\n" for r in records), encoding="utf-8")
    elif suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"sequence": [r if isinstance(r, str) or r is None else as_text(r) for r in records]}),
                       path)


def run(modality: str, path: Path, workdir: Path) -> dict:
    out = workdir / f"run-{modality}-{path.suffix[1:]}"
    command = [sys.executable, "-m", "polymask", "train", "--modality", modality, "--objective", "mlm", "--data", str(path),
               "--out", str(out), "--set", "model.preset=tiny", "--set", "train.max_steps=1", "--set", "train.progress=false",
               "--set", "data.max_len=128", "--set", "train.batch_size=8", "--set", f"data.cache_dir={workdir / 'cache'}"]
    if path.suffix in (".csv", ".tsv", ".jsonl", ".parquet"):
        command += ["--column", "sequence"]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    crashed = result.returncode not in (0, 2) or "Traceback" in result.stderr
    outcome = {"modality": modality, "format": path.suffix, "exit": result.returncode, "crash": crashed,
               "seconds": round(time.perf_counter() - started, 1),
               "stderr_tail": result.stderr.strip().splitlines()[-1][:300] if result.stderr.strip() else ""}
    summary_path = out / "summary.json"
    if result.returncode == 0 and summary_path.is_file():
        summary = json.loads(summary_path.read_text())
        outcome.update(records_read=summary["records"], invalid=summary["skipped_records"],
                       reasons=sorted({e["reason"].split(" (")[0][:60] for e in summary["skipped_examples"]}))
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2000, help="records per modality and format")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="folder for fuzz.json and fuzz.md")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        for modality in ("smiles", "dna", "text"):
            real = real_records(modality, 500)
            for suffix in FORMATS:
                records = [hostile(modality, real, rng) for _ in range(args.records)]
                if suffix in (".txt", ".smi", ".fasta"):
                    records = [r for r in records if isinstance(r, str)] + [as_text(r) for r in records if not isinstance(r, str)]
                path = workdir / f"{modality}{suffix}"
                write_corpus(path, records, rng)
                row = {"records_written": len(records), **run(modality, path, workdir)}
                rows.append(row)
                print(json.dumps(row), flush=True)
    report = {"records_per_file": args.records, "seed": args.seed, "rows": rows,
              "crashes": sum(row["crash"] for row in rows), "records_written": sum(r["records_written"] for r in rows)}
    if args.out:
        sys.path.insert(0, str(REPO))
        from polymask.jsonio import write_json, write_text

        args.out.mkdir(parents=True, exist_ok=True)
        write_json(args.out / "fuzz.json", report)
        lines = [f"# Record fuzzing: `python benchmarks/fuzz_records.py --records {args.records} --seed {args.seed}`", "",
                 "Each row: one corpus of real and hostile records through `polymask train` (one step) in its own "
                 "process. A crash is a signal, a traceback or an exit status other than 0 and 2. Records read can "
                 "be fewer than written in line formats: a blank line is not a record.", "",
                 "| modality | format | records written | exit | crash | records read | invalid counted |",
                 "|---|---|---:|---:|---|---:|---:|"]
        lines += [f"| {r['modality']} | {r['format']} | {r['records_written']:,} | {r['exit']} | {'yes' if r['crash'] else 'no'} "
                  f"| {r.get('records_read', '–')} | {r.get('invalid', '–')} |" for r in rows]
        write_text(args.out / "fuzz.md", "\n".join(lines) + f"\n\nCrashes: {report['crashes']}.\n")
    print(f"crashes: {report['crashes']} of {len(rows)} runs; {report['records_written']:,} records")


if __name__ == "__main__":
    main()
