"""Equal budgets: training time, optimiser steps, or tokens seen, turned into a step count per run."""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from polymask.errors import ConfigError

if TYPE_CHECKING:
    from polymask.training.trainer import Trainer

UNITS = {"s": 1, "m": 60, "h": 3600}
SCALE = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}


@dataclass(frozen=True)
class Budget:
    """``kind`` is "time" (seconds), "steps" or "tokens" (real, non-padding input tokens)."""

    kind: str
    amount: float

    def describe(self) -> str:
        if self.kind == "time":
            return f"{self.amount / 60:g} min of training time (steps only) per run"
        if self.kind == "steps":
            return f"{int(self.amount)} optimiser steps per run"
        return f"{int(self.amount):,} real input tokens per run"


def parse_budget(text: str) -> Budget:
    """``30m``, ``90s``, ``1.5h`` | ``2000-steps`` | ``5M-tokens``."""
    value = text.strip().lower()
    budget = None
    if match := re.fullmatch(r"(\d+(?:\.\d+)?)([smh])", value):
        budget = Budget("time", float(match[1]) * UNITS[match[2]])
    elif match := re.fullmatch(r"(\d+)[-_ ]?steps?", value):
        budget = Budget("steps", int(match[1]))
    elif match := re.fullmatch(r"(\d+(?:\.\d+)?)([kmg]?)[-_ ]?tokens?", value):
        budget = Budget("tokens", float(match[1]) * SCALE[match[2]])
    if budget is None:
        raise ConfigError(f"budget '{text}' is not one of: a time (30m, 90s, 1.5h), N-steps, or N-tokens (5M-tokens)")
    if budget.amount <= 0:
        raise ConfigError(f"budget '{text}' is zero: give a positive time, step or token count")
    return budget


def steps_for(budget: Budget, tokens_per_step: float, step_seconds: float) -> int:
    """Optimiser steps that spend ``budget`` (tokens: at the corpus' mean real tokens per step;
    time: at the step time measured for this objective)."""
    if budget.kind == "steps":
        return int(budget.amount)
    if budget.kind == "tokens":
        return max(1, math.ceil(budget.amount / tokens_per_step))
    return max(1, int(budget.amount / step_seconds))


def measure_step_seconds(trainer: Trainer, warmup: int = 3, steps: int = 10) -> float:
    """Mean time of ``steps`` optimiser steps after ``warmup``, on a freshly built trainer (a probe: the steps
    advance its state, so train with another)."""
    for _ in range(warmup):
        trainer.step()
    started = time.perf_counter()
    for _ in range(steps):
        trainer.step()
    return (time.perf_counter() - started) / steps
