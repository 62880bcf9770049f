"""Outputs: every JSON polymask writes (and has committed) is standard JSON, and every verb meets a
missing dataset, an unknown task, a bad checkpoint or an output it cannot write with one line,
leaving no half-written file under a final name."""
from __future__ import annotations

import errno
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
from conftest import one_line_error

from polymask.cli import main
from polymask.errors import OutputError
from polymask.jsonio import dumps, number, write_json

RESULTS = Path(__file__).parent.parent / "docs" / "results"


def strict_json(text: str):
    """Parse as JavaScript, Go or Rust would: NaN and Infinity are errors."""
    def refuse(constant: str):
        raise ValueError(f"non-standard JSON constant {constant}")
    return json.loads(text, parse_constant=refuse)


def test_undefined_numbers_are_written_as_null_and_read_back_as_nan(tmp_path):
    value = {"mean": math.nan, "p": np.float32("inf"), "values": np.array([1.0, np.nan]), "n": np.int64(3)}
    assert strict_json(dumps(value)) == {"mean": None, "p": None, "values": [1.0, None], "n": 3}
    write_json(tmp_path / "out.json", value)
    assert strict_json((tmp_path / "out.json").read_text())["values"] == [1.0, None]
    assert math.isnan(number(None)) and number(2) == 2.0


def test_committed_results_are_standard_json():
    files = sorted(RESULTS.rglob("*.json"))
    assert files
    for path in files:
        strict_json(path.read_text())


def full_disk(monkeypatch, folder: Path) -> None:
    """Make every file written under ``folder`` fail as on a full disk (when it is flushed to disk)."""
    real_fsync, root = os.fsync, str(folder.resolve())

    def fsync(descriptor: int) -> None:
        if os.readlink(f"/proc/self/fd/{descriptor}").startswith(root):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", fsync)


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def ends_cleanly_on_a_full_disk(argv: list[str], out: Path, capsys, monkeypatch) -> None:
    """``argv --out out`` on a full disk: one line, and no file at all under ``out``."""
    full_disk(monkeypatch, out)
    one_line_error(capsys, main([*argv, "--out", str(out)]), "No space left on device", str(out))
    assert files_under(out) == []


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "out" / "results.json"
    target.parent.mkdir()
    write_json(target, {"version": 1})
    full_disk(monkeypatch, tmp_path / "out")
    with pytest.raises(OutputError, match=r"cannot write .*results\.json: No space left on device"):
        write_json(target, {"version": 2})
    assert json.loads(target.read_text()) == {"version": 1}
    assert files_under(tmp_path / "out") == ["results.json"]


def blocked(tmp_path: Path) -> Path:
    """An output folder that cannot be created: its parent is a regular file."""
    (tmp_path / "a-file").write_text("")
    return tmp_path / "a-file" / "out"


FINETUNE = ["finetune", "--task", "moleculenet/esol", "--epochs", "1", "--max-train-examples", "40",
            "--max-valid-examples", "20", "--max-test-examples", "20", "--quiet"]


def test_finetune_and_benchmark_faults_end_in_one_line(tmp_path, tiny_smiles_run, capsys):
    run = str(tiny_smiles_run)
    one_line_error(capsys, main(["finetune", "--task", "moleculenet/hiv", "--checkpoint", run, "--data-dir",
                                 str(tmp_path), "--quiet", "--out", str(tmp_path / "ft")]), "HIV.csv", "not found")
    one_line_error(capsys, main(["finetune", "--task", "moleculenet/nope", "--checkpoint", run]), "unknown task")
    one_line_error(capsys, main([*FINETUNE, "--checkpoint", str(tmp_path / "missing-run")]), "missing-run")
    one_line_error(capsys, main([*FINETUNE, "--checkpoint", run, "--out", str(blocked(tmp_path))]), "cannot write")
    one_line_error(capsys, main(["benchmark", "moleculenet", "--tasks", "nope", "--checkpoint", run]), "unknown tasks")
    one_line_error(capsys, main(["benchmark", "moleculenet", "--tasks", "esol", "--checkpoint", run, "--seeds", "1",
                                 "--out", str(blocked(tmp_path))]), "cannot write")


def test_finetune_on_a_full_disk_writes_nothing_under_a_final_name(tmp_path, tiny_smiles_run, capsys, monkeypatch):
    ends_cleanly_on_a_full_disk([*FINETUNE, "--checkpoint", str(tiny_smiles_run)], tmp_path / "ft", capsys, monkeypatch)


def test_analyze_faults_end_in_one_line(tmp_path, tiny_smiles_run, small_smiles_file, capsys, monkeypatch):
    rank = ["analyze", "rank", "--checkpoint", str(tiny_smiles_run), "--max-sequences", "64"]
    one_line_error(capsys, main([*rank, "--data", str(tmp_path / "held-out.smi")]), "held-out.smi", "not found")
    one_line_error(capsys, main(["analyze", "rank", "--checkpoint", str(tmp_path), "--data", str(small_smiles_file)]),
                   str(tmp_path), "holds no checkpoint")
    one_line_error(capsys, main([*rank, "--data", str(small_smiles_file), "--out", str(blocked(tmp_path))]),
                   "cannot write")
    ends_cleanly_on_a_full_disk([*rank, "--data", str(small_smiles_file)], tmp_path / "rank", capsys, monkeypatch)


def test_tokenizer_train_faults_end_in_one_line(tmp_path, small_smiles_file, capsys, monkeypatch):
    build = ["tokenizer", "train", "--modality", "smiles"]
    one_line_error(capsys, main([*build, "--input", str(tmp_path / "none.smi"), "--out", str(tmp_path / "t")]),
                   "none.smi", "not found")
    line = one_line_error(capsys, main([*build, "--input", str(small_smiles_file), "--out", str(blocked(tmp_path))]),
                          "cannot write", "(choose another output folder)")
    assert "free some space" not in line  # only a full disk says so
    ends_cleanly_on_a_full_disk([*build, "--input", str(small_smiles_file)], tmp_path / "tokenizer", capsys, monkeypatch)


def test_compare_faults_end_in_one_line(tmp_path, capsys):
    compare = ["compare", "--modality", "smiles", "--objectives", "mlm", "--budget", "2-steps"]
    one_line_error(capsys, main([*compare, "--objectives", "mlm,nope", "--out", str(tmp_path / "c")]), "nope")
    one_line_error(capsys, main([*compare, "--data", str(tmp_path / "absent.smi"), "--out", str(tmp_path / "c")]),
                   "absent.smi", "not found")
    one_line_error(capsys, main([*compare, "--out", str(blocked(tmp_path))]), "cannot write")


def test_weights_have_the_mode_of_every_other_file_the_umask_allows(tiny_smiles_run, tiny_smiles_model, tmp_path):
    """safetensors writes 0600 through a temporary file: a group sharing a model folder could not read its weights."""
    import torch
    from faults import latest_checkpoint

    from polymask.weights_io import new_file_mode, save_weights

    for folder in (latest_checkpoint(tiny_smiles_run), tiny_smiles_model):
        modes = {path.name: oct(path.stat().st_mode & 0o777) for path in folder.iterdir()}
        assert set(modes.values()) == {oct(new_file_mode())}, modes
    umask = os.umask(0o002)
    try:
        save_weights({"w": torch.zeros(2)}, tmp_path / "w.safetensors")
    finally:
        os.umask(umask)
    assert (tmp_path / "w.safetensors").stat().st_mode & 0o777 == 0o664
