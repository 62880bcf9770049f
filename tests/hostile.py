"""Hostile inputs, and a driver that feeds them to polymask in a process of its own.

Each hostile input is one record (bytes, as in a file) among valid ones, or a folder where a file is expected.
``table_rows`` puts it in a CSV after more than 8 KiB of valid rows (past the binary-file sniff, so that a NUL
byte reaches the record checks) and before the 200th (export samples that many). ``as_record`` gives it to the
Python API as a string (invalid UTF-8 decoded with ``surrogateescape``, as ``open(errors=...)`` would).

``python tests/hostile.py CASES.json RESULTS.jsonl`` runs every case of CASES.json (a CLI verb or a Python API
call) in this one process and appends one JSON line per finished case to RESULTS.jsonl, so that a segfault, a
hang (``CASE_SECONDS``) or a runaway allocation (``ADDRESS_SPACE``) ends this process, not pytest (the test sees
the exit status), and all cases cost one import of torch.
"""
from __future__ import annotations

import contextlib
import faulthandler
import io
import json
import resource
import shutil
import sys
import traceback
from pathlib import Path
from typing import Any

FOLDER = "a folder"
#: name -> the record's bytes (None: a folder stands where the file should be).
HOSTILE: dict[str, bytes | None] = {
    "20,000-character SMILES": b"C" * 20_000,
    "10 MB line": b"C" * 10_000_000,
    "NUL bytes": b"C\x00C",
    "invalid UTF-8": b"C\xffC",
    "empty field": b"",
    FOLDER: None,
}
VALID_BEFORE, VALID_AFTER = 130, 20
HOSTILE_LINE = VALID_BEFORE + 2  # in a ``table_rows`` file, after the header and the valid rows before it
#: A case still running after this long is a hang (unguarded, a 10 MB SMILES held RDKit for 10 minutes, past 14 GB).
CASE_SECONDS = 60
#: A case needing more address space fails rather than starve the machine (every case together needs under 3 GiB;
#: CUDA, which reserves far more, is hidden from the driver).
ADDRESS_SPACE = 6 * 2**30
PADDING = "x" * 50  # a column that makes 130 rows exceed the 8 KiB that check_readable sniffs


def table_rows(header: str, valid: list[str], hostile: bytes, hostile_row: str) -> bytes:
    """A CSV: ``header``, ``VALID_BEFORE`` valid rows, the hostile row (``hostile_row`` with ``{}`` standing for the
    record), ``VALID_AFTER`` valid rows; each row ends in the padding column."""
    rows = [f"{valid[i % len(valid)]},{PADDING}\n".encode() for i in range(VALID_BEFORE + VALID_AFTER)]
    before, marker = hostile_row.split("{}")
    rows.insert(VALID_BEFORE, before.encode() + hostile + f"{marker},{PADDING}\n".encode())
    return f"{header},note\n".encode() + b"".join(rows)


def slug(name: str) -> str:
    """A hostile input's name as a folder name."""
    return name.replace(" ", "-").replace(",", "")


def write_table(folder: Path, name: str, content: bytes | None, file_name: str = "data.csv") -> Path:
    """``content`` written to ``folder/<slug of name>/file_name``; for None a folder of that name holding a file."""
    path = folder / slug(name) / file_name
    path.parent.mkdir(parents=True, exist_ok=True)
    if content is None:
        path.mkdir()
        (path / "part-0.csv").write_text("smiles,y\nCCO,1.0\n")
    else:
        path.write_bytes(content)
    return path


def as_record(name: str) -> str:
    """The hostile record as a Python string."""
    return HOSTILE[name].decode("utf-8", "surrogateescape")


# -- the driver ----------------------------------------------------------------------------------

def _replace(target: Path, source: Path) -> None:
    """Put a copy of ``source`` (file or folder) at ``target``."""
    if target.is_dir():
        shutil.rmtree(target)
    elif target.exists():
        target.unlink()
    (shutil.copytree if source.is_dir() else shutil.copyfile)(source, target)


def _api(case: dict[str, Any]) -> dict[str, Any]:
    """Apply a fine-tuned model from Python: reasons per record, and which records got a finite output."""
    import numpy as np
    import pandas as pd

    import polymask

    model = polymask.load_model(case["model"], device="cpu")
    rows = [tuple(as_record(case["input"]) if value is None else value for value in row) for row in case["rows"]]
    records = [row if len(row) > 1 else row[0] for row in rows]  # a list: pandas' Arrow strings refuse surrogates
    if case["api"] == "embed":
        vectors, reasons = model.embed(records, with_reasons=True)
        return {"reasons": reasons, "outputs": np.isfinite(vectors).all(axis=1).tolist()}
    predicted = model.predict(records)
    reasons = [None if pd.isna(reason) else reason for reason in predicted["reason"]]
    last = predicted[predicted.columns[-2]]  # the last output column (a span model's answer may be "", its score not)
    return {"reasons": reasons, "outputs": [bool(pd.notna(value)) for value in last]}


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    """One case, its output captured: rc, stdout, stderr, and what an API call returned."""
    from polymask.cli import main

    if "replace" in case:
        _replace(Path(case["replace"]["target"]), Path(case["replace"]["source"]))
    out, err = io.StringIO(), io.StringIO()
    result: dict[str, Any] = {"id": case["id"]}
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            result.update(_api(case) if "api" in case else {"rc": main(case["argv"])})
        except BaseException:  # reported to the test, which fails on it
            result["traceback"] = traceback.format_exc()
    return {**result, "stdout": out.getvalue()[-4000:], "stderr": err.getvalue()[-4000:]}


def main(cases_file: Path, results_file: Path) -> None:
    import torch

    torch.set_num_threads(1)
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, resource.getrlimit(resource.RLIMIT_AS)[1]))
    for case in json.loads(cases_file.read_text()):
        print(f"running: {case['id']}", file=sys.stderr, flush=True)
        faulthandler.dump_traceback_later(CASE_SECONDS, exit=True)  # a hang (even inside RDKit) ends the process
        result = run_case(case)
        faulthandler.cancel_dump_traceback_later()
        with open(results_file, "a") as handle:
            handle.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
