"""Experiment tracking: the numbers of a run's metric records, and its config, sent to TensorBoard or W&B.

``train.report_to`` (pretraining) and ``FinetuneConfig.report_to`` (fine-tuning, benchmarks) name the
backends. Each is an optional extra (``pip install 'polymask[tensorboard]'``), and each keeps its logs in
the run's folder: TensorBoard event files under ``<folder>/tensorboard/``, the W&B run under
``<folder>/wandb/`` (offline unless ``WANDB_MODE`` says otherwise; ``wandb sync`` uploads it later).
"""
from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Protocol, Sequence

from polymask.errors import ConfigError

#: A tracking backend; its name is also the package it needs and the polymask extra that installs it.
Backend = Literal["tensorboard", "wandb"]

#: Seconds W&B may take to start its run before polymask gives up (online mode talks to the server).
WANDB_INIT_TIMEOUT_S = 30


@dataclass(frozen=True)
class TrackedRun:
    """Where a run's tracking logs go and what it is called there."""

    folder: Path  # the run's folder: tensorboard/ and wandb/ are made in it
    name: str  # the run's W&B name (a benchmark cell's: system/task/seed-N); its W&B group is the folder's name
    events: Path = field(default_factory=Path)  # TensorBoard events go to <folder>/tensorboard/<events>


class Reporter(Protocol):
    def log(self, record: dict[str, Any], step: int) -> None:
        """Send the numbers of ``record`` (a metrics line) as the values at ``step``."""

    def close(self) -> None:
        """Flush and finish the run."""


def numbers(record: dict[str, Any]) -> dict[str, float]:
    """The scalars of a metrics record: its int and float values, ``step`` left out (it is the x axis)."""
    return {key: value for key, value in record.items()
            if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool)}


def flat(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested config as dotted keys; values other than numbers, text and booleans as JSON text."""
    flattened: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flattened.update(flat(value, f"{prefix}{key}."))
        else:
            flattened[f"{prefix}{key}"] = value if isinstance(value, (int, float, str, bool)) else json.dumps(value)
    return flattened


class TensorBoard:
    """Scalars, and the config as hparams, in event files under ``<folder>/tensorboard/``."""

    def __init__(self, run: TrackedRun, config: dict[str, Any], start_step: int) -> None:
        from torch.utils.tensorboard import SummaryWriter
        from torch.utils.tensorboard.summary import hparams

        # hides what an earlier invocation logged after ``start_step`` (metrics.jsonl drops it too on resume)
        self.writer = SummaryWriter(run.folder / "tensorboard" / run.events, purge_step=start_step + 1)
        for summary in hparams(flat(config), {}):
            self.writer.file_writer.add_summary(summary)

    def log(self, record: dict[str, Any], step: int) -> None:
        for key, value in numbers(record).items():
            self.writer.add_scalar(key, value, step)

    def close(self) -> None:
        self.writer.close()


class WandB:
    """A W&B run in ``<folder>/wandb/``: offline unless ``WANDB_MODE`` is set (``online``: logged live)."""

    def __init__(self, run: TrackedRun, config: dict[str, Any], start_step: int) -> None:
        import wandb

        mode = os.environ.get("WANDB_MODE", "offline")
        try:
            self.run = wandb.init(dir=str(run.folder), project=os.environ.get("WANDB_PROJECT", "polymask"),
                                  name=run.name, group=run.folder.name, config=config, mode=mode,
                                  settings=wandb.Settings(init_timeout=WANDB_INIT_TIMEOUT_S, console="off"))
        except Exception as exc:  # no login, no network, a bad WANDB_* variable: before any training step
            cause = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"report_to wandb: W&B did not start in {mode} mode: {cause}") from None

    def log(self, record: dict[str, Any], step: int) -> None:
        self.run.log(numbers(record), step=step)

    def close(self) -> None:
        self.run.finish()


BACKENDS: dict[str, Callable[[TrackedRun, dict[str, Any], int], Reporter]] = {
    "tensorboard": TensorBoard, "wandb": WandB}


class Reporters:
    """Several backends as one reporter; with none, a no-op."""

    def __init__(self, reporters: Sequence[Reporter] = ()) -> None:
        self.reporters = list(reporters)

    def log(self, record: dict[str, Any], step: int) -> None:
        if numbers(record):
            for reporter in self.reporters:
                reporter.log(record, step)

    def close(self) -> None:
        for reporter in self.reporters:
            reporter.close()
        self.reporters = []


def require(backends: Sequence[str], field_name: str) -> None:
    """Raise ``ConfigError`` (one line naming the extra to install) for a backend whose package is missing."""
    for backend in backends:
        try:
            importlib.import_module(backend)
        except ImportError:
            raise ConfigError(f"{field_name}: {backend} is not installed; install it with: "
                              f"pip install 'polymask[{backend}]'") from None


def open_reporter(backends: Sequence[str], run: TrackedRun, config: dict[str, Any], start_step: int = 0) -> Reporters:
    """Start ``run`` in every backend (each once), with ``config`` as its hyper-parameters; ``start_step``: the
    step a resumed run continues from (0: a new run). Check the packages first with ``require``."""
    opened = Reporters()
    try:
        for backend in dict.fromkeys(backends):
            opened.reporters.append(BACKENDS[backend](run, config, start_step))
    except BaseException:
        opened.close()
        raise
    return opened
