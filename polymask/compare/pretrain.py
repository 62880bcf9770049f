"""Pretraining under a shared budget: one run per (objective, seed), reused when already finished."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Callable

import torch

from polymask.compare.budget import Budget, measure_step_seconds, steps_for
from polymask.compare.variants import Variant, as_variant
from polymask.config import RunConfig, build_run_config, merge
from polymask.errors import ConfigError, OutputError, TrainingDiverged, one_line
from polymask.jsonio import make_dir, write_json
from polymask.locks import acquire
from polymask.runtime import machine, resolve_device
from polymask.tracking import flat
from polymask.training.run_folder import held_run
from polymask.training.trainer import Trainer, train


def run_config(base: dict[str, Any], variant: Variant | str, seed: int, run_dir: Path) -> RunConfig:
    """The base recipe with this run's objective (the base's objective options kept when it names the same one, else
    only its mask ratio; the variant's options over them), seed and folder, validated."""
    variant = as_variant(variant)
    objective = variant.objective
    base_objective = base.get("objective", {})
    if isinstance(base_objective, str):
        base_objective = {"name": base_objective}
    same = base_objective.get("name") == objective
    options = base_objective if same else {key: value for key, value in base_objective.items() if key == "mask_ratio"}
    options = {**options, **variant.options}
    if not same or variant.options:  # a saved run's config repeats its objective's encoder decisions (model.rope_2d)
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
    try:
        tokens_per_step = _tokens_per_step(probe)
        step_seconds = measure_step_seconds(probe) if budget.kind == "time" else 0.0
    finally:
        probe.close()
        shutil.rmtree(probe_config.out_dir(), ignore_errors=True)  # it saved nothing worth keeping
    return {"steps": steps_for(budget, tokens_per_step, step_seconds), "tokens_per_step": tokens_per_step,
            "measured_step_s": step_seconds}


def settings_digest(config: RunConfig) -> str:
    """A hash of the run's settings (its folder and progress display left out): what a reused run must match."""
    return hashlib.sha256(json.dumps(_settings(config), sort_keys=True).encode()).hexdigest()[:16]


def _settings(config: RunConfig) -> dict[str, Any]:
    settings = config.model_dump(mode="json", exclude={"out"})
    settings["train"].pop("progress", None)
    return settings


def _settings_differ(plan: dict[str, Any], config: RunConfig) -> str | None:
    """Why the run a plan describes was pretrained with other settings than ``config``, or None when they match.
    A plan keeps its settings as given (validated again, fields polymask added since take their defaults, as the
    run had them in effect); a plan that kept only their hash is compared by hash."""
    kept = plan.get("settings_fields")
    if not isinstance(kept, dict):
        return None if plan.get("settings", settings_digest(config)) == settings_digest(config) else "its settings hash"
    try:
        then = flat(_settings(build_run_config({**kept, "out": str(config.out)})))
    except ConfigError as exc:
        return f"settings this polymask no longer reads: {one_line(exc)}"
    now = flat(_settings(config))
    changed = sorted(key for key in then.keys() | now.keys() if then.get(key) != now.get(key))
    shown = ", ".join(f"{key}: then {then.get(key)!r}, now {now.get(key)!r}" for key in changed[:3])
    return None if not changed else shown + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")


def _read_state(path: Path) -> dict[str, Any]:
    """A run's plan or summary; one line naming the file when it is damaged."""
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise OutputError(f"{path}: unreadable ({exc}); restore it, or remove {path.parent} to pretrain again") from None
    if not isinstance(data, dict):
        raise OutputError(f"{path}: not a JSON object; restore it, or remove {path.parent} to pretrain again")
    return data


def _finished(run_dir: Path, summary: dict[str, Any]) -> bool:
    """Whether the summary is of a run that ended (completed, or diverged: a rerun would replay the same steps)
    with its last checkpoint where ``checkpoints/latest.json`` points (the weights the benchmark reads)."""
    if summary.get("status", "completed") not in ("completed", "diverged") or not summary:
        return False
    pointer = run_dir / "checkpoints" / "latest.json"
    saved = _read_state(pointer).get("step") if pointer.is_file() else None
    if saved is None and summary.get("status") == "diverged":
        raise OutputError(f"{run_dir} diverged before its first checkpoint: nothing to benchmark; pretrain it again "
                          f"with a lower learning rate (--set train.lr=...) in another --out")
    if "checkpoint_step" in summary and saved != summary["checkpoint_step"]:  # older summaries do not say
        raise OutputError(f"{run_dir}: its summary ends at the checkpoint of step {summary.get('checkpoint_step')}, "
                          f"but checkpoints/latest.json points at step {saved}; restore that checkpoint, or remove "
                          f"{run_dir} to pretrain again")
    return True


def pretrain(base: dict[str, Any], variant: Variant | str, seed: int, budget: Budget, out: Path,
             wait: bool = True) -> dict[str, Any]:
    """Train ``out/pretrain/<label>-seed<seed>`` (reused when finished under the same budget and settings,
    resumed when interrupted); returns its summary plus the plan, which records the threads, the device and the
    machine's load when the run started (a time budget buys fewer steps on a busy or slower machine). A run that
    diverged is returned as it ended (``diverged``), for the report to call no ordering on it. Another process
    pretraining the same run: wait for it, or (``wait=False``) raise ``RunBusy``."""
    variant = as_variant(variant)
    run_dir = out / "pretrain" / f"{variant.label}-seed{seed}"
    make_dir(run_dir)
    with acquire(run_dir / ".compare.lock", lambda owner: f"{owner} is pretraining {run_dir}", wait=wait,
                 on_wait=lambda owner: print(f"polymask compare: waiting for {owner}, which is pretraining {run_dir}",
                                             file=sys.stderr)):
        return _pretrain_held(base, variant, seed, budget, run_dir)


