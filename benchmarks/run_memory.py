"""Whether a run's host memory and step time stay flat: reads the ``rss_mb`` and ``step_s`` fields of a run's
``metrics.jsonl`` and writes ``memory.md`` (a table per tenth of the run) and ``memory.png``.

    python benchmarks/run_memory.py runs/smiles-mlm-moses --out docs/results/moleculenet-scale
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from polymask.jsonio import atomic_path, make_dir, read_jsonl, write_text


def samples(run: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Steps, RSS (MiB) and step time (s) of the metrics lines that record them."""
    lines = [line for line in read_jsonl(run / "metrics.jsonl") if line.get("rss_mb") is not None
             and line.get("step_s") is not None]
    if not lines:
        raise SystemExit(f"{run}/metrics.jsonl records no rss_mb: the run predates polymask's memory trace")
    return (np.array([line["step"] for line in lines]), np.array([line["rss_mb"] for line in lines]),
            np.array([line["step_s"] for line in lines]))


def table(steps: np.ndarray, rss: np.ndarray, step_s: np.ndarray, parts: int = 10) -> list[str]:
    """Markdown rows: per tenth of the logged steps, the last RSS, the peak RSS and the median step time."""
    lines = ["| steps | RSS at the end (MiB) | peak RSS (MiB) | median step time (s) |", "|---|---:|---:|---:|"]
    for chunk in np.array_split(np.arange(len(steps)), parts):
        if len(chunk):
            lines.append(f"| {steps[chunk[0]]:,}-{steps[chunk[-1]]:,} | {rss[chunk[-1]]:,.0f} | {rss[chunk].max():,.0f} | "
                         f"{np.median(step_s[chunk]):.3f} |")
    return lines


def plot(path: Path, steps: np.ndarray, rss: np.ndarray, step_s: np.ndarray) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (top, bottom) = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    top.plot(steps, rss, linewidth=1)
    top.set_ylabel("resident memory (MiB)")
    window = max(1, len(step_s) // 50)
    bottom.plot(steps, step_s, linewidth=0.5, alpha=0.4, label="per metrics line")
    bottom.plot(steps[window - 1:], np.convolve(step_s, np.ones(window) / window, mode="valid"), linewidth=1.5,
                label=f"mean of {window} lines")
    bottom.set_ylabel("step time (s)")
    bottom.set_xlabel("step")
    bottom.legend(fontsize=7, frameon=False)
    figure.tight_layout()
    with atomic_path(path) as tmp:
        figure.savefig(tmp, dpi=120)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="run folder")
    parser.add_argument("--out", type=Path, required=True, help="folder for memory.md and memory.png")
    args = parser.parse_args()
    steps, rss, step_s = samples(args.run)
    make_dir(args.out)
    write_text(args.out / "memory.md", "\n".join([f"# Memory and step time of {args.run.name}", "",
                                                   *table(steps, rss, step_s), "", "![memory](memory.png)", ""]))
    plot(args.out / "memory.png", steps, rss, step_s)
    print(f"wrote {args.out / 'memory.md'} and memory.png ({len(steps):,} samples)")


if __name__ == "__main__":
    main()
