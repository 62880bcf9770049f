"""STS-B from frozen encoders: is a fine-tuning gap in the representation or in the fine-tuning? (issue 38)

Each sentence is encoded alone and mean-pooled (``embed``, as `polymask embed` does); the dev Pearson correlation of (a) the two sentences' cosine,
(b) a ridge regression on [|a - b|, a * b] fitted on the training pairs and (c) a ridge regression on the pair encoded
jointly, as fine-tuning encodes it ([CLS] a [SEP] b [SEP], mean-pooled), per checkpoint:

    python benchmarks/stsb_probe.py --glue /data/glue --checkpoint text-en-mlm-32m runs/text-gpu/models/text-corpus-maelm

``--split dev`` (the default) fits on GLUE's training file and scores GLUE dev, which polymask's GLUE benchmark uses
as its test split; ``--split valid`` fits on the benchmark's training part and scores its validation part (10% of
the training file, as ``polymask benchmark glue`` and ``polymask.load_task("glue/stsb")`` split it), where
settings may be chosen.
"""
from __future__ import annotations

import argparse
import csv
import gzip
from pathlib import Path

import numpy as np
import torch
from scipy.stats import pearsonr
from sklearn.linear_model import RidgeCV

import polymask
from polymask.builtin_models import checkpoint_path
from polymask.inference.model import PretrainedEncoder


def pairs(glue: Path, part: str) -> tuple[list[str], list[str], np.ndarray]:
    """STS-B's sentence pairs and scores of ``part`` (train or dev; the file may be gzipped)."""
    path = next(p for p in (glue / "STS-B" / f"{part}.tsv", glue / "STS-B" / f"{part}.tsv.gz") if p.is_file())
    with (gzip.open(path, "rt") if path.suffix == ".gz" else open(path)) as handle:
        rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    first, second, score = (rows[0].index(name) for name in ("sentence1", "sentence2", "score"))
    return [r[first] for r in rows[1:]], [r[second] for r in rows[1:]], np.array([float(r[score]) for r in rows[1:]])


def benchmark_pairs(glue: Path) -> tuple[tuple, tuple]:
    """STS-B's (train, valid) pairs and scores as the GLUE benchmark splits them."""
    task = polymask.load_task("glue/stsb", data_dir=glue)
    parts = []
    for split in (task.train, task.valid):
        first, second = zip(*split.inputs)
        parts.append((list(first), list(second), np.asarray(split.labels, dtype=float).ravel()))
    return parts[0], parts[1]


def probe(checkpoint, train: tuple, dev: tuple) -> tuple[float, float, float]:
    """Scored-split Pearson of (the cosine, the ridge probe on the two sentences, the ridge probe on the joint pair)."""
    single, joint = PretrainedEncoder(checkpoint), PretrainedEncoder(checkpoint)
    joint.input_columns = ["sentence1", "sentence2"]
    features = []
    for first, second, _ in (train, dev):
        a, b = single.embed(first), single.embed(second)
        cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
        features.append((np.hstack([np.abs(a - b), a * b]), joint.embed(list(zip(first, second))), cosine))
    separate = RidgeCV(alphas=[0.1, 1, 10, 100]).fit(features[0][0], train[2])
    together = RidgeCV(alphas=[0.1, 1, 10, 100]).fit(features[0][1], train[2])
    return (pearsonr(features[1][2], dev[2])[0], pearsonr(separate.predict(features[1][0]), dev[2])[0],
            pearsonr(together.predict(features[1][1]), dev[2])[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--glue", type=Path, required=True, help="GLUE folder holding STS-B/")
    parser.add_argument("--checkpoint", nargs="+", required=True, type=checkpoint_path)
    parser.add_argument("--split", choices=["dev", "valid"], default="dev",
                        help="dev: GLUE dev (the benchmark's test split); valid: the benchmark's validation part")
    args = parser.parse_args()
    torch.set_num_threads(1)
    train, dev = benchmark_pairs(args.glue) if args.split == "valid" else (pairs(args.glue, "train"),
                                                                            pairs(args.glue, "dev"))
    print(f"| checkpoint | cosine, {args.split} Pearson | ridge on [abs(a-b), a*b], {args.split} Pearson | "
          f"ridge on the joint pair, {args.split} Pearson |\n|---|---:|---:|---:|")
    for path in args.checkpoint:
        cosine, separate, joint = probe(polymask.load_checkpoint(path), train, dev)
        print(f"| {path.name} | {cosine:.3f} | {separate:.3f} | {joint:.3f} |")


if __name__ == "__main__":
    main()
