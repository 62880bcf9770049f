"""Benchmark reports: a Markdown table (best per column in bold), a long CSV, JSON, and a PNG chart."""
from __future__ import annotations

import csv
import math
from collections import Counter
from pathlib import Path
from typing import Any, Collection

import numpy as np

from polymask.jsonio import atomic_path, write_json, write_text

ARROW = {True: "↑", False: "↓"}


#: The name of a row's test-time-averaged twin: its system's name plus this.
AVERAGED = " + test-time average"


def reference_row(system: str, baseline: str, systems: Collection[str]) -> tuple[str, bool]:
    """The row ``system`` is tested against for ``baseline``, and whether the test is paired: a test-time-averaged
    row against the baseline averaged alike where it has one (the averaging's gain is not pretraining's); a row
    against its own averaged twin (the same models, read two ways) paired by seed."""
    if system == baseline + AVERAGED or baseline == system + AVERAGED:
        return baseline, True
    if system.endswith(AVERAGED) and baseline + AVERAGED in systems:
        return baseline + AVERAGED, False
    return baseline, False


#: The mark of a test-time averaged score that is the single predictions' (the task's examples have no variants).
SAME = "="
SAME_NOTE = (f"{SAME}: the task's examples have no variants to average over (its spec declares no invariance), so "
             f"the test-time averaged model scores them as the row without averaging does.")


def _cell(row: dict[str, Any] | None, metric: str) -> str:
    if row is None:
        return "–"
    mean, std = row[f"{metric}_mean"], row[f"{metric}_std"]
    if math.isnan(mean):
        return "n/a"
    text = f"{mean:.3f} ± {std:.3f}" if row["seeds"] > 1 else f"{mean:.3f}"
    return f"{text} {SAME}" if row.get("no_variants") else text


def seed_averages(values: list[list[float]]) -> np.ndarray | None:
    """Per seed, the average over tasks of one metric (``values``: a list per task, in seed order; NaN where a
    task's score is undefined); None when the tasks do not share the same seeds."""
    if len({len(v) for v in values}) != 1:
        return None
    return np.array(values, dtype=float).mean(axis=0)


def cell_seconds(cells: list[dict[str, Any]]) -> float:
    """Fine-tuning time of benchmark cells in seconds, however many invocations computed them."""
    return sum(cell.get("time_s", 0.0) for cell in cells)


def duration(seconds: float) -> str:
    """A compute time in the unit that shows it: "4.2 s" under a minute, "12.3 min" under an hour, else "2.5 h"."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def precisions(cells: list[dict[str, Any]]) -> str:
    """The arithmetic the neural cells were fine-tuned in (``precision: auto`` differs between machines),
    e.g. "bf16 (12 cells)"; cells written before polymask recorded it are counted as not recorded. A test-time
    averaged row reuses its row's models and is not counted again."""
    counts = Counter(cell.get("precision", "not recorded") for cell in cells
                     if "best_epoch" in cell and not cell["system"].endswith(AVERAGED))  # no model of their own
    return ", ".join(f"{name} ({count} cell{'' if count == 1 else 's'})" for name, count in sorted(counts.items()))


def places(cells: list[dict[str, Any]]) -> str:
    """Where each row's fine-tuned cells ran, e.g. "mlm-seed0 (mlm): CPU: AMD EPYC, 1 thread (39 cells)"; rows
    that ran in one place are grouped, and cells written before polymask recorded it are counted as not recorded."""
    by_row: dict[str, Counter[str]] = {}
    for cell in cells:
        if "best_epoch" not in cell or cell["system"].endswith(AVERAGED):  # no model of its own
            continue
        threads = cell.get("threads")
        place = cell.get("device", "not recorded") + ("" if threads is None else
                                                        f", {threads} thread{'' if threads == 1 else 's'}")
        by_row.setdefault(cell["system"], Counter())[place] += 1
    grouped: dict[str, list[str]] = {}
    for row, counts in by_row.items():
        where = "; ".join(f"{place} ({count} cell{'' if count == 1 else 's'})" for place, count in sorted(counts.items()))
        grouped.setdefault(where, []).append(row)
    return " | ".join(f"{', '.join(rows)}: {where}" for where, rows in grouped.items())


def saved_models(cells: list[dict[str, Any]]) -> str:
    """How many fine-tuned models the cells saved and their total size, e.g. "12 fine-tuned models, 38.2 MB"."""
    saved = [cell["model_bytes"] for cell in cells if "model_dir" in cell]
    return f"{len(saved)} fine-tuned model{'' if len(saved) == 1 else 's'}, {sum(saved) / 1e6:.1f} MB"


