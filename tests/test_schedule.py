"""One learning-rate schedule for pretraining and fine-tuning (``training/schedule.py``)."""
from __future__ import annotations

import math

import pytest
import torch

from polymask.config import TrainConfig
from polymask.finetune_config import FinetuneConfig
from polymask.tasks.finetune import loop
from polymask.training.schedule import learning_rate, warmup_then_decay


def former_finetune_factor(step: int, warmup: int, total: int) -> float:
    """The fine-tuning loop's own schedule before it took the shared one (tasks/finetune/loop.py)."""
    return min((step + 1) / warmup, max(0.0, (total - step) / max(1, total - warmup)))


def former_pretraining_rate(step: int, config: TrainConfig) -> float:
    """``learning_rate`` as it was written before the shared factor (no time budget)."""
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    if config.schedule == "constant":
        return config.lr
    progress = min(1.0, (step - config.warmup_steps) / max(1, config.max_steps - config.warmup_steps))
    shape = 0.5 * (1 + math.cos(math.pi * progress)) if config.schedule == "cosine" else 1 - progress
    return config.lr * (config.min_lr_ratio + (1 - config.min_lr_ratio) * shape)


@pytest.mark.parametrize("warmup,total", [(1, 1), (1, 10), (6, 60), (30, 300), (9, 10)])
def test_fine_tuning_rates_are_today_s_step_for_step(warmup, total):
    for step in range(total):
        assert warmup_then_decay(step, warmup, total) == pytest.approx(former_finetune_factor(step, warmup, total),
                                                                        rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("schedule", ["linear", "cosine", "constant"])
def test_pretraining_rates_are_unchanged(schedule):
    config = TrainConfig(lr=1e-3, warmup_steps=20, max_steps=200, schedule=schedule, min_lr_ratio=0.1)
    for step in range(200):
        assert learning_rate(step, config) == pytest.approx(former_pretraining_rate(step, config), rel=1e-12)


def test_the_fine_tuning_loop_steps_along_the_shared_schedule():
    """The rates the optimiser actually used in ``fit``, one per step, against the former formula."""
    model = torch.nn.Linear(2, 1)
    config = FinetuneConfig(lr=1e-2, epochs=3, patience=3, warmup_fraction=0.2)
    batches = [torch.randn(4, 2, generator=torch.Generator().manual_seed(i)) for i in range(5)]
    used: list[float] = []

    def loss_of(batch: torch.Tensor) -> torch.Tensor:
        return model(batch).pow(2).mean()

    original_step = torch.optim.AdamW.step

    def recording_step(self, *args, **kwargs):
        used.append(self.param_groups[0]["lr"])
        return original_step(self, *args, **kwargs)

    torch.optim.AdamW.step = recording_step
    try:
        loop.fit(model, config, lambda epoch: batches, loss_of, lambda: {"rmse": 1.0}, "rmse")
    finally:
        torch.optim.AdamW.step = original_step
    total, warmup = 15, max(1, int(0.2 * 15))
    assert used == pytest.approx([1e-2 * former_finetune_factor(step, warmup, total) for step in range(total)],
                                 rel=1e-12)
