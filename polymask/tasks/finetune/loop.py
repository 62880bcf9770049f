"""The fine-tuning loop every task kind shares: AdamW with linear warm-up and decay, validation after each
epoch, early stopping on the validation metric and the best epoch's weights restored."""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import Tensor, nn

from polymask.finetune_config import FinetuneConfig
from polymask.runtime import inner_progress_bar
from polymask.tasks.metrics.scoring import better
from polymask.tracking import Reporter
from polymask.training.schedule import warmup_then_decay


@dataclass
class Fitted:
    """Outcome of ``fit``: validation metrics at the best epoch (1-based) and the epochs run."""

    valid: dict[str, float]
    best_epoch: int
    epochs_run: int


def fit(model: nn.Module, config: FinetuneConfig, batches: Callable[[int], list[Any]],
        loss_of: Callable[[Any], Tensor], validate: Callable[[], dict[str, float]], metric: str,
        reporter: Reporter | None = None) -> Fitted:
    """AdamW with linear warm-up and decay over ``config.epochs`` epochs of ``batches(epoch)``; ``validate``
    after each epoch; stops after ``config.patience`` epochs without improving ``metric`` and restores the
    best epoch's weights (where ``metric`` was undefined at every epoch, NaN, the last epoch stands). Progress (epoch, step, validation metric) shows under a benchmark's bar; each epoch's
    mean training loss and validation metrics go to ``reporter`` (step: the epoch, from 1)."""
    parameters = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=config.lr, weight_decay=config.weight_decay)
    total_steps = config.epochs * len(batches(0))
    bar = inner_progress_bar(total=total_steps, unit="step")
    warmup = max(1, int(config.warmup_fraction * total_steps))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: warmup_then_decay(step, warmup, total_steps))
    best_value, best_state, best_epoch, best_valid, stale = None, None, -1, {}, 0
    for epoch in range(config.epochs):
        bar.set_description(f"epoch {epoch + 1}/{config.epochs}")
        epoch_batches, loss_sum = batches(epoch), 0.0
        for batch in epoch_batches:
            loss = loss_of(batch)
            loss_sum += loss.detach()  # a tensor: no device sync per step
            loss.backward()
            torch.nn.utils.clip_grad_norm_(parameters, 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
            bar.update(1)
        valid_metrics = validate()
        if reporter is not None:
            reporter.log({"train_loss": float(loss_sum) / max(1, len(epoch_batches)),
                          **{f"valid_{name}": value for name, value in valid_metrics.items()}}, epoch + 1)
        if better(metric, valid_metrics[metric], best_value):
            best_value, best_epoch, best_valid, stale = valid_metrics[metric], epoch, valid_metrics, 0
            best_state = copy.deepcopy(model.state_dict())
        else:
            stale += 1
        best = "none yet" if best_value is None else f"{best_value:.4g} (epoch {best_epoch + 1})"
        bar.set_postfix_str(f"valid {metric} {valid_metrics[metric]:.4g}, best {best}")
        if stale >= config.patience:
            break
    bar.close()
    if best_state is None:  # the metric was undefined at every epoch (a diverged loss): the last epoch stands
        return Fitted(valid_metrics, epoch + 1, epoch + 1)
    model.load_state_dict(best_state)
    return Fitted(best_valid, best_epoch + 1, epoch + 1)
