"""A used --out is never reused silently: train refuses it, --overwrite starts over, --resume auto resumes,
leaves a finished run alone, or starts."""
import json

import pytest

from polymask.cli import main
from polymask.errors import OutputError
from polymask.jsonio import read_jsonl
from polymask.training.run_folder import claim_run_folder, held_run

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end

FAST = ["--set", "model.preset=tiny", "--set", "train.batch_size=8", "--set", "data.max_val_records=32",
        "--set", "train.precision=fp32", "--set", "train.progress=false", "--set", "train.log_every=1"]


def train_args(out, steps: int, *extra: str) -> list[str]:
    return ["train", "--modality", "smiles", "--objective", "mlm", "--out", str(out), *FAST,
            "--set", f"train.max_steps={steps}", "--set", "train.eval_every=2", "--set", "train.save_every=2", *extra]


def logged_steps(run) -> list[int]:
    return [line["step"] for line in read_jsonl(run / "metrics.jsonl") if "loss" in line]


def test_a_second_run_into_a_used_folder_is_refused_and_overwrite_starts_over(tmp_path, capsys):
    run = tmp_path / "twice"
    assert main(train_args(run, 4)) == 0
    before = (run / "metrics.jsonl").read_text()
    capsys.readouterr()
    assert main(train_args(run, 6, "--set", "train.lr=1e-4")) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "already holds a run" in error
    assert "--resume" in error and "--overwrite" in error
    assert (run / "metrics.jsonl").read_text() == before
    assert main(train_args(run, 6, "--set", "train.lr=1e-4", "--overwrite")) == 0
    assert logged_steps(run) == [1, 2, 3, 4, 5, 6]  # one trajectory, not two
    assert sorted(p.name for p in (run / "checkpoints").glob("step-*")) == ["step-000004", "step-000006"]
    assert json.loads((run / "summary.json").read_text())["steps"] == 6
    assert main(train_args(run, 6, "--overwrite", "--resume", str(run))) == 2


def test_resume_auto_starts_resumes_and_leaves_a_finished_run_alone(tmp_path, capsys):
    run = tmp_path / "job"
    assert main(train_args(run, 6, "--resume", "auto", "--set", "train.stop_after_steps=4")) == 0  # a job cut short
    assert json.loads((run / "summary.json").read_text())["steps"] == 4
    assert main(train_args(run, 6, "--resume", "auto")) == 0  # the scheduler runs the same command again
    assert logged_steps(run) == [1, 2, 3, 4, 5, 6]
    stamp = (run / "summary.json").stat().st_mtime_ns
    capsys.readouterr()
    assert main(train_args(run, 6, "--resume", "auto")) == 0
    assert "is finished (step 6 of 6); nothing to do" in capsys.readouterr().out
    assert (run / "summary.json").stat().st_mtime_ns == stamp


def test_only_run_files_count_and_overwrite_removes_only_them(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "notes.txt").write_text("mine")
    assert held_run(tmp_path) == []  # an empty checkpoints folder, a user's file
    (tmp_path / "metrics.jsonl").write_text("{}\n")
    with pytest.raises(OutputError, match="already holds a run \\(metrics.jsonl\\)"):
        claim_run_folder(tmp_path, "refuse")
    claim_run_folder(tmp_path, "resume")
    claim_run_folder(tmp_path, "overwrite")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoints", "notes.txt"]


def test_compare_refuses_a_run_folder_pretrained_under_another_budget(tmp_path):
    from polymask.compare.budget import Budget
    from polymask.compare.pretrain import pretrain

    run = tmp_path / "pretrain" / "mlm-seed0"
    run.mkdir(parents=True)
    (run / "plan.json").write_text(json.dumps({"budget": "steps", "amount": 6, "steps": 6}))
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 5.0}\n')
    with pytest.raises(OutputError, match="pretrained under another budget \\(6 steps, not 8 steps\\)"):
        pretrain({"modality": {"name": "smiles"}}, "mlm", 0, Budget("steps", 8), tmp_path)
    assert (run / "metrics.jsonl").read_text() == '{"step": 1, "loss": 5.0}\n'
