"""Optimiser construction and the learning-rate schedule (a function of the step and, under a time
budget, of the training time spent so far)."""
from __future__ import annotations

import math

import torch

from polymask.config import TrainConfig


def build_optimizer(model: torch.nn.Module, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (not on biases or LayerNorm parameters)."""
    decay, no_decay = [], []
    for parameter in model.parameters():
        if parameter.requires_grad:
            (decay if parameter.dim() >= 2 else no_decay).append(parameter)
    groups = [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=config.lr, betas=config.betas, eps=config.eps)


def schedule_steps(step: int, config: TrainConfig, train_seconds: float = 0.0) -> int:
    """How many steps the schedule spans: ``max_steps``, or, under ``max_time``, the steps the run will
    have made when its training time runs out, projected from the time its ``step`` steps took."""
    if not config.max_time or step == 0 or train_seconds <= 0:
        return config.max_steps
    return min(config.max_steps, max(step, round(step * config.max_time / train_seconds)))


def learning_rate(step: int, config: TrainConfig, train_seconds: float = 0.0) -> float:
    """Linear warm-up to ``lr``, then cosine/linear decay to ``min_lr_ratio * lr`` at the end of the
    schedule (``schedule_steps``: ``max_steps``, or where ``max_time`` will stop the run if sooner)."""
    if config.schedule == "constant" and step >= config.warmup_steps:
        return config.lr
    return config.lr * warmup_then_decay(step, config.warmup_steps, schedule_steps(step, config, train_seconds),
                                         config.schedule, config.min_lr_ratio)


def warmup_then_decay(step: int, warmup: int, total: int, shape: str = "linear", min_ratio: float = 0.0) -> float:
    """The learning-rate factor at ``step`` (0-based) of a ``total``-step schedule: linear warm-up over ``warmup``
    steps to 1, then a ``linear`` or ``cosine`` decay to ``min_ratio`` at ``total``. Pretraining and fine-tuning
    both follow it."""
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    decay = 0.5 * (1 + math.cos(math.pi * progress)) if shape == "cosine" else 1 - progress
    return min_ratio + (1 - min_ratio) * decay
