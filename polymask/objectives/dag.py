"""The DA-Transformer dynamic programme over a DAG of states, in log space.

A row has ``n`` states (vertices 0..n-1, edges only forward) and a target ``y_0 .. y_{T-1}``. A
path starts at vertex 0 emitting ``y_0``, moves along edges, emits one target token per visited
vertex, and ends at vertex ``n - 1`` emitting ``y_{T-1}``. ``log P(y)`` sums over every such path:

    f[0, v] = emit[0, 0] if v == 0 else -inf
    f[t, v] = logsumexp_u(f[t-1, u] + links[u, v]) + emit[t, v]
    log P(y) = f[T-1, n-1]

Everything is vectorised over the batch and the states; the loop runs over target positions.
Forbidden edges and padding carry ``NEG`` (a large finite negative number rather than -inf, so
that gradients through unreachable states are exactly zero instead of NaN).
"""
from __future__ import annotations

import torch
from torch import Tensor

NEG = -1e9


def _initial(emissions: Tensor) -> Tensor:
    batch, _, states = emissions.shape
    f = emissions.new_full((batch, states), NEG)
    f[:, 0] = emissions[:, 0, 0]
    return f


def dag_log_likelihood(emissions: Tensor, links: Tensor, state_counts: Tensor, target_lengths: Tensor) -> Tensor:
    """log P(target) of each row, summed over all monotone paths.

    emissions (B, T, N): log P(y_t | state v); links (B, N, N): log P(u -> v), ``NEG`` where there is
    no edge; state_counts (B,) states per row; target_lengths (B,) targets per row (at least 1).
    Returns (B,) in the dtype of ``emissions``.
    """
    rows = torch.arange(emissions.shape[0], device=emissions.device)
    exits = state_counts - 1
    f = _initial(emissions)
    result = torch.where(target_lengths == 1, f[rows, exits], 0.0)
    for t in range(1, emissions.shape[1]):
        f = torch.logsumexp(f.unsqueeze(2) + links, dim=1) + emissions[:, t]
        result = torch.where(target_lengths == t + 1, f[rows, exits], result)
    return result


@torch.no_grad()
def dag_best_alignment(emissions: Tensor, links: Tensor, state_counts: Tensor, target_lengths: Tensor) -> Tensor:
    """Viterbi: the state that emits each target on the most probable path, (B, T); -1 on padding."""
    batch, targets, _ = emissions.shape
    rows = torch.arange(batch, device=emissions.device)
    f = _initial(emissions)
    pointers = []
    for t in range(1, targets):
        best, previous = (f.unsqueeze(2) + links).max(dim=1)
        pointers.append(previous)
        f = torch.where((t < target_lengths)[:, None], best + emissions[:, t], f)
    path = torch.full((batch, targets), -1, dtype=torch.long, device=emissions.device)
    state = state_counts - 1
    for t in range(targets - 1, -1, -1):
        here = t < target_lengths
        path[:, t] = torch.where(here, state, -1)
        if t > 0:
            state = torch.where(here, pointers[t - 1][rows, state], state)
    return path