def _saved_models_section(cells: list[dict[str, Any]]) -> list[str]:
    """A row per saved model folder (relative to the report), with its validation score's cell."""
    saved = [cell for cell in cells if "model_dir" in cell]
    if not saved:
        return []
    lines = ["", "## Fine-tuned models", "",
             f"{saved_models(cells)} in all: the model each cell chose on the validation split (model.safetensors, "
             f"finetuned.json, tokenizer). Apply one with `polymask predict --model FOLDER --data FILE --out "
             f"PRED.csv`, or `polymask.load_model(FOLDER)` in Python.", "",
             "| system | task | seed | folder | size (MB) |", "|---|---|---:|---|---:|"]
    lines += [f"| {c['system']} | {c['task']} | {c['seed']} | `{c['model_dir']}` | {c['model_bytes'] / 1e6:.2f} |"
              for c in saved]
    return lines


BENCHMARK_SCORES = {"glue": "glue score"}


def average_groups(metric_of: dict[str, str]) -> dict[str, list[str]]:
    """Mean columns (name -> the tasks averaged) for tasks with these primary metrics: one per metric shared by
    several tasks, and over several tasks of a benchmark with a conventional score (GLUE: the unweighted mean of
    each task's primary metric; the leaderboard also averages MRPC's and STS-B's second metrics)."""
    groups = {metric: [t for t, m in metric_of.items() if m == metric]
              for metric, count in Counter(metric_of.values()).items() if count > 1}
    benchmarks = {task.split("/", 1)[0] for task in metric_of}
    if len(metric_of) > 1 and len(benchmarks) == 1 and (score := BENCHMARK_SCORES.get(benchmarks.pop())):
        groups[score] = list(metric_of)
    return groups


def _task_average(rows: list[dict[str, Any]]) -> str:
    """Mean over tasks of each row's primary metric, ± the std over seeds of the per-seed task averages (when
    every task has the same seeds)."""
    per_seed = seed_averages([r[f"{r['metric']}_values"] for r in rows])
    if per_seed is None or len(per_seed) == 1:
        mean = float(np.mean([r[f"{r['metric']}_mean"] for r in rows]))
        partial = " (tasks with other seed counts)" if per_seed is None else ""  # an unfinished row
        return "n/a" if math.isnan(mean) else f"{mean:.3f}{partial}"
    return "n/a" if np.isnan(per_seed).any() else f"{per_seed.mean():.3f} ± {per_seed.std():.3f}"


def incomplete_rows(results: dict[str, Any]) -> set[str]:
    """Rows with cells not finished yet (a report written with ``finished_only``), and their test-time averaged
    twins: an average over their tasks would leave the unfinished ones out."""
    names = {cell["system"] for cell in results.get("unfinished", [])}
    return names | {name + AVERAGED for name in names}


def _main_table(rows: list[dict[str, Any]], systems: list[str], tasks: list[str],
                incomplete: Collection[str] = ()) -> list[str]:
    by_key = {(r["system"], r["task"]): r for r in rows}
    metrics = {r["task"]: (r["metric"], r["higher_is_better"]) for r in rows}
    tasks = [t for t in tasks if t in metrics]
    summaries = average_groups({t: metrics[t][0] for t in tasks})
    header = ["system"] + [f"{t.split('/')[-1]} {metrics[t][0]} {ARROW[metrics[t][1]]}" for t in tasks]
    header += [f"mean {name} {ARROW[metrics[members[0]][1]]}" for name, members in summaries.items()]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    best = {}
    for task in tasks:
        metric, higher = metrics[task]
        values = [(by_key[(s, task)][f"{metric}_mean"], s) for s in systems
                  if (s, task) in by_key and not by_key[(s, task)].get("no_variants")]
        values = [v for v in values if not math.isnan(v[0])]
        if values:
            best[task] = (max if higher else min)(values)[1]
    for system in systems:
        cells = []
        for task in tasks:
            text = _cell(by_key.get((system, task)), metrics[task][0])
            cells.append(f"**{text}**" if best.get(task) == system else text)
        for members in summaries.values():
            present = [by_key[(system, t)] for t in members if (system, t) in by_key]
            whole = len(present) == len(members) and system not in incomplete
            cells.append(_task_average(present) if whole else "–")
        lines.append(f"| {system} | " + " | ".join(cells) + " |")
    if any(row.get("no_variants") for row in rows):
        lines += ["", SAME_NOTE]
    return lines


