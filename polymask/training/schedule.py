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
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    if config.schedule == "constant":
        return config.lr
    total = schedule_steps(step, config, train_seconds)
    progress = min(1.0, (step - config.warmup_steps) / max(1, total - config.warmup_steps))
    shape = 0.5 * (1 + math.cos(math.pi * progress)) if config.schedule == "cosine" else 1 - progress
    return config.lr * (config.min_lr_ratio + (1 - config.min_lr_ratio) * shape)