def _pretrain_held(base: dict[str, Any], variant: Variant, seed: int, budget: Budget, run_dir: Path) -> dict[str, Any]:
    """``pretrain`` with the run's compare lock held: another invocation on the same --out waits here, then reuses the
    run (its probe and plan never meet a live run)."""
    plan_file = run_dir / "plan.json"
    config = run_config(base, variant, seed, run_dir)
    device = machine(resolve_device(config.train.device))["device"]
    if plan_file.is_file():
        plan = _read_state(plan_file)
        differs = _settings_differ(plan, config)
        if differs:
            raise OutputError(f"{run_dir} holds a run pretrained with other settings ({differs}); use another --out, "
                              f"or remove {run_dir}")
        if budget.kind == "time" and plan.get("budget") == "time" and "max_steps" not in plan:
            raise ConfigError(f"{run_dir} was pretrained before time budgets ended on the clock (it stopped at a "
                              f"step estimate, so objectives got unequal time); move it away or use another --out")
        if (plan.get("budget"), plan.get("amount")) == (budget.kind, budget.amount):
            summary = _read_state(run_dir / "summary.json") if (run_dir / "summary.json").is_file() else {}
            if _finished(run_dir, summary):
                return _result(summary, plan, run_dir, variant, reused=True)
            if (run_dir / "checkpoints" / "latest.json").is_file():
                if budget.kind == "time" and plan.get("device", device) != device:
                    raise OutputError(f"{run_dir} started its time budget on {plan['device']}; finishing it on {device} "
                                      f"would spend the rest at another speed: resume it there, or remove {run_dir}")
                _say(f"resuming {run_dir} ({budget.describe()})")
                return _result(_train_to_end(lambda: train(resume=run_dir), run_dir), plan, run_dir, variant,
                               reused=False)
        elif held_run(run_dir):  # its benchmark cells would be reused for a model they were not computed on
            raise OutputError(f"{run_dir} holds a run pretrained under another budget ({plan.get('amount')} "
                              f"{plan.get('budget')}, not {budget.amount:g} {budget.kind}); use another --out, or "
                              f"remove {run_dir.parent.parent}")
    elif held_run(run_dir):  # a run without its plan: what budget it had is unknown, and overwriting it loses it
        raise OutputError(f"{run_dir} holds a run ({', '.join(held_run(run_dir))}) but no plan.json, so its budget and "
                          f"settings are unknown; restore plan.json, or remove {run_dir} to pretrain again")
    plan = {"budget": budget.kind, "amount": budget.amount, "settings": settings_digest(config),
            "settings_fields": _settings(config), "device": device,
            "threads": config.train.threads or torch.get_num_threads(), "load_at_start": round(os.getloadavg()[0], 2),
            **plan_steps(config, budget)}
    schedule = config.train  # assignments are validated
    schedule.max_steps, schedule.warmup_steps = plan["steps"], min(schedule.warmup_steps, max(1, plan["steps"] // 10))
    if budget.kind == "time":
        plan["max_steps"] = TIME_BUDGET_STEP_CEILING * plan["steps"]
        schedule.max_time, schedule.max_steps = budget.amount, plan["max_steps"]
    elif schedule.max_time is not None:  # the budget sets every run's length: a recipe's clock would cut runs unequally
        _say(f"the recipe's train.max_time ({schedule.max_time:g} s) is dropped: the budget ({budget.describe()}) "
             f"sets the length")
        schedule.max_time = None
    write_json(plan_file, plan)
    _say(f"pretraining {run_dir} ({budget.describe()})")
    summary = _train_to_end(lambda: Trainer(config, existing="overwrite").fit(), run_dir)  # a start that saved nothing
    return _result(summary, plan, run_dir, variant, reused=False)


def _say(line: str) -> None:
    """One progress line on stderr (a compare's runs train without a progress bar)."""
    print(f"polymask compare: {line}", file=sys.stderr, flush=True)


def _train_to_end(fit: Callable[[], dict[str, Any]], run_dir: Path) -> dict[str, Any]:
    """The summary of a training run; a run that diverges ends with its summary (status ``diverged``)."""
    try:
        return fit()
    except TrainingDiverged:
        return _read_state(run_dir / "summary.json")


def _result(summary: dict[str, Any], plan: dict[str, Any], run_dir: Path, variant: Variant,
            reused: bool) -> dict[str, Any]:
    """What compare keeps of a run: its summary, read from the folder it was found in (a summary records the
    ``--out`` typed when it was trained), its plan, its variant (``variant``: the row label, ``variant_options``), and
    whether it was reused."""
    return {**summary, "run_dir": str(run_dir), "plan": plan, "reused": reused, "variant": variant.label,
            "variant_options": variant.options,
            "diverged": summary.get("status") == "diverged"}
