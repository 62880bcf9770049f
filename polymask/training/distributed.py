"""Multi-process training on torch.distributed (launched with ``torchrun``).

Every rank walks the same deterministic stream of micro-batches; at each optimiser step the next
``world_size x grad_accum`` micro-batches are dealt out round-robin, so rank r trains on global
micro-batches r, r + W, ... and reads only those records. Masking is seeded by the global
micro-batch index, so W processes with ``grad_accum`` = a compute exactly what one process with
``grad_accum`` = W x a computes. Only rank 0 writes checkpoints, metrics and the summary.

A collective that waits longer than ``train.dist_timeout`` for another rank, or whose peer has ended,
raises; ``peer_failure`` tells the trainer so. Under ``torchrun --max-restarts N`` each start of the worker
group meets in a namespace of its own in torchrun's store (``_attempt_store``).
"""
from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from typing import Sequence, TypeVar

import torch
import torch.distributed as dist
from torch import nn

T = TypeVar("T")

#: whether this process initialised a process group (``joined_process_group``)
_joined = False


@dataclass(frozen=True)
class DistributedContext:
    """Rank and world size of this process (a single process is rank 0 of 1); ``owns_group``: this context
    initialised the process group, and ``close`` destroys it."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    owns_group: bool = False

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

    def close(self) -> None:
        """Destroy the process group if this context initialised it (a group the caller made is the caller's)."""
        if self.owns_group:
            shutdown()


def init_distributed(device_name: str, timeout_s: float) -> DistributedContext:
    """Join the process group torchrun describes in the environment (no-op for a single process); a collective
    that waits longer than ``timeout_s`` for another rank raises (see ``peer_failure``)."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size == 1:
        return DistributedContext()
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available() and device_name != "cpu"
    if use_cuda:
        torch.cuda.set_device(local_rank)
    owns_group = not dist.is_initialized()
    if owns_group:
        global _joined
        _joined = True
        timeout = datetime.timedelta(seconds=timeout_s)
        dist.init_process_group(backend="nccl" if use_cuda else "gloo", timeout=timeout, store=_attempt_store(timeout),
                                rank=rank, world_size=world_size)
    return DistributedContext(rank, world_size, local_rank, owns_group)


def joined_process_group() -> bool:
    """Whether this process initialised a process group (``init_distributed`` under torchrun), even one it has
    since destroyed: the command line then ends the process with ``polymask.cli.end_worker``."""
    return _joined


def _attempt_store(timeout: datetime.timedelta) -> dist.Store | None:
    """torchrun's own store, with a key prefix per start of the worker group (None: let ``env://`` connect).

    torchrun keeps that store across the restarts ``--max-restarts`` allows, and a restarted group that read
    the addresses its dead predecessor left there could not connect (pytorch issue 135712); on one node every
    worker sees the same ``TORCHELASTIC_RESTART_COUNT``."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False, timeout=timeout)
    return dist.PrefixStore(f"polymask/attempt-{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}", store)


#: What gloo's errors (plain RuntimeErrors) say when a peer stopped answering or ended.
_PEER_FAILURES = ("Timed out", "pair closure", "Connection closed by peer", "Connection reset by peer")


def peer_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is a collective that failed because another rank stopped answering or ended."""
    return isinstance(exc, dist.DistError) or (isinstance(exc, RuntimeError)
                                               and any(words in str(exc) for words in _PEER_FAILURES))


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
    """Destroy the default process group, if there is one (at the end of a distributed run)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
