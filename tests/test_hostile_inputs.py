"""Every input path has one guard: the same hostile inputs (``hostile.HOSTILE``) fed to every path that reads
records — train, fine-tuning task data, predict, embed, export's corpus samples, ``load_model().predict`` and
``.embed``, span (question-answering) prediction — end one of two ways and never in a crash:

- rejected: the record is skipped or marked with its reason (naming file and line where there is a file) and
  every valid record still gets its output;
- refused: the command exits 2 with one line naming the file, no traceback.

The cases run in a child process (``hostile.py``; a new one goes on after a case that kills it), so a segfault or
a hang fails these tests instead of killing pytest.
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from faults import MOLECULES
from hostile import FOLDER, HOSTILE, HOSTILE_LINE, VALID_AFTER, VALID_BEFORE, slug, table_rows, write_table

from polymask.cli import main
from tests.conftest import tiny_config

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end

TINY = ["--set", "model.preset=tiny", "--set", "train.max_steps=2", "--set", "train.progress=false",
        "--set", "data.max_len=64", "--set", "train.batch_size=8", "--set", "train.precision=fp32",
        "--set", "train.threads=1"]
SMILES_ROWS = [f"{molecule},{index % 7 / 3:.3f}" for index, molecule in enumerate(MOLECULES)]
QA_ROWS = ["What sat on the mat?,The cat sat on the mat.", "Who ran?,The dog ran home."]
SPAN_MAX_CHARS = 10_000

#: What must happen to each input on a path reading SMILES (words of the reason or of the error line).
SMILES_FILE = {
    "20,000-character SMILES": ("rejected", "20,000 characters, over the smiles limit of 4,096"),
    "10 MB line": ("refused", "field larger than field limit"),
    "NUL bytes": ("rejected", "outside the SMILES grammar"),
    "invalid UTF-8": ("refused", "not UTF-8"),
    "empty field": ("rejected", "empty SMILES"),
    FOLDER: ("refused", "is a folder, not a file"),
}
SMILES_API = {**SMILES_FILE, "10 MB line": ("rejected", "10,000,000 characters, over the smiles limit"),
              "invalid UTF-8": ("rejected", "not valid Unicode")}
#: Span prediction reads text (a NUL is text; this model's modality.max_chars is SPAN_MAX_CHARS).
SPAN_FILE = {**SMILES_FILE, "20,000-character SMILES": ("rejected", "20,000 characters, over the text limit of 10,000"),
             "NUL bytes": ("accepted", ""), "empty field": ("rejected", "empty text")}
SPAN_API = {**SPAN_FILE, "10 MB line": ("rejected", "10,000,000 characters, over the text limit"),
            "invalid UTF-8": ("rejected", "not valid Unicode")}
#: Export reads its checkpoint's corpus for sample records: whatever the file holds, the export is written.
EXPORT = {name: ("written", "") for name in HOSTILE}


@pytest.fixture(scope="module")
def models(tmp_path_factory, tiny_smiles_run, tiny_smiles_model) -> dict[str, Path]:
    """The tiny SMILES run and fine-tuned model of conftest, a run whose corpus file export cases replace, and a
    tiny span model on text limited to SPAN_MAX_CHARS characters a record."""
    from polymask.training.trainer import train

    root = tmp_path_factory.mktemp("hostile-models")
    corpus = write_table(root, "export corpus", table_rows("smiles,y", SMILES_ROWS, b"CCO", "{},1.0"))
    export_run = root / "export-run"
    config = tiny_config("smiles", export_run, max_steps=2, threads=1)
    config["data"].update(paths=[str(corpus)], column="smiles")
    train(config)
    text_run = root / "text-run"
    config = tiny_config("text", text_run, max_steps=3, threads=1)
    config["modality"]["max_chars"] = SPAN_MAX_CHARS
    train(config)
    assert main(["finetune", "--task", "squad/v2-cs224n", "--checkpoint", str(text_run), "--epochs", "1",
                 "--max-train-examples", "16", "--max-valid-examples", "8", "--max-test-examples", "8",
                 "--max-len", "64", "--set", "span.doc_stride=32", "--set", "span.max_query_len=16",
                 "--out", str(root / "squad"), "--quiet"]) == 0
    cell = json.loads((root / "squad" / "results.json").read_text())["cells"][0]
    return {"run": tiny_smiles_run, "model": tiny_smiles_model, "export run": export_run, "export corpus": corpus,
            "span model": root / "squad" / cell["model_dir"]}


def regression_task(data: Path, folder: Path) -> Path:
    """A task spec reading ``data`` as a regression table (smiles -> y)."""
    spec = folder / "hostile-task.yaml"
    spec.write_text(f"name: hostile\nbenchmark: hostile\nmodality: smiles\nkind: regression\n"
                    f"files: {{all: {data.name}}}\ninput_columns: [smiles]\nlabel_columns: [y]\nmetric: rmse\n"
                    f"split: {{method: random}}\n")
    return spec


def _cli(argv: Callable[[Path, Path, dict], list[str]], table: str = "smiles"):
    def case(name: str, files: dict[str, Path], scratch: Path, models: dict) -> dict[str, Any]:
        return {"argv": argv(files[table], scratch, models)}
    return case


def _api(api: str, rows: list[tuple], model: str):
    """A Python API call on ``rows`` of records, None standing for the hostile one."""
    def case(name: str, files: dict[str, Path], scratch: Path, models: dict) -> dict[str, Any]:
        return {"api": api, "model": str(models[model]), "input": name, "rows": rows}
    return case


def _export(name: str, files: dict[str, Path], scratch: Path, models: dict) -> dict[str, Any]:
    return {"argv": ["export", "--checkpoint", str(models["export run"]), "--out", str(scratch / "hf")],
            "replace": {"target": str(models["export corpus"]), "source": str(files["smiles"])}}


#: path -> (how a case is made from a hostile input, what must happen to each input).
PATHS: dict[str, tuple[Callable[..., dict[str, Any]], dict[str, tuple[str, str]]]] = {
    "train": (_cli(lambda data, scratch, models: [
        "train", "--modality", "smiles", "--objective", "mlm", "--data", str(data), "--column", "smiles",
        "--out", str(scratch / "run"), *TINY]), SMILES_FILE),
    "finetune (task data)": (_cli(lambda data, scratch, models: [
        "finetune", "--task", str(regression_task(data, scratch)), "--checkpoint", str(models["run"]),
        "--data-dir", str(data.parent), "--epochs", "1", "--max-len", "64", "--set", "precision=fp32", "--quiet",
        "--out", str(scratch / "finetune")]), SMILES_FILE),
    "predict": (_cli(lambda data, scratch, models: [
        "predict", "--model", str(models["model"]), "--data", str(data), "--column", "smiles", "--quiet",
        "--out", str(scratch / "predictions.csv")]), SMILES_FILE),
    "embed": (_cli(lambda data, scratch, models: [
        "embed", "--checkpoint", str(models["run"]), "--data", str(data), "--column", "smiles", "--quiet",
        "--out", str(scratch / "X.npy")]), SMILES_FILE),
    "export": (_export, EXPORT),
    "load_model().predict": (_api("predict", [("CCO",), (None,), ("c1ccccc1",)], "model"), SMILES_API),
    "load_model().embed": (_api("embed", [("CCO",), (None,), ("c1ccccc1",)], "model"), SMILES_API),
    "span predict": (_cli(lambda data, scratch, models: [
        "predict", "--model", str(models["span model"]), "--data", str(data), "--quiet",
        "--out", str(scratch / "answers.csv")], table="span"), SPAN_FILE),
    "span load_model().predict": (_api("predict", [tuple(QA_ROWS[0].split(",")), ("What is it?", None),
                                                   tuple(QA_ROWS[1].split(","))], "span model"), SPAN_API),
}


def _applies(path: str, name: str) -> bool:
    return not (name == FOLDER and path.startswith(("load_model", "span load_model")))


@pytest.fixture(scope="module")
def outcomes(models, tmp_path_factory) -> dict[str, Any]:
    """Every case run in a child process: {"results": {case id: result}, "cases": {case id: case}}."""
    root = tmp_path_factory.mktemp("hostile")
    cases = []
    for name, content in HOSTILE.items():
        files = {
            "smiles": write_table(root / "inputs", name, None if content is None else
                                  table_rows("smiles,y", SMILES_ROWS, content, "{},1.0")),
            "span": write_table(root / "span-inputs", name, None if content is None else
                                table_rows("question,context", QA_ROWS, content, "What is it?,{}")),
        }
        for path, (make, _) in PATHS.items():
            if _applies(path, name):
                scratch = root / "out" / slug(path) / slug(name)
                scratch.mkdir(parents=True)
                cases.append({"id": f"{path} | {name}", "scratch": str(scratch), "files": {k: str(v) for k, v in
                                                                                          files.items()},
                              **make(name, files, scratch, models)})
    return {"results": run_cases(cases, root), "cases": {case["id"]: case for case in cases}}


def run_cases(cases: list[dict[str, Any]], root: Path) -> dict[str, dict[str, Any]]:
    """{case id: result} from child processes running ``cases`` in turn; a case that kills its child gets
    ``{"died": exit status}`` and the next child goes on after it."""
    results: dict[str, dict[str, Any]] = {}
    while len(results) < len(cases):
        todo = [case for case in cases if case["id"] not in results]
        (root / "cases.json").write_text(json.dumps(todo))
        (root / "results.jsonl").unlink(missing_ok=True)
        child = subprocess.run([sys.executable, str(Path(__file__).with_name("hostile.py")), str(root / "cases.json"),
                                str(root / "results.jsonl")], capture_output=True, text=True, timeout=900,
                               env={**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""})
        lines = (root / "results.jsonl").read_text().splitlines() if (root / "results.jsonl").exists() else []
        results.update((result["id"], result) for result in map(json.loads, lines))
        if len(lines) < len(todo):
            own = child.stderr[child.stderr.rfind("running: "):]  # what the case that killed the child printed
            results[todo[len(lines)]["id"]] = {"died": child.returncode, "stderr": own[-1500:]}
    return results


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _file_outcome(path: str, case: dict[str, Any]) -> tuple[str | None, bool]:
    """(the hostile row's reason, whether every valid row got its output) from a CLI path's files."""
    scratch, data = Path(case["scratch"]), case["files"]["span" if path == "span predict" else "smiles"]
    if path == "train":
        summary = json.loads((scratch / "run" / "summary.json").read_text())
        logged = [json.loads(line) for line in (scratch / "run" / "skipped_records.jsonl").read_text().splitlines()]
        found = [e for e in summary["skipped_examples"] if (e["source"], e["line"]) == (data, HOSTILE_LINE)]
        assert [(e["source"], e["line"]) for e in logged] == [(data, HOSTILE_LINE)]
        return (found[0]["reason"] if found else None), summary["steps"] == 2
    if path == "finetune (task data)":
        results = json.loads((scratch / "finetune" / "results.json").read_text())
        task = next(iter(results["tasks"].values()))
        found = [e for e in task["skipped_examples"] if (e["source"], e["line"]) == (data, HOSTILE_LINE)]
        return (found[0]["reason"] if found else None), task["skipped"] == 1 and len(results["cells"]) == 1
    if path == "embed":
        rows = _rows(scratch / "X.rows.csv")
        valid = [row for index, row in enumerate(rows) if index != VALID_BEFORE]
        return rows[VALID_BEFORE]["reason"] or None, all(row["vector"] != "" for row in valid)
    rows = _rows(scratch / ("answers.csv" if path == "span predict" else "predictions.csv"))
    output = list(rows[0])[-2]  # the last prediction column, before "reason"
    valid = [row for index, row in enumerate(rows) if index != VALID_BEFORE]
    assert len(rows) == VALID_BEFORE + VALID_AFTER + 1
    return rows[VALID_BEFORE]["reason"] or None, all(row[output] != "" for row in valid)


def _api_outcome(result: dict[str, Any]) -> tuple[str | None, bool]:
    """(the hostile record's reason, whether the valid records around it got their outputs) from an API call."""
    reasons, outputs = result["reasons"], result["outputs"]
    return reasons[1], outputs[0] and outputs[2] and reasons[0] is None and reasons[2] is None


@pytest.mark.parametrize("name", HOSTILE)
@pytest.mark.parametrize("path", PATHS)
def test_a_hostile_input_is_rejected_or_refused_in_one_line_never_a_crash(path, name, outcomes):
    if not _applies(path, name):
        pytest.skip("a folder is not a record: the Python API takes records, not files")
    case_id = f"{path} | {name}"
    result, case = outcomes["results"][case_id], outcomes["cases"][case_id]
    assert "died" not in result, f"the process died (exit status {result['died']}): {result['stderr']}"
    assert "traceback" not in result, result["traceback"]
    assert "Traceback" not in result["stderr"], result["stderr"]
    outcome, words = PATHS[path][1][name]
    if outcome == "refused":
        lines = [line for line in result["stderr"].splitlines() if line.strip()]
        assert result["rc"] == 2 and len(lines) == 1, result["stderr"]
        assert words in lines[0] and case["files"]["span" if "span" in path else "smiles"] in lines[0], lines[0]
        return
    assert result.get("rc", 0) == 0, result["stderr"]
    if outcome == "written":
        assert (Path(case["scratch"]) / "hf" / "model.safetensors").is_file()
        return
    reason, valid_outputs = _api_outcome(result) if "api" in case else _file_outcome(path, case)
    assert valid_outputs, "a valid record got no output"
    if outcome == "accepted":
        assert reason is None, reason
    else:
        assert reason is not None and words in reason, reason
