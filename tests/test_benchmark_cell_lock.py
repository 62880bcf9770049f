"""Two benchmark processes on one folder share its cells: a cell another process is running is skipped,
then waited for and read, never run twice."""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from polymask.locks import acquire
from polymask.modalities import MODALITIES
from polymask.tasks.benchmark.runner import run_cells
from polymask.tasks.benchmark.systems import System
from polymask.tracking import TrackedRun

TASK = "dna/ecoli_promoters"


def counting_system(calls: list[int]) -> System:
    """A system whose cells only record their seed and return a fixed score."""

    def run(task: Any, seed: int, model_dir: Path, tracked: TrackedRun) -> dict[str, Any]:
        calls.append(seed)
        return {"task": TASK, "seed": seed, "metric": "mcc", "test": {"mcc": 0.5}, "split": "predefined",
                "n_train": 1, "n_valid": 1, "n_test": 1, "skipped": 0, "truncated": 0}

    dna = MODALITIES.get("dna")
    return System("counting", "records its seeds", dna(dna.Config(name="dna")), run)


def test_a_cell_held_by_another_process_is_waited_for_and_read_not_rerun(tmp_path: Path) -> None:
    calls: list[int] = []
    system = counting_system(calls)
    held = tmp_path / "cells" / "counting" / "dna-ecoli_promoters" / "seed-0.json"
    held.parent.mkdir(parents=True)
    other = acquire(held.with_suffix(".lock"), lambda owner: owner)  # the "other process" runs seed 0
    results: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: results.update(run_cells([system], [TASK], [0, 1], tmp_path,
                                                                      progress=False)))
    worker.start()
    deadline = time.monotonic() + 60
    while not (held.parent / "seed-1.json").is_file() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    assert worker.is_alive(), "run_cells returned without the cell another process holds"
    assert calls == [1]
    held.write_text(json.dumps({"system": "counting", "task": TASK, "seed": 0, "metric": "mcc",
                                "test": {"mcc": 0.9}, "split": "predefined", "n_train": 1, "n_valid": 1,
                                "n_test": 1, "skipped": 0, "truncated": 0}))
    other.release()
    worker.join(timeout=60)
    assert not worker.is_alive()
    assert calls == [1]
    assert [(cell["seed"], cell["test"]["mcc"]) for cell in results["cells"]] == [(0, 0.9), (1, 0.5)]


def test_a_lock_left_by_a_finished_process_does_not_block(tmp_path: Path) -> None:
    calls: list[int] = []
    system = counting_system(calls)
    stale = tmp_path / "cells" / "counting" / "dna-ecoli_promoters" / "seed-0.lock"
    stale.parent.mkdir(parents=True)
    stale.write_text("process 1 (killed)\n")
    results = run_cells([system], [TASK], [0], tmp_path, progress=False)
    assert calls == [0] and len(results["cells"]) == 1
    assert not stale.exists()
