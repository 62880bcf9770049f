"""SMILES tokenizer coverage and speed (issue 17).

Coverage: for every MoleculeNet CSV of the data directory (else the built-in copies), the RDKit-valid
molecules, how many hold an ``[UNK]`` under each tokenizer given, and how many do not decode back to the
normalised SMILES exactly. Speed: molecules/s of ``tokenizers.Tokenizer.encode_batch``, of polymask's
``encode_batch`` (one and two processes), and of RDKit canonicalisation (``Smiles.normalize``, one and
two processes), on the normalised molecules.

    python benchmarks/smiles_tokenization.py --data-dir /work/shared/data/moleculenet \\
        --tokenizer before=old/tokenizer.json --out docs/results/smiles-tokenizer

Writes ``<out>/smiles-tokenization.json`` and ``.md``. MOSES preparation is timed by
``polymask bench --corpus moses_train.csv.gz --num-proc 2``.
"""
from __future__ import annotations

import argparse
import multiprocessing
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from polymask.data.records import normalize_record
from polymask.errors import InvalidRecord
from polymask.jsonio import make_dir, write_json, write_text
from polymask.modalities.smiles import Smiles
from polymask.resources import builtin_dir
from polymask.fast_encode import encode_batch
from polymask.tokenization import load_tokenizer


def moleculenet_files(data_dir: Path | None) -> dict[str, tuple[Path, str]]:
    """Every CSV of the data directory (else the built-in MoleculeNet copies) -> (file, its SMILES column)."""
    import pandas as pd

    folder = data_dir or builtin_dir("tasks") / "moleculenet" / "data"
    found = {}
    for path in sorted([*folder.glob("*.csv"), *folder.glob("*.csv.gz")]):
        columns = pd.read_csv(path, nrows=0).columns
        column = next((c for c in columns if c.lower() in ("smiles", "mol")), None)
        if column is not None:
            found[path.name.split(".")[0]] = (path, column)
    return found


def normalised(path: Path, column: str, modality: Smiles) -> tuple[list[str], Counter]:
    """The normalised valid SMILES of one file, and the invalid ones counted per kind of reason."""
    import pandas as pd

    valid, invalid = [], Counter()
    for text in pd.read_csv(path)[column].astype(str):
        try:
            valid.append(normalize_record(modality, text))
        except InvalidRecord as exc:
            invalid[exc.kind] += 1
    return valid, invalid


def coverage(files: dict[str, tuple[Path, str]], tokenizers: dict[str, Any]) -> tuple[list[dict], list[str]]:
    modality, rows, every = Smiles(), [], []
    newest = list(tokenizers.values())[-1]
    for name, (path, column) in files.items():
        valid, invalid = normalised(path, column, modality)
        row: dict[str, Any] = {"set": name, "file": path.name, "valid": len(valid), "invalid": sum(invalid.values()),
                               "invalid_by_reason": dict(invalid)}
        for label, tokenizer in tokenizers.items():
            unk = tokenizer.token_to_id("[UNK]")
            row[f"with_unk_{label}"] = sum(unk in ids for ids in encode_batch(tokenizer, valid))
        row["round_trip_mismatches"] = sum(newest.decode(ids) != text
                                           for ids, text in zip(encode_batch(newest, valid), valid))
        rows.append(row)
        every += valid
        print(row, flush=True)
    return rows, every


_WORKER: dict[str, Any] = {}


def _init(tokenizer_json: str) -> None:
    from tokenizers import Tokenizer

    _WORKER["tokenizer"] = Tokenizer.from_str(tokenizer_json)
    _WORKER["modality"] = Smiles()


def _encode_chunk(texts: list[str]) -> int:
    return len(encode_batch(_WORKER["tokenizer"], texts))


def _normalize_chunk(texts: list[str]) -> int:
    return sum(1 for text in texts if _WORKER["modality"].normalize(text))


def rate(work: Callable[[], Any], count: int) -> float:
    start = time.perf_counter()
    work()
    return count / (time.perf_counter() - start)