def _further_metrics(rows: list[dict[str, Any]], systems: list[str], tasks: list[str]) -> list[str]:
    """A row per (task, metric other than the headline one), a column per system."""
    by_key = {(r["system"], r["task"]): r for r in rows}
    lines = []
    for task in tasks:
        present = [r for r in rows if r["task"] == task]
        if not present:
            continue
        for metric in [k[:-5] for k in present[0] if k.endswith("_mean") and k[:-5] != present[0]["metric"]]:
            cells = [_cell(by_key.get((system, task)), metric) for system in systems]
            lines.append(f"| {task} | {metric} | " + " | ".join(cells) + " |")
    if not lines:
        return []
    return ["", "## Further metrics", "", "| task | metric | " + " | ".join(systems) + " |",
            "|" + "---|" * (len(systems) + 2)] + lines


def _plot(path: Path, rows: list[dict[str, Any]], systems: list[str], tasks: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = [t for t in tasks if any(r["task"] == t for r in rows)]
    columns = min(4, len(tasks))
    lines = math.ceil(len(tasks) / columns)
    figure, axes = plt.subplots(lines, columns, figsize=(3.4 * columns, 2.9 * lines), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    by_key = {(r["system"], r["task"]): r for r in rows}
    for axis, task in zip(axes.flat, tasks):
        row0 = next(r for r in rows if r["task"] == task)
        metric = row0["metric"]
        present = [s for s in systems if (s, task) in by_key]
        means = [by_key[(s, task)][f"{metric}_mean"] for s in present]
        stds = [by_key[(s, task)][f"{metric}_std"] for s in present]
        axis.bar(range(len(present)), means, yerr=stds, capsize=3,
                 color=[colors[systems.index(s) % len(colors)] for s in present])
        axis.set_title(f"{task.split('/')[-1]} ({metric} {ARROW[row0['higher_is_better']]})", fontsize=9)
        axis.set_xticks([])
        finite = [m for m in means if not math.isnan(m)]
        if finite:
            low = min(m - s for m, s in zip(means, stds) if not math.isnan(m))
            high = max(m + s for m, s in zip(means, stds) if not math.isnan(m))
            margin = 0.15 * (high - low or 1.0)
            axis.set_ylim(max(0.0, low - margin), high + margin)
    for axis in list(axes.flat)[len(tasks):]:
        axis.axis("off")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[i % len(colors)]) for i in range(len(systems))]
    figure.legend(handles, systems, loc="lower center", ncol=min(len(systems), 3), fontsize=8, frameon=False)
    figure.tight_layout(rect=(0, 0.06 + 0.03 * math.ceil(len(systems) / 3), 1, 1))
    with atomic_path(path) as tmp:
        figure.savefig(tmp, dpi=120)
    plt.close(figure)


def _validation_section(valid_rows: list[dict[str, Any]], systems: list[str], tasks: list[str],
                        incomplete: Collection[str]) -> list[str]:
    """The same table on the validation splits: what settings, checkpoints and recipes are chosen on."""
    if not valid_rows:
        return []
    return ["", "## Validation scores", "",
            "The validation split of each task at the epoch each cell chose (mean ± std over seeds): choose "
            "checkpoints and fine-tuning settings on these, never on the table above.", ""] + _main_table(
        valid_rows, systems, tasks, incomplete)


def _epochs_by_seed(group: list[dict[str, Any]]) -> str:
    """The epochs each seed ran and the epoch it kept ("14, 21 | 6, 13"), or dashes for a row that trains no epochs."""
    if not all("best_epoch" in cell for cell in group):
        return "– | –"
    return " | ".join(", ".join(str(cell[key]) for cell in group) for key in ("epochs_run", "best_epoch"))


def _compute_section(cells: list[dict[str, Any]], systems: list[str], tasks: list[str]) -> list[str]:
    """Fine-tuning time per task and row (summed over seeds) and, for a neural row, the epochs each seed ran and
    the epoch it kept: where the compute went, and whether early stopping cut seeds short (a test-time averaged
    row reads its row's models, so it has no line of its own)."""
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for cell in sorted(cells, key=lambda c: c["seed"]):
        by_key.setdefault((cell["task"], cell["system"]), []).append(cell)
    lines = [f"| {task} | {system} | {len(group)} | {duration(cell_seconds(group))} | {_epochs_by_seed(group)} |"
             for task in tasks for system in systems
             if not system.endswith(AVERAGED) and (group := by_key.get((task, system)))]
    if not lines:
        return []
    return ["", "## Compute", "", "Fine-tuning time of each task's cells (summed over seeds); epochs run and the "
            "epoch kept, by seed.", "", "| task | system | seeds | fine-tuning time | epochs run | best epoch |",
            "|---|---|---:|---:|---|---|", *lines]


def _skipped_rows_section(details: dict[str, dict], tasks: list[str]) -> list[str]:
    """The first skipped rows of each task, by file and line (results.json keeps the same)."""
    lines = [f"- {task}: {example['source']}:{example['line']}: {example['reason']}"
             for task in tasks for example in (details.get(task) or {}).get("skipped_examples", [])]
    return ["", "Skipped rows (the first of each task):", ""] + lines if lines else []


