"""Benchmark-report sections about pretraining itself: every pretrained row against the same architecture
without pretraining (Welch's t-test on the per-seed task means), and the task means against the tokens each
checkpoint was pretrained on (a table, and ``scaling.png`` with a log axis when checkpoints differ in tokens)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from polymask.benchmarking.report import AVERAGED, average_groups, incomplete_rows, reference_row, seed_averages
from polymask.jsonio import atomic_path
from polymask.tasks.metrics.scoring import METRICS
from polymask.tasks.metrics.significance import NOISE_P, welch_verdict

BASELINE = "no pretraining"


def group_seed_means(rows: list[dict[str, Any]], tasks: list[str]) -> dict[str, dict[str, np.ndarray]]:
    """Per system and mean column (``average_groups``, or a metric's only task), the per-seed averages over the
    column's tasks."""
    metric_of = {r["task"]: r["metric"] for r in tasks_metrics(rows, tasks)}
    groups = average_groups(metric_of)
    for task, metric in metric_of.items():  # a metric of one task: its own column
        groups.setdefault(metric, [task])
    by_key = {(r["system"], r["task"]): r for r in rows}
    means: dict[str, dict[str, np.ndarray]] = {}
    for system in dict.fromkeys(r["system"] for r in rows):
        for name, members in groups.items():
            if all((system, t) in by_key for t in members):
                per_seed = seed_averages([by_key[(system, t)][f"{metric_of[t]}_values"] for t in members])
                if per_seed is not None:
                    means.setdefault(system, {})[name] = per_seed
    return means


def tasks_metrics(rows: list[dict[str, Any]], tasks: list[str]) -> list[dict[str, str]]:
    """Each task of ``tasks`` that has rows, with its primary metric, in task order."""
    metric_of = {r["task"]: r["metric"] for r in rows}
    return [{"task": t, "metric": metric_of[t]} for t in tasks if t in metric_of]


def _higher(name: str) -> bool:
    """Direction of a mean column: its metric's, or up for a benchmark score (GLUE)."""
    return METRICS[name].higher_is_better if name in METRICS else True


def _mean(values: np.ndarray) -> str:
    return "n/a" if np.isnan(values).any() else f"{values.mean():.3f} ± {values.std():.3f}"


def pretraining_sections(rows: list[dict[str, Any]], results: dict[str, Any], out: Path) -> list[str]:
    """Markdown lines of both sections (none when no row is a pretrained checkpoint); writes scaling.png."""
    tokens: dict[str, int] = {k: v for k, v in results.get("pretraining_tokens", {}).items() if v is not None}
    means = group_seed_means(rows, results["task_order"])
    for system in incomplete_rows(results):  # a partial report: no row's task average may leave tasks out
        means.pop(system, None)
    pretrained = [s for s in tokens if s in means]
    if not pretrained:
        return []
    groups = list(next(iter(means.values())))
    lines: list[str] = []
    if BASELINE in means:
        lines += ["", f"## Pretrained rows against {BASELINE}", "",
                  f"Each mean column's per-seed averages against those of the same architecture without pretraining: "
                  f"Welch's t-test, within noise when p >= {NOISE_P}; a '{AVERAGED.strip()}' row against the untrained "
                  f"row averaged alike, where the table has it.", "",
                  "| system | " + " | ".join(f"mean {g}" for g in groups) + " |", "|---|" + "---|" * len(groups)]
        for system in pretrained:
            reference, paired = reference_row(system, BASELINE, means)
            cells = []
            for name in groups:
                values, base = means[system].get(name), means[reference].get(name)
                if values is None or base is None:
                    cells.append("–")
                    continue
                verdict, p_value = welch_verdict(values, base, _higher(name), paired)
                shown_p = "" if math.isnan(p_value) else f", p = {p_value:.3f}"
                cells.append(f"{_mean(values)} vs {_mean(base)}: {verdict}{shown_p}")
            lines.append(f"| {system}{'' if reference == BASELINE else f' (vs {reference})'} | " + " | ".join(cells) + " |")
    lines += ["", "## Against pretraining tokens", "", "| system | pretraining tokens | " + " | ".join(f"mean {g}" for g in groups) + " |",
              "|---|---:|" + "---|" * len(groups)]
    for system in sorted(means, key=lambda s: (s not in tokens, tokens.get(s, 0))):
        shown = f"{tokens[system]:,}" if system in tokens else "–"
        lines.append(f"| {system} | {shown} | " + " | ".join(_mean(means[system][g]) if g in means[system] else "–"
                                                           for g in groups) + " |")
    if len({tokens[s] for s in pretrained}) >= 2:  # a curve needs two token counts
        _plot_scaling(out / "scaling.png", means, tokens, groups)
        lines += ["", "![task means against pretraining tokens](scaling.png)"]
    return lines


def _short_count(count: int) -> str:
    """6561490 -> '6.6M', 48000 -> '48k'."""
    for size, unit in ((10**9, "G"), (10**6, "M"), (10**3, "k")):
        if count >= size:
            return f"{count / size:.3g}{unit}"
    return str(count)


def _plot_scaling(path: Path, means: dict[str, dict[str, np.ndarray]], tokens: dict[str, int],
                  groups: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    figure, axes = plt.subplots(1, len(groups), figsize=(4.6 * len(groups), 3.6), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for axis, name in zip(axes.flat, groups):
        curve = sorted(((tokens[s], means[s][name]) for s in tokens  # averaged twins: the same models again
                        if s in means and name in means[s] and not s.endswith(AVERAGED)),
                       key=lambda point: point[0])
        x = [t for t, _ in curve]
        axis.errorbar(x, [v.mean() for _, v in curve], yerr=[v.std() for _, v in curve], marker="o", capsize=3,
                      color=colors[0], label="pretrained checkpoints")
        flat = [s for s in means if s not in tokens and name in means[s]]
        for index, system in enumerate(flat, start=1):
            value = means[system][name]
            axis.axhline(value.mean(), linestyle="--", color=colors[index % len(colors)], label=system)
            axis.axhspan(value.mean() - value.std(), value.mean() + value.std(), alpha=0.12,
                         color=colors[index % len(colors)])
        axis.set_xscale("log")
        axis.set_xticks(x, [_short_count(t) for t in x])  # each checkpoint's tokens, not colliding decades
        axis.xaxis.set_minor_formatter(NullFormatter())
        axis.set_xlabel("pretraining tokens")
        axis.set_title(f"mean {name} {'↑' if _higher(name) else '↓'}", fontsize=10)
    axes.flat[0].legend(fontsize=7, frameon=False)
    figure.tight_layout()
    with atomic_path(path) as tmp:
        figure.savefig(tmp, dpi=120)
    plt.close(figure)
