"""Masked-token accuracy of a DNA MLM checkpoint split by token kind: full k-mers against the single bases
that non-overlapping tokenization leaves at a sequence's end. A run's validation accuracy mixes the two, and
the single bases (a 4-way guess) can carry it while the k-mers (a 4^k-way guess) are hardly ever right.

    python benchmarks/dna_masked_accuracy.py runs/dna-gue-mlm tasks/dna/data/GUE/prom/prom_core_tata/dev.csv.gz

Each token of each sequence (every ``--stride``-th) is masked alone and predicted from the rest; the
result is one JSON line per token kind: the count, accuracy and cross-entropy (nats), beside the share of
the most frequent token of that kind there and the cross-entropy of a uniform guess over the 4^k k-mers.
"""
from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
from collections import Counter
from pathlib import Path

import torch

import polymask


def read_sequences(path: Path, limit: int) -> list[str]:
    """The first column of a GUE-style CSV (header, then sequence,label rows)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as handle:
        return [row[0] for row in list(csv.reader(handle))[1:limit + 1]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="run, checkpoint folder or built-in model name")
    parser.add_argument("sequences", type=Path, help="CSV of sequences (first column), e.g. a GUE dev file")
    parser.add_argument("--limit", type=int, default=200, help="sequences read (default: 200)")
    parser.add_argument("--stride", type=int, default=3, help="mask every N-th token (default: 3)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    checkpoint = polymask.load_checkpoint(args.checkpoint)
    objective = checkpoint.build_objective().eval()
    tokenizer = checkpoint.tokenizer
    mask = tokenizer.token_to_id("[MASK]")
    hits: Counter[int] = Counter()
    nats: Counter[int] = Counter()
    seen: dict[int, Counter[int]] = {}
    with torch.no_grad():
        for sequence in read_sequences(args.sequences, args.limit):
            encoding = tokenizer.encode(sequence)
            for position in range(1, len(encoding.ids) - 1, args.stride):
                kind = len(encoding.tokens[position])
                ids = torch.tensor([encoding.ids])
                ids[0, position] = mask
                logits = objective.head(objective.encoder(ids))[0, position].float()
                hits[kind] += int(logits.argmax()) == encoding.ids[position]
                nats[kind] += float(torch.logsumexp(logits, 0) - logits[encoding.ids[position]])
                seen.setdefault(kind, Counter())[encoding.ids[position]] += 1
    for kind, counts in sorted(seen.items()):
        total = sum(counts.values())
        print(json.dumps({"token": f"{kind}-mer" if kind > 1 else "single base", "count": total,
                          "accuracy": round(hits[kind] / total, 4), "cross_entropy": round(nats[kind] / total, 3),
                          "most_frequent_share": round(max(counts.values()) / total, 4),
                          "uniform_cross_entropy": round(kind * math.log(4), 3)}))


if __name__ == "__main__":
    main()
