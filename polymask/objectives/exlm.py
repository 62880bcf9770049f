"""ExLM (arXiv 2501.13397): expand each [MASK] into k states and train them with a DAG loss.

A batch is masked (by default all selected positions become [MASK], as in the reference recipe),
then each masked position and each row's start and end token become k states
(``state_expansion``). The encoder runs on the expanded sequence with 2D rotary positions
(original index, state index). The vocabulary projection runs only on the expanded states;
transition scores between them come from ``TransitionScorer``; the loss is the negative log of
the probability of the target ([CLS], masked tokens left to right, [SEP]) summed over every
monotone path from the first [CLS] state to the last [SEP] state (``dag``), divided by the
target length and averaged over sequences, as the reference criterion does.

With ``mask_prob`` below 1, the selected positions not masked show a random token (``random_prob``)
or their own; they stay single states (state index 0) and the LM head predicts each from its own
state with cross-entropy. Every target then weighs the same, as in MLM: (the DAG's negative
log-likelihoods summed over rows + the shown tokens' cross-entropies summed) / (the DAG targets, each
row's masked tokens and its [CLS] and [SEP], + the shown tokens). Without shown tokens the loss is
the reference's per-row mean.

Masked-token accuracy: a masked token counts as correct when the state that emits it on the
Viterbi (most probable) path of the DAG predicts it as its argmax; a shown one by its own argmax.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import Tensor

from polymask.data.batching import Batch
from polymask.model.encoder import Encoder
from polymask.objectives.base import Corruption, CorruptionConfig, LMHead, Objective, ObjectiveOutput
from polymask.objectives.dag import dag_best_alignment, dag_log_likelihood
from polymask.objectives.registry import OBJECTIVES
from polymask.objectives.state_expansion import Expansion, expand_states
from polymask.objectives.transitions import TransitionScorer, allowed_edges, next_group_bias
from polymask.tokenization import SpecialIds


class ExLMConfig(CorruptionConfig):
    name: str = "exlm"
    k: int = Field(4, ge=1, le=64, description="states each masked position (and the start and end token) expands to")
    transitions: Literal["dense", "sparse"] = Field(
        "dense", description="dense: edges from a state to every later state; sparse: only to the next group's states")
    rope_2d: bool = Field(
        True, description="2D rotary positions (original index, state index); false: 1D over the expanded sequence")
    transition_grad: float = Field(
        0.0, ge=0, le=1, description="scale of the transition loss's gradient into the encoder: 0 (default) lets the "
        "transitions read the encoder's states without training the encoder for them; 1 as the reference code "
        "(collapses the encoder onto position at small budgets, docs/exlm.md)")
    group_attention: Literal["one_token", "per_state"] = Field(
        "one_token", description="one_token (default): every expanded state's attention logit is lowered by log k, so "
        "that k identical states draw the attention of one token, as the unexpanded input does; per_state: the "
        "reference code (the k copies draw k times the weight and dilute every token's context, docs/exlm.md)")
    next_group_bias: float = Field(
        5.0, description="added to the transition scores of edges into the next group, so that at initialisation "
        "the DAG follows the groups in order and target t is emitted by group t; 0: the reference code (uniform "
        "initial transitions, a degenerate alignment at small budgets, docs/exlm.md)")
    max_slots: int = Field(2048, ge=8, description="longest expanded sequence the transition position table covers")


def scale_gradient(x: Tensor, scale: float) -> Tensor:
    """``x`` in the forward pass; its gradient multiplied by ``scale`` in the backward pass."""
    if scale == 1:
        return x
    return x.detach() if scale == 0 else x * scale + x.detach() * (1 - scale)


@dataclass
class DagScores:
    """What the DAG needs for one batch: per-state vocabulary log-probs, emissions and transitions."""

    expansion: Expansion
    log_probs: Tensor   # (B, N, V) fp32
    emissions: Tensor   # (B, T, N) fp32: log P(target t | state v)
    links: Tensor       # (B, N, N) fp32: log P(u -> v)
    shown_logits: Tensor  # (S, V): the LM head on the selected positions left unmasked, in ``input_ids`` order


@OBJECTIVES.register("exlm")
class ExLM(Objective):
    """ExLM's objective; its LM head and transition scorer are dropped at fine-tuning."""

    Config = ExLMConfig
    config: ExLMConfig
    lm_export = "head"
    fill_mask_note = ("ExLM's LM head applied to the encoder's output on the unexpanded sequence (each [MASK] is one "
                      "position, state index 0). This is NOT how ExLM predicted in pretraining: there each [MASK] "
                      "became k states (state indices 1..k) and a DAG of transitions aligned states to tokens; the "
                      "transition scorer is not exported. Treat fill-mask scores as indicative only; the encoder "
                      "(`AutoModel`), which is what ExLM fine-tuning uses, is exact.")

    def __init__(self, config: ExLMConfig, encoder: Encoder, specials: SpecialIds, mask_span: int = 1,
                 shape_multiple: int = 1) -> None:
        super().__init__(config, encoder, specials, mask_span, shape_multiple)
        if encoder.config.rope_2d != config.rope_2d:
            raise ValueError(f"ExLM with rope_2d={config.rope_2d} needs an encoder built with the same setting")
        d_model = encoder.config.d_model
        self.head = LMHead(d_model, encoder.embed, encoder.config.norm_eps, encoder.config.activation)
        self.transitions = TransitionScorer(d_model, encoder.config.n_heads, config.max_slots)

    @classmethod
    def encoder_overrides(cls, config: ExLMConfig) -> dict[str, Any]:
        return {"rope_2d": config.rope_2d}

    def expand(self, batch: Batch, corruption: Corruption | Tensor) -> Expansion:
        """The expanded batch the encoder runs on: the masked positions expanded, the others as shown (a tensor of
        selected positions: all of them masked)."""
        if isinstance(corruption, Tensor):
            corruption = Corruption.all_masked(batch.input_ids, corruption, self.specials.mask)
        return expand_states(batch.input_ids, corruption.masked, batch.attention_mask, self.config.k,
                             self.specials.mask, self.specials.pad, corruption.input_ids)

    def key_bias(self, expansion: Expansion) -> Tensor | None:
        """-log k on every expanded state's attention logit (``group_attention="one_token"``), else None."""
        if self.config.group_attention == "per_state" or self.config.k == 1:
            return None
        return (expansion.state_index > 0).float() * -math.log(self.config.k)

    def score(self, batch: Batch, corruption: Corruption | Tensor) -> DagScores:
        """Expand, encode, and score emissions and transitions of the expanded states (and the LM head on the
        selected positions left unmasked); a tensor of selected positions: all of them masked."""
        config = self.config
        if isinstance(corruption, Tensor):
            corruption = Corruption.all_masked(batch.input_ids, corruption, self.specials.mask)
        expansion = self.expand(batch, corruption)
        hidden = self.encoder(expansion.input_ids, attention_mask=expansion.attention_mask,
                              position_ids=expansion.position_ids(config.rope_2d), key_bias=self.key_bias(expansion))
        slots = expansion.state_slots
        states = hidden.gather(1, slots[..., None].expand(-1, -1, hidden.shape[-1]))
        log_probs = self.head(states).float().log_softmax(dim=-1)
        targets = expansion.targets[:, None, :].expand(-1, slots.shape[1], -1)
        emissions = log_probs.gather(2, targets).transpose(1, 2)
        allowed = allowed_edges(expansion.state_mask, config.k, config.transitions == "dense")
        links = self.transitions(scale_gradient(states, config.transition_grad), slots, allowed,
                                 next_group_bias(allowed.shape[1], config.k, config.next_group_bias))
        shown = corruption.shown
        rows = torch.arange(shown.shape[0], device=shown.device)[:, None].expand_as(shown)[shown]
        shown_logits = self.score_rows(hidden[rows, expansion.first_slot[shown]])
        return DagScores(expansion, log_probs, emissions, links, shown_logits)

    def aligned_states(self, scores: DagScores) -> tuple[Tensor, Tensor]:
        """The state emitting each target on the Viterbi path (B, T), and which targets are masked tokens."""
        expansion = scores.expansion
        lengths = expansion.target_lengths
        path = dag_best_alignment(scores.emissions, scores.links, expansion.state_counts, lengths)
        index = torch.arange(path.shape[1], device=path.device)
        return path.clamp(min=0), (index > 0) & (index < (lengths - 1)[:, None])

    def aligned_log_probs(self, scores: DagScores) -> Tensor:
        """Vocabulary log-probs (M, V) of the Viterbi-aligned state of each masked token, in the order of
        ``input_ids[selected]``."""
        path, masked = self.aligned_states(scores)
        vocab = scores.log_probs.shape[-1]
        return scores.log_probs.gather(1, path[..., None].expand(-1, -1, vocab))[masked]

    def forward(self, batch: Batch, generator: torch.Generator) -> ObjectiveOutput:
        """DAG loss over the masked tokens and cross-entropy over the shown ones, each target weighing the same;
        accuracy from the Viterbi-aligned states' argmax (masked) and the own state's argmax (shown)."""
        corruption = self.corrupt(batch, generator)
        scores = self.score(batch, corruption)
        expansion = scores.expansion
        lengths = expansion.target_lengths
        with torch.autocast(batch.input_ids.device.type, enabled=False):
            log_likelihood = dag_log_likelihood(scores.emissions, scores.links, expansion.state_counts, lengths)
        masked_count, shown_count = int(corruption.masked.sum()), int(corruption.shown.sum())
        shown_targets = batch.input_ids[corruption.shown]
        if shown_count:  # every target, of the DAG or a shown token, weighs the same
            shown_loss = F.cross_entropy(scores.shown_logits.float(), shown_targets, reduction="sum")
            loss = (shown_loss - log_likelihood.sum()) / (lengths.sum() + shown_count)
        else:  # the reference's criterion: each row's per-target mean, averaged over rows
            loss = -(log_likelihood / lengths).mean()
        with torch.no_grad():
            path, masked = self.aligned_states(scores)
            predicted = scores.log_probs.argmax(dim=-1).gather(1, path)[masked]
            masked_correct = (predicted == batch.input_ids[corruption.masked]).sum()
            correct = masked_correct + (scores.shown_logits.argmax(dim=-1) == shown_targets).sum()
        if not shown_count:
            return ObjectiveOutput(loss, masked_count, correct)
        return ObjectiveOutput(loss, masked_count + shown_count, correct, masked_count, masked_correct)

    def masked_log_probs(self, batch: Batch, selected: Tensor) -> Tensor:
        """The DAG-aligned prediction of each masked token from its k expanded states."""
        return self.aligned_log_probs(self.score(batch, selected))
