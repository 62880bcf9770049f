"""Plot validation curves of polymask runs side by side: ``python plot_curves.py OUT.png RUN [RUN ...]``.

Each RUN is a run folder holding ``metrics.jsonl``; the panel titles name the objective (read from
the checkpoint config), because the losses of different objectives are different quantities.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def validation_points(run: Path) -> list[dict]:
    lines = (json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines())
    return [line for line in lines if "val_loss" in line]


def main(out: Path, runs: list[Path]) -> None:
    figure, (loss_axis, accuracy_axis) = plt.subplots(1, 2, figsize=(10, 4))
    for run in runs:
        points = validation_points(run)
        steps = [p["step"] for p in points]
        loss_axis.plot(steps, [p["val_loss"] for p in points], marker=".", label=run.name)
        accuracy_axis.plot(steps, [p["val_accuracy"] for p in points], marker=".", label=run.name)
    loss_axis.set(xlabel="step", ylabel="validation loss (objective's own)", yscale="log")
    accuracy_axis.set(xlabel="step", ylabel="validation masked-token accuracy")
    for axis in (loss_axis, accuracy_axis):
        axis.legend(fontsize=8)
        axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(out, dpi=120)


if __name__ == "__main__":
    main(Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]])
