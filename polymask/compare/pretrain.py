"""Pretraining under a shared budget: one run per (objective, seed), reused when already finished."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import torch

from polymask.compare.budget import Budget, measure_step_seconds, steps_for
from polymask.config import RunConfig, build_run_config, merge
from polymask.errors import ConfigError, OutputError
from polymask.jsonio import make_dir, write_json
from polymask.training.run_folder import held_run
from polymask.training.trainer import Trainer, train


def run_config(base: dict[str, Any], objective: str, seed: int, run_dir: Path) -> RunConfig:
    """The base recipe with this run's objective, seed and folder (objective options kept when they match, else
    only its mask ratio), validated."""
    base_objective = base.get("objective", {})
    if isinstance(base_objective, str):
        base_objective = {"name": base_objective}
    same = base_objective.get("name") == objective
    options = base_objective if same else {key: value for key, value in base_objective.items() if key == "mask_ratio"}
    if not same:  # a saved run's config repeats its objective's encoder decisions (model.rope_2d): not this one's
        base = {**base, "model": {key: value for key, value in base.get("model", {}).items()
                                  if key not in _decided_by(objective)}}
    base = {**base, "objective": {**options, "name": objective}}  # replaced, not merged: no other objective's options
    return build_run_config(merge(base, {"out": str(run_dir), "train": {"seed": seed, "progress": False}}))


def _decided_by(objective: str) -> set[str]:
    """The encoder settings ``objective`` decides (``Objective.encoder_overrides``)."""
    from polymask.objectives import OBJECTIVES

    registered = OBJECTIVES.get(objective)
    return set(registered.encoder_overrides(registered.Config()))


# A time budget ends on the clock: ``max_steps`` is only a ceiling this far above the probe's estimate
# (a 10-step probe misjudges the mean step time by up to half: length buckets differ in cost).
TIME_BUDGET_STEP_CEILING = 4


def _tokens_per_step(trainer: Trainer) -> float:
    lengths = trainer.batches.store.lengths
    train = trainer.config.train
    return float(lengths.mean()) * train.batch_size * train.grad_accum


def plan_steps(config: RunConfig, budget: Budget) -> dict[str, Any]:
    """Steps (and, for a time budget, the measured step time) that spend ``budget`` for this run."""
    if budget.kind == "steps":
        return {"steps": int(budget.amount)}
    probe_config = config.model_copy(deep=True)
    probe_config.out = config.out_dir() / "probe"  # assignments are validated
    probe = Trainer(probe_config)
    tokens_per_step = _tokens_per_step(probe)
    step_seconds = measure_step_seconds(probe) if budget.kind == "time" else 0.0
    return {"steps": steps_for(budget, tokens_per_step, step_seconds), "tokens_per_step": tokens_per_step,
            "measured_step_s": step_seconds}


def settings_digest(config: RunConfig) -> str:
    """A hash of the run's settings (its folder and progress display left out): what a reused run must match."""
    settings = config.model_dump(mode="json", exclude={"out"})
    settings["train"].pop("progress", None)
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def pretrain(base: dict[str, Any], objective: str, seed: int, budget: Budget, out: Path) -> dict[str, Any]:
    """Train ``out/pretrain/<objective>-seed<seed>`` (reused when finished under the same budget and settings,
    resumed when interrupted); returns its summary plus the plan, which records the threads and the machine's
    load when the run started (a time budget buys fewer steps on a busy machine)."""
    run_dir = out / "pretrain" / f"{objective}-seed{seed}"
    plan_file = run_dir / "plan.json"
    config = run_config(base, objective, seed, run_dir)
    settings = settings_digest(config)
    if plan_file.is_file():
        plan = json.loads(plan_file.read_text())
        if plan.get("settings", settings) != settings:  # plans written before settings were recorded: not checked
            raise OutputError(f"{run_dir} holds a run pretrained with other settings (another --config or --set); "
                              f"use another --out, or remove {run_dir}")
        if budget.kind == "time" and plan["budget"] == "time" and "max_steps" not in plan:
            raise ConfigError(f"{run_dir} was pretrained before time budgets ended on the clock (it stopped at a "
                              f"step estimate, so objectives got unequal time); move it away or use another --out")
        if (plan["budget"], plan["amount"]) == (budget.kind, budget.amount):
            summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").is_file() else {}
            if summary.get("status", "completed") == "completed" and summary:
                return {**summary, "plan": plan, "reused": True}
            if (run_dir / "checkpoints" / "latest.json").is_file():
                return {**train(resume=run_dir), "plan": plan, "reused": False}
        elif held_run(run_dir):  # its benchmark cells would be reused for a model they were not computed on
            raise OutputError(f"{run_dir} holds a run pretrained under another budget ({plan['amount']:g} {plan['budget']}, "
                              f"not {budget.amount:g} {budget.kind}); use another --out, or remove {run_dir.parent.parent}")
    plan = {"budget": budget.kind, "amount": budget.amount, "settings": settings,
            "threads": config.train.threads or torch.get_num_threads(), "load_at_start": round(os.getloadavg()[0], 2),
            **plan_steps(config, budget)}
    schedule = config.train  # assignments are validated
    schedule.max_steps, schedule.warmup_steps = plan["steps"], min(schedule.warmup_steps, max(1, plan["steps"] // 10))
    if budget.kind == "time":
        plan["max_steps"] = TIME_BUDGET_STEP_CEILING * plan["steps"]
        schedule.max_time, schedule.max_steps = budget.amount, plan["max_steps"]
    make_dir(run_dir)
    write_json(plan_file, plan)
    summary = Trainer(config, existing="overwrite").fit()  # a start of its own that saved nothing
    return {**summary, "plan": plan, "reused": False}
