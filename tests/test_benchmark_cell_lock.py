"""Two benchmark processes on one folder share its cells: a cell another process is running is skipped,
then waited for and read, never run twice; a finished cell is reused only when it would be run the same way."""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from polymask.benchmarking.runner import aggregate, run_benchmark, run_cells
from polymask.benchmarking.systems import System
from polymask.cli import main
from polymask.errors import ConfigError
from polymask.locks import acquire
from polymask.modalities import MODALITIES
from polymask.tracking import TrackedRun

TASK = "dna/ecoli_promoters"


def counting_system(calls: list[int], lr: float = 1e-3) -> System:
    """A system whose cells only record their seed and return a fixed score; ``lr`` stands for its settings."""

    def run(task: Any, seed: int, model_dir: Path, tracked: TrackedRun) -> dict[str, Any]:
        calls.append(seed)
        return {"task": task.spec.key, "seed": seed, "metric": "mcc", "valid": {"mcc": 0.5}, "test": {"mcc": 0.5},
                "split": "predefined", "n_train": 1, "n_valid": 1, "n_test": 1, "skipped": 0, "truncated": 0}

    dna = MODALITIES.get("dna")
    return System("counting", "records its seeds", dna(dna.Config(name="dna")), run,
                  identity=lambda task_name: {"finetune": {"lr": lr}})


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
    held.write_text(json.dumps({"system": "counting", "task": TASK, "seed": 0, "metric": "mcc", "valid": {"mcc": 0.9},
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


def test_a_finished_cell_is_reused_only_when_run_the_same_way(tmp_path: Path) -> None:
    calls: list[int] = []
    run_cells([counting_system(calls)], [TASK], [0], tmp_path, progress=False)
    run_cells([counting_system(calls)], [TASK], [0], tmp_path, progress=False)
    assert calls == [0]  # the second run reused the cell
    cell = tmp_path / "cells" / "counting" / "dna-ecoli_promoters" / "seed-0.json"
    with pytest.raises(ConfigError, match=r"seed-0.json was run otherwise \(system.finetune.lr: then 0.001, now "
                                          r"0.0002\); give another --out, or delete"):
        run_cells([counting_system(calls, lr=2e-4)], [TASK], [0], tmp_path, progress=False)
    kept = json.loads(cell.read_text())
    examples = kept["identity"]["data"]["test"]["examples"]
    kept["identity"]["data"]["test"]["examples"] += 1  # the task's file changed since
    cell.write_text(json.dumps(kept))
    with pytest.raises(ConfigError, match=rf"\(data.test.examples: then {examples + 1}, now {examples}\)"):
        run_cells([counting_system(calls)], [TASK], [0], tmp_path, progress=False)
    del kept["identity"]  # a cell from before identities were kept is trusted
    cell.write_text(json.dumps(kept))
    assert run_cells([counting_system(calls, lr=2e-4)], [TASK], [0], tmp_path, progress=False)["cells"][0]["seed"] == 0
    assert calls == [0]


def test_a_cell_written_before_a_setting_existed_is_reused_while_the_setting_keeps_its_default(tmp_path: Path) -> None:
    calls: list[int] = []

    def system(finetune: dict[str, Any]) -> System:
        plain = counting_system(calls)
        plain.identity = lambda task_name: {"finetune": finetune}
        return plain

    run_cells([system({"lr": 1e-3})], [TASK], [0], tmp_path, progress=False)  # before test_time_average existed
    run_cells([system({"lr": 1e-3, "test_time_average": False})], [TASK], [0], tmp_path, progress=False)
    assert calls == [0]
    with pytest.raises(ConfigError, match="finetune.test_time_average: then None, now True"):
        run_cells([system({"lr": 1e-3, "test_time_average": True})], [TASK], [0], tmp_path, progress=False)


def test_the_data_identity_is_the_content_not_where_the_file_lies(tmp_path: Path, monkeypatch) -> None:
    from polymask.benchmarking.identity import data_identity
    from polymask.tasks.data.loading import load_task
    from polymask.tasks.data.own_table import own_task_spec

    smiles = MODALITIES.get("smiles")()

    def own_table_task(path: Path, targets: list[str], column: str) -> Any:
        return load_task(own_task_spec(path, targets, smiles, column, split="random"), smiles)  # acyclic: one scaffold

    table = "smiles,y\n" + "".join(f"{'C' * n}O,{n}\n" for n in range(1, 40))
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "sol.csv").write_text(table)
    (tmp_path / "b.csv").write_text(table)
    monkeypatch.chdir(tmp_path)
    first = data_identity(own_table_task(Path("a/sol.csv"), ["y"], "smiles"))
    assert first == data_identity(own_table_task(tmp_path / "a" / "sol.csv", ["y"], "smiles"))
    assert first["train"] == data_identity(own_table_task(Path("b.csv"), ["y"], "smiles"))["train"]


def test_a_waiter_never_locks_a_lock_file_its_holder_removed(tmp_path: Path) -> None:
    """A cell's holder removes its lock file when done; a process that was waiting on the removed file must not
    run beside one that has since locked the new file at the same path."""
    path = tmp_path / "seed-0.lock"
    first = acquire(path, str)
    got: list[str] = []
    waiter = threading.Thread(target=lambda: got.append(acquire(path, str, wait=True).path.name))
    waiter.start()
    time.sleep(0.3)
    path.unlink()
    newcomer = acquire(path, str)  # a new process: creates and locks a new file there
    first.release()
    waiter.join(timeout=0.5)
    assert waiter.is_alive() and got == [], "the waiter took the removed file's lock while the newcomer holds the path"
    newcomer.release()
    waiter.join(timeout=10)
    assert got == ["seed-0.lock"]


def test_two_rows_that_would_share_cells_are_refused(tmp_path: Path) -> None:
    calls: list[int] = []
    with pytest.raises(ConfigError, match="two rows named 'counting' would share their cells: records its seeds and "
                                          "records its seeds; give each checkpoint once"):
        run_cells([counting_system(calls), counting_system(calls)], [TASK], [0], tmp_path, progress=False)
    assert calls == []


@pytest.mark.parametrize("content, why", [("", "unreadable"), ('{"system": "x", "te', "unreadable"),
                                          ("[1, 2]", "no valid task, metric, valid, test"),
                                          ('{"identity": 5}', "no valid task"),
                                          ('{"task": "t", "metric": "mcc", "valid": {}, "test": {}, "identity": 5}',
                                           "its identity is not an object")])
def test_a_damaged_cell_is_one_line_naming_it(tmp_path: Path, content: str, why: str) -> None:
    cell = tmp_path / "cells" / "counting" / "dna-ecoli_promoters" / "seed-0.json"
    cell.parent.mkdir(parents=True)
    cell.write_text(content)
    with pytest.raises(ConfigError, match=rf"seed-0.json is not a benchmark cell \({why}.*delete it, and the folder "
                                          rf"seed-0/ beside it"):
        run_cells([counting_system([])], [TASK], [0], tmp_path, progress=False)


def test_a_model_left_by_an_earlier_run_of_the_cell_is_removed_before_it_runs(tmp_path: Path) -> None:
    stale = tmp_path / "cells" / "counting" / "dna-ecoli_promoters" / "seed-0"
    stale.mkdir(parents=True)
    (stale / "finetuned.json").write_text("{}")  # from a run with other settings, whose cell file was deleted
    cells = run_cells([counting_system([])], [TASK], [0], tmp_path, progress=False)["cells"]
    assert not stale.exists() and "model_dir" not in cells[0]


def test_weights_keys_recorded_since_a_cell_was_written_are_trusted_but_a_changed_one_is_not(tmp_path: Path) -> None:
    calls: list[int] = []

    def system(weights: dict[str, Any]) -> System:
        plain = counting_system(calls)
        plain.identity = lambda task_name: {"weights": weights, "finetune": {"lr": 1e-3}}
        return plain

    run_cells([system({"sha256": "w"})], [TASK], [0], tmp_path, progress=False)  # before tokenizers were hashed
    run_cells([system({"sha256": "w", "tokenizer": "t1"})], [TASK], [0], tmp_path, progress=False)
    assert calls == [0]
    (tmp_path / "cells" / "counting" / "dna-ecoli_promoters" / "seed-0.json").unlink()
    run_cells([system({"sha256": "w", "tokenizer": "t1"})], [TASK], [0], tmp_path, progress=False)
    with pytest.raises(ConfigError, match="system.weights.tokenizer: then 't1', now 't2'"):
        run_cells([system({"sha256": "w", "tokenizer": "t2"})], [TASK], [0], tmp_path, progress=False)


def test_a_reused_cell_counts_under_its_row_s_name_now(tmp_path: Path) -> None:
    """A row whose name changed only in what its folder's name drops (a run folder renamed 'Counting' ->
    'counting') reuses its cells, and the table counts them under the name it has now, not as a row of its own
    that the table leaves out."""
    calls: list[int] = []
    before, now = counting_system(calls), counting_system(calls)
    before.name = "Counting (MLM)"
    now.name = "counting (mlm)"
    run_cells([before], [TASK], [0], tmp_path, progress=False)
    for finished_only in (False, True):
        results = run_cells([now], [TASK], [0, 1], tmp_path, progress=False, finished_only=finished_only)
        assert {cell["system"] for cell in results["cells"]} == {"counting (mlm)"}
    assert calls == [0, 1]
    assert [(row["system"], row["seeds"]) for row in aggregate(results)] == [("counting (mlm)", 2)]


def test_finished_only_reports_the_finished_cells_runs_none_and_lists_the_rest(tmp_path: Path) -> None:
    calls: list[int] = []
    tasks = [TASK, "dna/splice"]
    run_cells([counting_system(calls)], tasks, [0], tmp_path, progress=False)
    running = tmp_path / "cells" / "counting" / "dna-ecoli_promoters" / "seed-1.lock"
    other = acquire(running, lambda owner: owner)  # another process is running seed 1: not waited for
    report = run_benchmark([counting_system(calls)], tasks, [0, 1, 2], tmp_path, "partial", progress=False,
                           finished_only=True)
    other.release()
    assert calls == [0, 0]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["unfinished"] == [{"system": "counting", "task": task, "seed": seed}
                                     for task in tasks for seed in (1, 2)]
    assert [(row["task"], row["seeds"], row["mcc_values"]) for row in results["rows"]] == [(TASK, 1, [0.5]),
                                                                                          ("dna/splice", 1, [0.5])]
    text = report.read_text()
    assert "**Partial:** 2 of 6 cells finished" in text and f"- {TASK} | counting | seeds 1, 2" in text
    assert "| counting | **0.500** | **0.500** | – |" in text  # no task mean over a row with cells to come
    run_cells([counting_system(calls)], tasks, [0, 1, 2], tmp_path, progress=False)
    text = run_benchmark([counting_system(calls)], tasks, [0, 1, 2], tmp_path, "done", progress=False,
                         finished_only=True).read_text()
    assert calls == [0, 0, 1, 2, 1, 2]
    assert "Partial" not in text and "| counting | **0.500 ± 0.000** | **0.500 ± 0.000** | 0.500 ± 0.000 |" in text
    assert json.loads((tmp_path / "results.json").read_text())["unfinished"] == []


def test_finished_only_with_no_cells_refuses_a_folder_without_any_and_says_when_none_finished(tmp_path: Path,
                                                                                              capsys) -> None:
    missing = tmp_path / "typo"
    assert main(["benchmark", "dna", "--checkpoint", "dna-gue-3mer-mlm-196k", "--tasks", "ecoli_promoters",
                 "--out", str(missing), "--finished-only", "--quiet"]) == 2
    assert capsys.readouterr().err.strip() == (f"polymask: error: {missing} holds no benchmark cells (no "
                                               f"{missing / 'cells'}): nothing to report; check --out")
    assert not missing.exists()
    (tmp_path / "cells").mkdir()
    (tmp_path / "results.png").write_bytes(b"an earlier report's plot")
    calls: list[int] = []
    text = run_benchmark([counting_system(calls)], [TASK], [0], tmp_path, "none yet", progress=False,
                         finished_only=True).read_text()
    assert calls == [] and "**Partial:** 0 of 1 cells finished" in text and "No cell has finished yet." in text
    assert not (tmp_path / "results.png").exists()
