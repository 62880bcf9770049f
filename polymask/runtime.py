"""Device, precision and RNG helpers for the trainer."""
from __future__ import annotations

import contextlib
import functools
import platform
import random
import sys
import time
from contextvars import ContextVar
from pathlib import Path
from typing import Any, ContextManager, Iterator

import torch
from tqdm.auto import tqdm


def resolve_device(name: str) -> torch.device:
    """``auto`` picks CUDA when available, else the CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device '{name}' requested but CUDA is not available")
    return device


@functools.lru_cache(maxsize=None)
def _cpu_bf16_faster(size: int = 1024, rounds: int = 5, margin: float = 1.1) -> bool:
    """Whether a bf16 matrix product beats fp32 by ``margin`` on this CPU (best of interleaved rounds, so a
    burst of load on a shared machine cannot flip the answer; measured once per process). Its operands come from
    a private generator: the probe leaves the global RNG, and so a seeded model's initial weights, untouched."""
    generator = torch.Generator().manual_seed(0)
    operands = {dtype: tuple(torch.randn(size, size, dtype=dtype, generator=generator) for _ in range(2))
                for dtype in (torch.bfloat16, torch.float32)}
    best = {dtype: float("inf") for dtype in operands}
    for _ in range(rounds):
        for dtype, (a, b) in operands.items():
            start = time.perf_counter()
            a @ b
            best[dtype] = min(best[dtype], time.perf_counter() - start)
    return best[torch.bfloat16] * margin < best[torch.float32]


def native_bf16(device: torch.device) -> bool:
    """Whether bf16 autocast pays off: Ampere+ GPUs; CPUs with AVX512-BF16/AMX whose bf16 products also
    measure faster than fp32 (some virtualised CPUs report the instructions but run bf16 at half speed)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
        return any(getattr(torch.cpu, probe, lambda: False)() for probe in probes) and _cpu_bf16_faster()
    return False


def precision_used(device: torch.device, precision: str) -> str:
    """The precision ``autocast`` applies: "bf16" or "fp32"."""
    return "bf16" if precision == "bf16" or (precision == "auto" and native_bf16(device)) else "fp32"


def autocast(device: torch.device, precision: str) -> ContextManager[Any]:
    """bf16 autocast where asked for, or with ``auto`` where the hardware has native bf16."""
    if precision_used(device, precision) != "bf16":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)


def step_generator(seed: int, step: int, micro: int = 0, stream: int = 0) -> torch.Generator:
    """A CPU generator determined by (seed, step, micro-batch, stream): masking is reproducible."""
    generator = torch.Generator()
    generator.manual_seed(hash((seed, step, micro, stream)) & (2**63 - 1))
    return generator


def rng_tensors() -> dict[str, torch.Tensor]:
    """Global RNG states (dropout, etc.) as tensors for the checkpoint."""
    states = {"rng.torch_cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        for index, state in enumerate(torch.cuda.get_rng_state_all()):
            states[f"rng.cuda.{index}"] = state
    return states


def restore_rng(tensors: dict[str, torch.Tensor], python_state: list | None) -> None:
    torch.set_rng_state(tensors["rng.torch_cpu"])
    cuda = [tensors[k] for k in sorted(tensors) if k.startswith("rng.cuda.")]
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda)
    if python_state is not None:
        random.setstate((python_state[0], tuple(python_state[1]), python_state[2]))


def progress_bar(**kwargs: Any) -> tqdm:
    """A tqdm bar that refreshes twice a second on a terminal and every 30 s in a log file."""
    interactive = sys.stderr.isatty()
    return tqdm(mininterval=0.5 if interactive else 30.0, dynamic_ncols=True, **kwargs)


def tqdm_write(line: str) -> None:
    """Print a line to stderr without breaking an active progress bar."""
    tqdm.write(line, file=sys.stderr)


_INNER_PROGRESS: ContextVar[bool] = ContextVar("inner_progress", default=False)


@contextlib.contextmanager
def inner_progress(enabled: bool) -> Iterator[None]:
    """Within this block, ``inner_progress_bar`` shows (e.g. a benchmark cell's epochs and steps under the
    benchmark's own bar) when ``enabled``."""
    token = _INNER_PROGRESS.set(enabled)
    try:
        yield
    finally:
        _INNER_PROGRESS.reset(token)


def inner_progress_bar(**kwargs: Any) -> tqdm:
    """A bar for work inside an outer one: hidden unless inside ``inner_progress(True)``, removed when closed."""
    return progress_bar(disable=not _INNER_PROGRESS.get(), leave=False, **kwargs)


def where_run(device: torch.device) -> dict[str, Any]:
    """Where a result was computed: the device's name (``machine``) and the torch threads, for each result's record
    (a CPU cell and a GPU cell of one recipe can differ by more than seed noise)."""
    return {"device": machine(device)["device"], "threads": torch.get_num_threads()}


def machine(device: torch.device | None = None) -> dict[str, Any]:
    """The device (GPU name, else the CPU model; or those of ``device``), torch threads, torch and Python versions,
    for result files."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    on_gpu = torch.cuda.is_available() if device is None else device.type == "cuda"
    name = torch.cuda.get_device_name(device) if on_gpu else f"CPU: {cpu}"
    return {"device": name, "threads": torch.get_num_threads(), "torch": torch.__version__,
            "python": platform.python_version()}
