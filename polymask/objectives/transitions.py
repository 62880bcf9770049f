"""ExLM's transition scores between expanded states (the DAG's edges).

As in the reference implementation: each state's final hidden state is concatenated with a
learned embedding of its slot in the expanded sequence; query and key projections split into
``heads`` chunks give one attention-like distribution over later states per chunk (softmax over
the allowed targets), and a learned gate (softmax over chunks, from the source state) mixes them:

    log P(u -> v) = logsumexp_h( log_gate[u, h] + log_softmax_v( q_h[u] . k_h[v] / sqrt(d_h) ) )

Edges go only forward: to every later state (dense) or only to the states of the next group
(sparse). Scores, softmaxes and mixing run in fp32.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from polymask.objectives.dag import NEG


def allowed_edges(state_mask: Tensor, k: int, dense: bool) -> Tensor:
    """(B, N, N) True where state u may move to state v: v later than u (dense) or in u's next group."""
    states = state_mask.shape[1]
    index = torch.arange(states, device=state_mask.device)
    if dense:
        forward = index[None, :] > index[:, None]
    else:
        forward = (index // k)[None, :] == (index // k)[:, None] + 1
    return forward & state_mask[:, :, None] & state_mask[:, None, :]


def next_group_bias(states: int, k: int, bias: float) -> Tensor | None:
    """(N, N) ``bias`` on the edges from each state to the states of the next group (None when 0)."""
    if not bias:
        return None
    group = torch.arange(states) // k
    return (group[None, :] == group[:, None] + 1).float() * bias


class TransitionScorer(nn.Module):
    """Log transition probabilities (B, N, N) from the states' hidden vectors and slots."""

    def __init__(self, d_model: int, heads: int, max_slots: int) -> None:
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by the transition heads ({heads})")
        self.heads = heads
        self.max_slots = max_slots
        self.slot_embedding = nn.Embedding(max_slots, d_model)
        self.query = nn.Linear(2 * d_model, d_model)
        self.key = nn.Linear(2 * d_model, d_model)
        self.gate = nn.Linear(2 * d_model, heads)
        for module in (self.query, self.key, self.gate):
            nn.init.normal_(module.weight, std=0.02)
            nn.init.zeros_(module.bias)
        nn.init.normal_(self.slot_embedding.weight, std=0.02)

    def forward(self, hidden: Tensor, slots: Tensor, allowed: Tensor, bias: Tensor | None = None) -> Tensor:
        """hidden (B, N, D) of the states, slots (B, N) their expanded-sequence index, allowed (B, N, N);
        bias (N, N), added to every chunk's scores before the softmax (``next_group_bias``)."""
        if int(slots.max()) >= self.max_slots:
            raise ValueError(f"expanded sequence of {int(slots.max()) + 1} slots exceeds the transition position "
                             f"table ({self.max_slots}); raise objective.max_slots")
        features = torch.cat((hidden, self.slot_embedding(slots).to(hidden.dtype)), dim=-1)
        batch, states, _ = hidden.shape
        precise = torch.promote_types(hidden.dtype, torch.float32)  # fp32 under autocast, fp64 in tests
        query = self.query(features).to(precise).view(batch, states, self.heads, -1)
        key = self.key(features).to(precise).view(batch, states, self.heads, -1)
        log_gate = F.log_softmax(self.gate(features).to(precise), dim=-1)  # (B, N, H), from the source state
        with torch.autocast(hidden.device.type, enabled=False):
            scores = torch.einsum("buhd,bvhd->bhuv", query, key) * query.shape[-1] ** -0.5
            if bias is not None:
                scores = scores + bias.to(scores)
            blocked = ~allowed[:, None]
            log_attention = F.log_softmax(scores.masked_fill(blocked, NEG), dim=-1).masked_fill(blocked, NEG)
            return torch.logsumexp(log_attention + log_gate.transpose(1, 2)[..., None], dim=1)
