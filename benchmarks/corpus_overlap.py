"""Which molecules of each benchmark split a pretraining corpus holds, per corpus file (issue 26).

For every corpus file, its records are normalised as a pretraining run normalises them (canonical SMILES)
and compared with the held-out files ``polymask benchmark-heldout`` wrote: the table counts, per held-out
file (task and split) and corpus file, the unique held-out molecules found.

    polymask benchmark-heldout moleculenet --tasks esol freesolv lipophilicity bbbp bace clintox tox21 hiv \\
        sider muv toxcast --out runs/heldout-moleculenet
    python benchmarks/corpus_overlap.py --heldout runs/heldout-moleculenet --processes 2 \\
        --corpus /work/shared/data/smiles/moses_train.csv.gz /work/shared/data/moleculenet/chembl_5thresh.csv.gz \\
        --out docs/results/moleculenet-scale

Writes ``<out>/overlap.json`` and ``overlap.md``.
"""
from __future__ import annotations

import argparse
import multiprocessing
from itertools import islice
from pathlib import Path
from typing import Iterator

from polymask.data.exclusions import exclusion_files, load_exclusions
from polymask.data.readers import read_records
from polymask.data.records import normalize_record
from polymask.errors import InvalidRecord
from polymask.jsonio import make_dir, write_json, write_text
from polymask.modalities.smiles import Smiles

CHUNK = 20_000


def _normalised(texts: list[str]) -> set[str]:
    modality, found = Smiles(), set()
    for text in texts:
        try:
            found.add(normalize_record(modality, text))
        except InvalidRecord:
            continue
    return found


def _chunks(path: Path) -> Iterator[list[str]]:
    records = (r.text for r in read_records(path, None, Smiles.default_columns) if not r.error)
    while chunk := list(islice(records, CHUNK)):
        yield chunk


def overlap(corpus: list[Path], heldout: Path, processes: int) -> dict[str, dict[str, int]]:
    """held-out file name -> corpus file name -> unique held-out molecules that the corpus file holds."""
    held = load_exclusions(Smiles(), [heldout])
    table: dict[str, dict[str, int]] = {f.name: {} for f in exclusion_files([heldout])}
    with multiprocessing.Pool(processes) as pool:
        for path in corpus:
            molecules: set[str] = set()
            for found in pool.imap_unordered(_normalised, _chunks(path)):
                molecules |= found
            for file_name in table:
                table[file_name][path.name] = 0
            for molecule in molecules & held.keys():
                for file_name in held[molecule]:
                    table[file_name][path.name] += 1
            print(f"{path.name}: {len(molecules):,} unique molecules, {len(molecules & held.keys()):,} held out")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", nargs="+", type=Path, required=True, help="corpus files")
    parser.add_argument("--heldout", type=Path, required=True, help="folder written by polymask benchmark-heldout")
    parser.add_argument("--processes", type=int, default=2, help="normalising processes")
    parser.add_argument("--out", type=Path, required=True, help="folder for overlap.json and overlap.md")
    args = parser.parse_args()
    table = overlap(args.corpus, args.heldout, args.processes)
    sizes = {f.name: sum(1 for line in f.read_text().splitlines() if line.strip()) for f in exclusion_files([args.heldout])}
    make_dir(args.out)
    write_json(args.out / "overlap.json", {"corpus": [str(p) for p in args.corpus], "heldout_sizes": sizes,
                                           "overlap": table})
    names = [p.name for p in args.corpus]
    lines = ["| held-out split (unique molecules) | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    lines += [f"| {name} ({sizes[name]:,}) | " + " | ".join(f"{row[n]:,}" for n in names) + " |"
              for name, row in table.items()]
    write_text(args.out / "overlap.md", "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
