"""Does every objective learn on every modality? The check of issue 14 at full size.

For each (modality, objective): pretrain the mini encoder (4x256) with a short fixed recipe
(300 steps, batch 32, max length 128, lr 1e-3, warm-up 150, seed 0), then report the validation
masked accuracy next to the unigram accuracy (always predicting the most frequent token) and the
effective rank (tau 0.9) of every encoder layer on held-out sequences (``polymask analyze rank``).
A working objective beats the unigram accuracy by at least 0.03 with a rank of 10 or more in every
layer. The tests run the same check on the tiny encoder (tests/test_learning.py).

    python benchmarks/learning.py --out docs/results/learning
    python benchmarks/learning.py --modalities text --objectives exlm --set objective.transitions=sparse --tag sparse

Writes ``<out>/learning.json``, ``learning.md`` and ``learning.csv``; runs go to ``<out>/runs``. A
finished run is reused (delete its folder to redo it).
"""
from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path
from typing import Any

RECIPE = [
    "model.preset=mini", "data.max_len=128", "train.batch_size=32", "train.max_steps=300", "train.warmup_steps=150",
    "train.lr=1e-3", "train.seed=0", "train.eval_every=100", "train.save_every=100000",
]
MARGIN = 0.03
MIN_RANK = 10


def run_one(modality: str, objective: str, overrides: list[str], run_dir: Path) -> dict[str, Any]:
    """Pretrain (or reuse) one run and measure it."""
    from polymask.analysis.rank import measure_checkpoint
    from polymask.checkpoints.pretrained import read_checkpoint
    from polymask.config import apply_override, build_run_config
    from polymask.modalities import build_modality
    from polymask.training.trainer import train

    summary_path = run_dir / "summary.json"
    if summary_path.is_file():
        summary = json.loads(summary_path.read_text())
    else:
        raw: dict[str, Any] = {"modality": {"name": modality}, "objective": {"name": objective}, "out": str(run_dir)}
        for assignment in RECIPE + overrides:
            apply_override(raw, assignment)
        summary = train(build_run_config(raw))
    corpus = build_modality(read_checkpoint(run_dir).run_config.modality).corpus_paths()
    ranks = measure_checkpoint(run_dir, corpus, 0.9, None, 0, 32, 300, 4096)
    per_layer = [row["variance_rank"] for row in ranks["layers"] if row["kind"] == "unmasked"]
    # masked positions only: a kept token (MLM's 80/10/10) is copied from the input, not learned
    accuracy = summary.get("final_val_mask_accuracy", summary["final_val_accuracy"])
    unigram = summary["unigram_accuracy"]
    return {"modality": modality, "objective": objective, "overrides": overrides, "val_accuracy": accuracy,
            "unigram_accuracy": unigram, "ranks_per_layer": per_layer, "min_encoder_rank": min(per_layer[1:]),
            "learns": accuracy >= unigram + MARGIN and min(per_layer[1:]) >= MIN_RANK,
            "collapse_alarm": summary.get("collapsed"), "train_time_s": summary["train_time_s"],
            "run_dir": str(run_dir)}


def write_tables(rows: list[dict[str, Any]], out: Path) -> None:
    (out / "learning.json").write_text(json.dumps(rows, indent=1, allow_nan=False))
    with open(out / "learning.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[k for k in rows[0] if k != "ranks_per_layer"] + ["ranks_per_layer"])
        writer.writeheader()
        writer.writerows({**row, "ranks_per_layer": " ".join(map(str, row["ranks_per_layer"]))} for row in rows)
    lines = [f"Recipe: {' '.join(RECIPE)}. Pass: val accuracy >= unigram + {MARGIN} and effective rank (tau 0.9) "
             f">= {MIN_RANK} in every encoder layer (layer 0, the embeddings, is listed but not required).", "",
             "| modality | objective | settings | val masked accuracy | unigram accuracy | effective rank per layer "
             "(0 = embeddings) | learns | collapse alarm |", "|---|---|---|---:|---:|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['modality']} | {row['objective']} | {' '.join(row['overrides']) or 'defaults'} | "
                     f"{row['val_accuracy']:.4f} | {row['unigram_accuracy']:.4f} | "
                     f"{' / '.join(map(str, row['ranks_per_layer']))} | {'yes' if row['learns'] else 'NO'} | "
                     f"{'yes' if row['collapse_alarm'] else 'no'} |")
    (out / "learning.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modalities", default="text,dna,smiles", help="comma-separated modalities")
    parser.add_argument("--objectives", default="mlm,maelm,exlm", help="comma-separated objectives")
    parser.add_argument("--set", action="append", default=[], help="extra config override KEY=VALUE (repeatable)")
    parser.add_argument("--tag", default="", help="suffix of the run folders, for runs with overrides")
    parser.add_argument("--out", type=Path, default=Path("runs/learning"), help="folder for runs and tables")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    previous = json.loads((args.out / "learning.json").read_text()) if (args.out / "learning.json").is_file() else []
    rows = {(r["modality"], r["objective"], tuple(r["overrides"])): r for r in previous}
    for modality in args.modalities.split(","):
        for objective in args.objectives.split(","):
            name = f"{modality}-{objective}" + (f"-{args.tag}" if args.tag else "")
            row = run_one(modality, objective, args.set, args.out / "runs" / name)
            rows[(modality, objective, tuple(args.set))] = row
            print(json.dumps(row))
            write_tables(list(rows.values()), args.out)


if __name__ == "__main__":
    main()
