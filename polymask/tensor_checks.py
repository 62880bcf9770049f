"""Checks on tensors entering or leaving a checkpoint: all finite, and exactly the model's names and shapes."""
from __future__ import annotations

from typing import Iterable, Mapping

import torch

from polymask.errors import CheckpointError

SHOWN = 4


def _few(names: Iterable[str]) -> str:
    names = list(names)
    return ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def nonfinite_names(tensors: Mapping[str, torch.Tensor]) -> list[str]:
    """Names of the floating-point tensors holding a NaN or an infinity."""
    return [name for name, tensor in tensors.items()
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all())]


def check_weights(expected: Mapping[str, torch.Tensor], weights: Mapping[str, torch.Tensor], where: str) -> None:
    """Raise ``CheckpointError`` unless ``weights`` has exactly ``expected``'s tensor names and shapes and
    only finite values; the message names the missing, unexpected, misshapen or non-finite tensors."""
    missing = [name for name in expected if name not in weights]
    unexpected = [name for name in weights if name not in expected]
    misshapen = [f"{name} {tuple(weights[name].shape)} (model: {tuple(tensor.shape)})" for name, tensor in expected.items()
                 if name in weights and tuple(weights[name].shape) != tuple(tensor.shape)]
    problems = [f"{label} {_few(names)}" for label, names in (("missing", missing), ("unexpected", unexpected),
                                                              ("wrong shape", misshapen)) if names]
    if problems:
        raise CheckpointError(f"{where}: weights do not match the model: {'; '.join(problems)}")
    bad = nonfinite_names(weights)
    if bad:
        raise CheckpointError(f"{where}: non-finite values (NaN or inf) in {_few(bad)}")


def describe_nonfinite(tensors: Mapping[str, torch.Tensor]) -> str | None:
    """A short description of the non-finite tensors among ``tensors`` (None when all are finite)."""
    bad = nonfinite_names(tensors)
    return _few(bad) if bad else None