def _unfinished_note(unfinished: list[dict[str, Any]], total: int) -> list[str]:
    """The cells not finished yet, by system and task (a report written with ``finished_only``)."""
    if not unfinished:
        return []
    seeds: dict[tuple[str, str], list[int]] = {}
    for cell in unfinished:
        seeds.setdefault((cell["system"], cell["task"]), []).append(cell["seed"])
    return ([f"**Partial:** {total - len(unfinished)} of {total} cells finished (the rows cover those only; a row "
             f"with cells still to run gets no task mean and no test against the untrained row). Not finished:", ""]
            + [f"- {task} | {system} | seeds {', '.join(map(str, numbers))}" for (system, task), numbers in seeds.items()]
            + [""])


def write_report(out: Path, title: str, rows: list[dict[str, Any]], results: dict[str, Any],
                 settings: dict[str, Any], valid_rows: list[dict[str, Any]] | None = None,
                 sections: list[str] | None = None) -> Path:
    """Write results.md, results.csv, results.json and results.png under ``out`` (with ``valid_rows``, the
    validation scores too; ``sections``: further Markdown lines after the main tables)."""
    systems = list(results["systems"])
    tasks = results["task_order"]
    lines = [f"# {title}", "",
             f"Scores on each task's evaluation set (Tasks: evaluated on) at the best validation epoch, mean ± std "
             f"over seeds {results['seeds']}; "
             f"best per column in bold; a mean column averages the tasks of one metric, or GLUE's tasks (± the std over seeds of the "
             f"per-seed averages). Wall time {results['wall_time_s']} s (cells run in this invocation); fine-tuning compute "
             f"{duration(cell_seconds(results['cells']))} summed over all cells.", ""]
    lines += _unfinished_note(results.get("unfinished", []), results.get("cells_total", 0))
    used = precisions(results["cells"])
    ran = places(results["cells"])
    lines += [f"- {key}: {value}" for key, value in settings.items()] + ([f"- precision used: {used}"] if used else [])
    lines += [f"- where the rows ran: {ran}"] if ran else []
    lines += [""]
    incomplete = incomplete_rows(results)
    if rows:
        lines += _main_table(rows, systems, tasks, incomplete) + _further_metrics(rows, systems, tasks)
    else:
        lines += ["No cell has finished yet."]
    lines += sections or []
    lines += _validation_section(valid_rows or [], systems, tasks, incomplete)
    lines += ["", "## Tasks", "", "| task | split | evaluated on | metric | train / valid / test | rows skipped "
              "(invalid or unlabelled) | duplicates removed | truncated |", "|---|---|---|---|---|---|---|---|"]
    for task in tasks:
        detail = results["tasks"].get(task)
        row = next((r for r in rows if r["task"] == task), None)
        if detail and row:
            lines.append(f"| {task} | {detail['split']} | {detail['evaluated_on']} | {detail['metric']} "
                         f"| {row['n_train']} / {row['n_valid']} / "
                         f"{row['n_test']} | {detail['skipped']} | {detail['duplicates_removed']} | {row['truncated']} |")
    lines += _skipped_rows_section(results["tasks"], tasks)
    lines += _compute_section(results["cells"], systems, tasks)
    lines += ["", "## Systems", ""] + [f"- **{name}**: {text}" for name, text in results["systems"].items()]
    lines += _saved_models_section(results["cells"])
    if results["missing"]:
        lines += ["", "## Missing tasks (not run)", ""] + [f"- {k}: {v}" for k, v in results["missing"].items()]
    write_text(out / "results.md", "\n".join(lines) + "\n")
    with atomic_path(out / "results.csv") as tmp, open(tmp, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["system", "task", "metric", "mean", "std", "seeds", "values", "split", "n_train", "n_valid",
                         "n_test", "skipped", "truncated"])
        for row in rows:
            for name in [k[:-5] for k in row if k.endswith("_mean")]:
                writer.writerow([row["system"], row["task"], name, row[f"{name}_mean"], row[f"{name}_std"], row["seeds"],
                                 ";".join(f"{v:.6g}" for v in row[f"{name}_values"]), row["split"], row["n_train"],
                                 row["n_valid"], row["n_test"], row["skipped"], row["truncated"]])
    write_json(out / "results.json", {"title": title, "settings": settings, "rows": rows,
                                      "valid_rows": valid_rows or [], **results}, default=str)
    if rows:
        _plot(out / "results.png", rows, systems, tasks)
    else:  # an earlier report's plot is not this one's
        (out / "results.png").unlink(missing_ok=True)
    return out / "results.md"
