"""What ``polymask bench`` measures about one contender: step time, real tokens/s, padding, encoder time and
positions, FLOPs per token (counted by ``torch.utils.flop_counter``) and peak memory.

Model FLOPs utilisation (MFU) = counted FLOPs per second / the device's matmul peak, measured in the
same run (``matmul_peak``) for the precision the contender trains in. FLOPs are those the objective
actually executes (forward and backward matrix products and attention), so ExLM's expanded sequence
and MAE-LM's shorter encoder input are counted as run.
"""
from __future__ import annotations

import re
import statistics
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from polymask.bench.contenders import Contender


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_peak(device: torch.device, dtype: torch.dtype, max_size: int = 2048, seconds: float = 0.2) -> float:
    """Sustained FLOP/s of square matrix products on ``device`` in ``dtype``: the best over sizes 128, 256, ...
    up to ``max_size``, each timed for about ``seconds``. Sizes stop growing once one product takes longer than
    ``seconds`` (CPUs that emulate bf16 run a 2048 product in ~90 s, and small products faster than large ones)."""
    best, size = 0.0, 128
    while size <= max_size:
        a = torch.randn(size, size, device=device, dtype=dtype)
        b = torch.randn(size, size, device=device, dtype=dtype)
        a @ b
        _sync(device)
        fastest, start = float("inf"), time.perf_counter()
        while time.perf_counter() - start < seconds:
            began = time.perf_counter()
            a @ b
            _sync(device)
            fastest = min(fastest, time.perf_counter() - began)
        best = max(best, 2 * size**3 / fastest)
        if fastest > seconds / 2:
            break
        size *= 2
    return best


class EncoderMeter:
    """Forward time and input positions of the encoder module, through forward hooks."""

    def __init__(self, module: nn.Module, device: torch.device) -> None:
        self.device, self.seconds, self.positions, self._start = device, 0.0, 0, 0.0
        self._handles = [module.register_forward_pre_hook(self._before, with_kwargs=True),
                         module.register_forward_hook(self._after)]

    def _before(self, module: nn.Module, args: tuple, kwargs: dict) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.positions += int(ids.numel()) if ids is not None else int(kwargs["inputs_embeds"].shape[:2].numel())
        _sync(self.device)
        self._start = time.perf_counter()

    def _after(self, module: nn.Module, args: tuple, output: Any) -> None:
        _sync(self.device)
        self.seconds += time.perf_counter() - self._start

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


@contextmanager
def peak_memory(device: torch.device) -> Iterator[dict[str, float]]:
    """Peak memory (MiB) inside the block: CUDA allocator peak, or on CPU the process's peak resident set
    (Linux ``VmHWM``, reset through ``/proc/self/clear_refs`` on entry)."""
    result: dict[str, float] = {}
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        yield result
        result["peak_memory_mib"] = torch.cuda.max_memory_allocated(device) / 2**20
        result["memory_kind"] = "CUDA allocated"
        return
    status = Path("/proc/self/status")
    Path("/proc/self/clear_refs").write_text("5")
    yield result
    result["peak_memory_mib"] = int(re.search(r"VmHWM:\s+(\d+) kB", status.read_text()).group(1)) / 1024
    result["memory_kind"] = "process RSS"


def measure(contender: Contender, warmup: int, steps: int, flop_steps: int) -> dict[str, Any]:
    """Time ``steps`` optimiser steps after ``warmup``, then count the FLOPs of ``flop_steps`` more."""
    for _ in range(warmup):
        contender.step()
    meter = EncoderMeter(contender.encoder, contender.device)
    durations, real, padded = [], 0, 0
    with peak_memory(contender.device) as memory:
        for _ in range(steps):
            _sync(contender.device)
            start = time.perf_counter()
            step_real, step_padded = contender.step()
            _sync(contender.device)
            durations.append(time.perf_counter() - start)
            real, padded = real + step_real, padded + step_padded
    meter.remove()
    counter, counted_real = FlopCounterMode(display=False), 0
    with counter:
        for _ in range(flop_steps):
            counted_real += contender.step()[0]
    return {"precision": contender.precision, "real_tokens_per_s": real / sum(durations),
            "step_ms": 1000 * statistics.median(durations), "padding_fraction": 1 - real / padded,
            "encoder_ms_per_step": 1000 * meter.seconds / steps, "encoder_positions_per_step": meter.positions / steps,
            "input_positions_per_step": padded / steps, "flops_per_real_token": counter.get_total_flops() / counted_real,
            **memory}
