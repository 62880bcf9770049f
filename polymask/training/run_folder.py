"""What a run folder already holds, and what a new invocation may do with it: a used ``--out`` is never
reused silently. A run is refused there unless it resumes (``--resume``) or starts over (``--overwrite``,
which removes the old run's files before anything new is written); ``--resume auto`` resumes when there is a
checkpoint, leaves a finished run as it is, and otherwise starts the run."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Literal

from polymask.errors import OutputError

#: What a new run does with a folder that holds one: refuse, resume it, or remove it first.
Existing = Literal["refuse", "resume", "overwrite"]
#: The files a run writes, its trackers' logs included (anything else in the folder, e.g. a plan or the user's
#: notes, is left alone).
RUN_FILES = ("checkpoints", "metrics.jsonl", "summary.json", "skipped_records.jsonl", "tensorboard", "wandb")


def held_run(run_dir: Path) -> list[str]:
    """The run files ``run_dir`` holds (an empty ``checkpoints/`` folder does not count)."""
    found = []
    for name in RUN_FILES:
        path = run_dir / name
        if path.is_dir() and any(path.iterdir()) or path.is_file():
            found.append(name)
    return found


def claim_run_folder(run_dir: Path, existing: Existing) -> None:
    """Make ``run_dir`` ready for a run (its lock already held): refuse one that holds a run, in one line, or
    remove the old run's files (``overwrite``), or leave them to be resumed."""
    found = held_run(run_dir)
    if not found or existing == "resume":
        return
    if existing == "refuse":
        raise OutputError(f"{run_dir} already holds a run ({', '.join(found)}); continue it with --resume {run_dir} "
                          f"(or --resume auto), or start a new run there with --overwrite (its files are removed)")
    for name in found:
        path = run_dir / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def finished_summary(run_dir: Path, max_steps: int) -> dict[str, Any] | None:
    """The summary of a run in ``run_dir`` that completed ``max_steps`` and saved its last step, else None."""
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    done = (isinstance(summary, dict) and summary.get("status") == "completed" and summary.get("steps") == max_steps
            and summary.get("checkpoint_step") == max_steps)
    return summary if done else None


def resume_point(run_dir: Path) -> Path | None:
    """``run_dir`` when it holds a checkpoint to resume from, else None."""
    return run_dir if (run_dir / "checkpoints" / "latest.json").is_file() else None
