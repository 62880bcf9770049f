"""Multi-process training on torch.distributed (launched with ``torchrun``).

Every rank walks the same deterministic stream of micro-batches; at each optimiser step the next
``world_size x grad_accum`` micro-batches are dealt out round-robin, so rank r trains on global
micro-batches r, r + W, ... and reads only those records. Masking is seeded by the global
micro-batch index, so W processes with ``grad_accum`` = a compute exactly what one process with
``grad_accum`` = W x a computes. Only rank 0 writes checkpoints, metrics and the summary.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence, TypeVar

import torch
import torch.distributed as dist
from torch import nn

T = TypeVar("T")


@dataclass(frozen=True)
class DistributedContext:
    """Rank and world size of this process (a single process is rank 0 of 1)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()

    def sum(self, values: Sequence[float], device: torch.device) -> list[float]:
        """Element-wise sum over ranks."""
        if not self.enabled:
            return list(values)
        tensor = torch.tensor(list(values), dtype=torch.float64, device=device)
        dist.all_reduce(tensor)
        return tensor.tolist()

    def own(self, micro_batches: Sequence[T], grad_accum: int) -> list[tuple[int, T]]:
        """This rank's (global index, micro-batch) pairs among one step's W x grad_accum micro-batches."""
        return [(index, micro_batches[index]) for index in range(self.rank, grad_accum * self.world_size, self.world_size)]


def init_distributed(device_name: str) -> DistributedContext:
    """Join the process group torchrun describes in the environment (no-op for a single process)."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size == 1:
        return DistributedContext()
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available() and device_name != "cpu"
    if use_cuda:
        torch.cuda.set_device(local_rank)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    return DistributedContext(rank, world_size, local_rank)


def wrap_model(model: nn.Module, context: DistributedContext, device: torch.device, strategy: str) -> nn.Module:
    """DistributedDataParallel, or FSDP2 (``fully_shard`` per Transformer block, then the root)."""
    if not context.enabled:
        return model
    if strategy == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for block in model.encoder.blocks:
            fully_shard(block)
        return fully_shard(model)
    device_ids = [device.index] if device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(model, device_ids=device_ids)


def shutdown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
