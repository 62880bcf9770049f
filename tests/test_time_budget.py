"""A time budget (``train.max_time``) ends on the training clock: the run spends all of it whatever its
``max_steps`` says, its schedule decays to the end there, and a resumed run counts the time already spent."""
import json

import pytest

from polymask.config import TrainConfig
from polymask.training.schedule import learning_rate, schedule_steps
from polymask.training.trainer import train

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end


def test_the_schedule_ends_where_the_time_runs_out():
    config = TrainConfig(lr=1e-3, min_lr_ratio=0.1, warmup_steps=10, max_steps=10_000, max_time=100.0)
    assert schedule_steps(100, config, train_seconds=50.0) == 200  # half the time in 100 steps: 200 in all
    assert learning_rate(100, config, train_seconds=50.0) == pytest.approx(learning_rate(100, config.model_copy(
        update={"max_steps": 200, "max_time": None})))
    assert learning_rate(200, config, train_seconds=100.0) == pytest.approx(1e-4)  # the end: min_lr_ratio * lr
    assert learning_rate(5, config, train_seconds=50.0) == pytest.approx(6e-4)  # warm-up is counted in steps
    assert schedule_steps(100, config, train_seconds=0.001) == 10_000  # max_steps stays the ceiling
    assert schedule_steps(100, config.model_copy(update={"max_time": None}), train_seconds=50.0) == 10_000


def _lrs(run):
    return [line["lr"] for line in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "lr" in line]


def test_a_time_budget_is_spent_whole_and_its_schedule_completes(tmp_path, make_config):
    summary = train(make_config("smiles", tmp_path / "run", max_steps=100_000, max_time=3, lr=1e-3))
    steps, seconds = summary["steps"], summary["train_time_s"]
    assert 0 < steps < 100_000
    assert 3 <= seconds <= 6  # stopped on the clock, one step past the budget (not by an early step estimate; a
    # step on a loaded machine can take a second)
    lrs = _lrs(tmp_path / "run")
    assert lrs[-1] < 0.2e-3  # decayed to near min_lr_ratio * lr (0.1e-3), not stuck at the peak of a 100,000-step plan


def test_under_a_time_budget_the_progress_bar_counts_its_seconds(tmp_path, make_config, capsys):
    """Not max_steps: a 100,000-step ceiling would make the bar's estimate read hours for a 2-second run."""
    train(make_config("smiles", tmp_path / "run", max_steps=100_000, max_time=2, progress=True))
    final = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert "2.0/2.0 [" in final and "step=" in final and "100000" not in final, final


def test_a_resumed_time_budget_counts_the_time_already_spent(tmp_path, make_config):
    first = train(make_config("smiles", tmp_path / "run", max_steps=100_000, max_time=3))
    resumed = train(make_config("smiles", tmp_path / "run", max_steps=100_000, max_time=4), resume=tmp_path / "run")
    assert resumed["steps"] > first["steps"]
    assert 4 <= resumed["train_time_s"] <= 5.5  # 4 s in all, 3 of them spent before the resume (not 3 + a fresh 4)


def test_compare_spends_a_time_budget_on_the_clock_not_on_the_probes_estimate(tmp_path, make_config):
    from polymask.compare.budget import parse_budget
    from polymask.compare.pretrain import TIME_BUDGET_STEP_CEILING, pretrain
    from polymask.runtime import machine

    base = make_config("smiles", tmp_path / "unused")
    run = pretrain(base, "mlm", 0, parse_budget("3s"), tmp_path / "compare")
    plan = run["plan"]
    assert plan["max_steps"] == TIME_BUDGET_STEP_CEILING * plan["steps"] and run["steps"] < plan["max_steps"]
    assert run["train_time_s"] >= 3
    assert plan["device"] == machine()["device"] and not (tmp_path / "compare" / "pretrain" / "mlm-seed0" / "probe").exists()


def test_compare_refuses_a_time_budget_run_made_before_it_ended_on_the_clock(tmp_path, make_config):
    from polymask.compare.budget import parse_budget
    from polymask.compare.pretrain import pretrain
    from polymask.errors import ConfigError

    run_dir = tmp_path / "compare" / "pretrain" / "mlm-seed0"
    run_dir.mkdir(parents=True)
    (run_dir / "plan.json").write_text(json.dumps({"budget": "time", "amount": 480.0, "steps": 1662}))
    with pytest.raises(ConfigError, match="before time budgets ended on the clock"):
        pretrain(make_config("smiles", tmp_path / "unused"), "mlm", 0, parse_budget("8m"), tmp_path / "compare")
