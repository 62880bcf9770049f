"""Metrics as JSON lines, and the end-of-run summary (JSON + a printed table)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from polymask.jsonio import append_jsonl, dumps, read_jsonl, write_json, write_text
from polymask.tracking import Reporter, Reporters


class MetricsLog:
    """Appends one JSON object per line to ``metrics.jsonl``, and sends its numbers to ``reporter`` (the run's
    experiment trackers, see ``polymask.tracking``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.reporter: Reporter = Reporters()

    def write(self, record: dict[str, Any]) -> None:
        append_jsonl(self.path, record)
        self.reporter.log(record, record["step"])

    def truncate_after(self, step: int) -> None:
        """Drop lines logged after ``step`` (a resumed run writes them again), and any torn line."""
        if not self.path.is_file():
            return
        kept = [record for record in read_jsonl(self.path) if isinstance(record.get("step"), int) and record["step"] <= step]
        write_text(self.path, "".join(dumps(record) + "\n" for record in kept))


# What the two clocks of a summary cover: after a --resume, train_time_s can exceed wall_time_s.
TIME_NOTE = ("train_time_s: seconds spent in training steps, summed over every invocation of the run (resumed ones "
             "included; evaluation and checkpoints not counted; tokens_per_s divides by it). wall_time_s: this "
             "invocation only, from its first step to this summary, evaluation and checkpoints included")
TIME_LABELS = {"train_time_s": "train_time_s (training steps, every invocation of the run)",
               "wall_time_s": "wall_time_s (this invocation, evaluation and checkpoints included)"}


def write_summary(path: Path, summary: dict[str, Any]) -> None:
    """Save a run's summary as JSON at ``path`` and print it as a table (``format_summary``)."""
    write_json(path, summary)
    print(format_summary(summary))


def format_summary(summary: dict[str, Any]) -> str:
    """The summary as a two-column Markdown table."""
    rows = [(key, value) for key, value in summary.items()
            if key not in ("skipped_examples", "skipped_by_reason", "changed_by_step", "held_out_by_file", "collapse",
                           "memory", "time_note")]
    lines = ["| metric | value |", "|---|---|"]
    for key, value in rows:
        shown = f"{value:.4f}" if isinstance(value, float) and key.endswith(("loss", "accuracy")) else value
        lines.append(f"| {TIME_LABELS.get(key, key)} | {shown} |")
    if summary.get("collapsed"):
        lines.append("")
        accuracy = summary.get("final_val_mask_accuracy", summary["final_val_accuracy"])
        lines.append("WARNING: this run has collapsed (see 'collapse' in summary.json): "
                     f"val masked accuracy {accuracy:.4f} against the unigram accuracy "
                     f"{summary['unigram_accuracy']:.4f}, effective rank {summary['final_val_rank']} of the final "
                     "hidden states. The encoder is not learning from context; see docs/collapse.md.")
    if summary["skipped_records"]:
        lines.append("")
        lines.append(f"{summary['skipped_records']} invalid records skipped (all listed in skipped_records.jsonl), e.g.:")
        lines.extend(f"  {e['source']}:{e['line']}: {e['reason']}" for e in summary["skipped_examples"][:5])
        lines.append("by reason:")
        lines.extend(f"  {count:,} {kind}" for kind, count in sorted(summary.get("skipped_by_reason", {}).items(),
                                                                    key=lambda item: -item[1]))
    if summary.get("held_out_by_file"):
        lines.append("")
        lines.append(f"{summary['held_out_records']:,} records held out of the corpus (data.exclude), per file: " + ", ".join(
            f"{name} {count:,}" for name, count in summary["held_out_by_file"].items()))
    memory = summary.get("memory") or {}
    if memory.get("rss_growth_mb") is not None:
        lines.append("")
        lines.append(f"memory: peak RSS {memory['peak_rss_mb']:,.0f} MiB; from step {memory['settled_from_step']:,} to the "
                     f"end RSS {memory['rss_mb_settled']:,.0f} -> {memory['rss_mb_last']:,.0f} MiB "
                     f"({memory['rss_growth_mb']:+,.0f}), step time {memory['step_s_settled']:.3f} -> "
                     f"{memory['step_s_last']:.3f} s (this invocation)")
    if summary.get("changed_by_step"):
        lines.append("")
        lines.append("records changed by each normalisation step: " + ", ".join(
            f"{step} {count:,}" for step, count in summary["changed_by_step"].items()))
    return "\n".join(lines)