def in_processes(function: Callable[[list[str]], int], texts: list[str], tokenizer_json: str, processes: int) -> float:
    """Molecules/s of ``function`` over ``texts`` split across ``processes`` (start-up excluded)."""
    chunks = [texts[i::processes * 8] for i in range(processes * 8)]
    with multiprocessing.get_context("fork").Pool(processes, _init, (tokenizer_json,)) as pool:
        pool.map(function, [texts[:100]] * processes)  # warm the workers
        return rate(lambda: pool.map(function, chunks), len(texts))


def speeds(texts: list[str], tokenizers: dict[str, Any], rdkit_sample: int) -> dict[str, float]:
    """Rates of each tokenizer's own ``encode_batch``, then of polymask's paths with the last (built-in) one."""
    tokenizer = list(tokenizers.values())[-1]
    json_text = tokenizer.to_str()
    sample = texts[:rdkit_sample]
    _init(json_text)
    library = {f"tokenizers_encode_batch_{label}_per_s": rate(
        lambda t=t: t.encode_batch(texts, add_special_tokens=False), len(texts)) for label, t in tokenizers.items()}
    return {
        "molecules": len(texts), **library,
        "polymask_encode_batch_per_s": rate(lambda: encode_batch(_WORKER["tokenizer"], texts), len(texts)),
        "polymask_encode_batch_2_processes_per_s": in_processes(_encode_chunk, texts, json_text, 2),
        "rdkit_sample": len(sample),
        "rdkit_canonicalise_per_s": rate(lambda: _normalize_chunk(sample), len(sample)),
        "rdkit_canonicalise_2_processes_per_s": in_processes(_normalize_chunk, sample, json_text, 2),
    }


def write_report(out: Path, rows: list[dict], labels: list[str], speed: dict[str, float]) -> None:
    make_dir(out)
    write_json(out / "smiles-tokenization.json", {"coverage": rows, "speed": speed})
    lines = ["# SMILES tokenizer: coverage and speed", "",
             "| set | valid molecules | invalid | " + " | ".join(f"with [UNK] ({label})" for label in labels)
             + " | decode != input |", "|---|---:|---:|" + "---:|" * len(labels) + "---:|"]
    for row in rows:
        lines.append(f"| {row['set']} | {row['valid']:,} | {row['invalid']:,} | "
                     + " | ".join(f"{row[f'with_unk_{label}']:,}" for label in labels)
                     + f" | {row['round_trip_mismatches']:,} |")
    totals = {key: sum(row[key] for row in rows) for key in
              ["valid", "invalid", *(f"with_unk_{label}" for label in labels), "round_trip_mismatches"]}
    lines.append("| all | " + " | ".join(f"{value:,}" for value in totals.values()) + " |")
    lines += ["", "| measure | molecules/s |", "|---|---:|"]
    lines += [f"| {key.removesuffix('_per_s').replace('_', ' ')} | {value:,.0f} |" for key, value in speed.items()
              if key.endswith("_per_s")]
    lines += ["", f"Rates over {speed['molecules']:,} normalised molecules (RDKit on the first "
              f"{speed['rdkit_sample']:,});"
              " 'tokenizers encode batch <label>' is the Rust library's own batch call with that tokenizer, all cores;"
              " polymask's encode_batch gives the same ids (tests/test_smiles_coverage.py)."]
    write_text(out / "smiles-tokenization.md", "\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, help="folder with the MoleculeNet CSVs (default: the built-in ones)")
    parser.add_argument("--tokenizer", action="append", default=[],
                        help="LABEL=tokenizer.json to count [UNK] with too (repeatable); the built-in one comes last")
    parser.add_argument("--rdkit-sample", type=int, default=20000, help="molecules timed through RDKit")
    parser.add_argument("--out", type=Path, default=Path("runs/smiles-tokenization"))
    args = parser.parse_args()
    tokenizers = {label: load_tokenizer(Path(path)) for label, path in (item.split("=", 1) for item in args.tokenizer)}
    tokenizers["now"] = Smiles().load_tokenizer()
    rows, every = coverage(moleculenet_files(args.data_dir), tokenizers)
    unique = list(dict.fromkeys(every))
    write_report(args.out, rows, list(tokenizers), speeds(unique, tokenizers, args.rdkit_sample))


if __name__ == "__main__":
    main()
