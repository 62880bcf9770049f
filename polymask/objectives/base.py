"""The ``Objective`` strategy: how a batch is corrupted, which extra modules exist, what the loss is.

An objective wraps the shared encoder (``self.encoder``); every other submodule it owns (an LM
head, MAE-LM's decoder, ExLM's transition projections) is dropped when the encoder is fine-tuned
or exported: only the ``encoder.`` weights are kept.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import Field, model_validator
from torch import Tensor, nn

from polymask.data.batching import Batch, round_up
from polymask.data.masking import maskable_positions, replace_at_random, sample_mask, split_selected
from polymask.errors import PolymaskError
from polymask.model.encoder import Encoder
from polymask.model.layers import gelu
from polymask.schema import ComponentConfig
from polymask.tokenization import SpecialIds


#: The mask ratio an objective uses unless its config says otherwise (``ObjectiveConfig.mask_ratio``).
MASK_RATIO = 0.15


class ObjectiveConfig(ComponentConfig):
    """Options shared by every objective."""

    mask_ratio: float = Field(MASK_RATIO, gt=0, lt=1, description="fraction of maskable tokens selected per sequence")


class CorruptionConfig(ObjectiveConfig):
    """Options of an objective that corrupts its selected positions as BERT does (``Objective.corrupt``):
    ``mask_prob`` of them are masked, ``random_prob`` show a random token, the rest keep their own; all are
    predicted. What "masked" means is the objective's: [MASK] (MLM), removed from the encoder (MAE-LM), expanded
    into k [MASK] states (ExLM). The default, every selected position masked, is MAE-LM's and ExLM's papers'."""

    mask_prob: float = Field(1.0, ge=0, le=1, description="selected positions masked (the objective's kind of mask)")
    random_prob: float = Field(0.0, ge=0, le=1, description="selected positions shown as a random token, predicted")

    @model_validator(mode="after")
    def _check_split(self) -> "CorruptionConfig":
        if self.mask_prob + self.random_prob > 1:
            total = self.mask_prob + self.random_prob
            raise ValueError(f"objective.mask_prob + objective.random_prob = {total:g} exceeds 1")
        return self


@dataclass
class Corruption:
    """One batch's corruption: which positions are predicted, which of them are masked, and the input shown."""

    selected: Tensor   # (B, L) positions predicted
    masked: Tensor     # (B, L) the subset of ``selected`` that is masked
    input_ids: Tensor  # (B, L) [MASK] at masked positions, a random token at randomised ones, the token elsewhere

    @property
    def shown(self) -> Tensor:
        """(B, L) selected positions that stay in the input (kept or randomised)."""
        return self.selected & ~self.masked

    @classmethod
    def all_masked(cls, input_ids: Tensor, selected: Tensor, mask_id: int) -> "Corruption":
        """Every ``selected`` position masked (the prediction that analyses and fill-mask ask for)."""
        return cls(selected, selected, input_ids.masked_fill(selected, mask_id))


@dataclass
class ObjectiveOutput:
    """Loss of one batch plus the counts behind masked-token accuracy; ``masked_predictions`` and ``masked_correct``
    count the masked positions alone where some predicted ones were shown (kept or random tokens, which an encoder
    may copy): the collapse alarm reads those. None: every prediction is of a masked position."""

    loss: Tensor
    predictions: int
    correct: Tensor
    masked_predictions: int | None = None
    masked_correct: Tensor | None = None


class LMHead(nn.Module):
    """BERT's prediction head: dense -> GELU -> LayerNorm -> tied vocabulary projection (+ bias)."""

    def __init__(self, d_model: int, embedding: nn.Embedding, norm_eps: float = 1e-5, activation: str = "gelu") -> None:
        super().__init__()
        self.activation = activation
        self.dense = nn.Linear(d_model, d_model)
        self.norm = nn.LayerNorm(d_model, eps=norm_eps)
        self.embedding = [embedding]  # a list, so the tied weight is not registered (or saved) twice
        self.bias = nn.Parameter(torch.zeros(embedding.num_embeddings))
        nn.init.normal_(self.dense.weight, std=0.02)
        nn.init.zeros_(self.dense.bias)

    def forward(self, hidden: Tensor) -> Tensor:
        hidden = self.norm(gelu(self.dense(hidden), self.activation))
        return F.linear(hidden, self.embedding[0].weight, self.bias)

    @torch.no_grad()
    def lower_bias(self, token_ids: Tensor, value: float) -> None:
        """Start the output bias of ``token_ids`` at ``value`` (tokens the training data never holds)."""
        self.bias[token_ids.to(self.bias.device)] = value


class Objective(nn.Module):
    """Base class; subclasses set ``Config`` and implement ``forward``.

    What other parts of polymask ask of an objective, it answers here (a new objective is one file):

    - ``masked_log_probs``: its prediction at masked positions (``polymask analyze semantics``, ``compare``);
    - ``rank_inputs``: the inputs whose per-layer effective rank ``polymask analyze rank`` measures;
    - ``lm_export`` and ``fill_mask_note``: what ``polymask export`` carries for ``AutoModelForMaskedLM``.

    ``build_objective`` constructs one as ``cls(config, encoder, specials, mask_span, shape_multiple)``; a subclass
    that adds modules takes the same arguments and passes them on.
    """

    Config: ClassVar[type[ObjectiveConfig]] = ObjectiveConfig
    #: ``polymask analyze rank`` input kinds: ``unmasked`` (the real sequence), ``masked_real`` (the unselected
    #: real tokens of a masked sequence), ``mask_tokens`` (the [MASK] positions), ``visible_only`` (the visible
    #: tokens alone, as MAE-LM's encoder sees them).
    rank_inputs: ClassVar[tuple[str, ...]] = ("unmasked",)
    #: What an export's masked-LM model computes: ``head`` (``self.head``, an ``LMHead``, on the encoder output of
    #: the sequence with its [MASK] tokens; transformers' native ``EsmForMaskedLM`` where the encoder is native),
    #: ``decoder`` (MAE-LM: [MASK] hidden from the encoder, ``self.decoder`` and ``self.head`` reconstruct them;
    #: remote code), or None (no ``AutoModelForMaskedLM``).
    lm_export: ClassVar[str | None] = None
    #: The model card's sentence on what fill-mask means for this objective.
    fill_mask_note: ClassVar[str] = ""

    def __init__(self, config: ObjectiveConfig, encoder: Encoder, specials: SpecialIds, mask_span: int = 1,
                 shape_multiple: int = 1) -> None:
        super().__init__()
        self.config = config
        self.encoder = encoder
        self.specials = specials
        self.mask_span = mask_span
        #: rows and widths are padded to multiples of this (``train.shape_multiple``, as the trainer resolved it)
        self.shape_multiple = shape_multiple
        self.register_buffer("special_ids", torch.tensor(specials.all), persistent=False)
        pool = [i for i in range(encoder.vocab_size) if i not in set(specials.all)]
        self.register_buffer("random_pool", torch.tensor(pool), persistent=False)

    def lower_absent_tokens(self, token_counts: np.ndarray, value: float) -> int:
        """Start every prediction head's bias at ``value`` for the (non-special) tokens whose count in the
        training data is 0: none of them is ever a target, and a head that starts uniform over the whole
        vocabulary spends its first hundreds of steps learning that (the SMILES vocabulary spells every
        bracket atom, but a corpus holds a fifth of its tokens). Returns how many tokens were lowered."""
        absent = np.flatnonzero(token_counts[:self.encoder.vocab_size] == 0)
        absent = torch.as_tensor(absent[~np.isin(absent, self.specials.all)])
        for module in self.modules():
            if isinstance(module, LMHead):
                module.lower_bias(absent, value)
        return len(absent)

    @classmethod
    def encoder_overrides(cls, config: ObjectiveConfig) -> dict[str, Any]:
        """Encoder settings this objective decides (``RunConfig`` derives ``model.*`` from them): one-dimensional
        rotary positions, unless an objective says otherwise (ExLM's ``rope_2d``)."""
        return {"rope_2d": False}

    def select(self, batch: Batch, generator: torch.Generator, mask_ratio: float | None = None) -> Tensor:
        """The positions (B, L) this objective masks: ``mask_ratio`` of the maskable tokens (default: the config's),
        in spans of ``mask_span`` (what happens to them — corrupted, removed, expanded — is the objective's
        business)."""
        maskable = maskable_positions(batch.input_ids, self.special_ids)
        ratio = self.config.mask_ratio if mask_ratio is None else mask_ratio
        return sample_mask(maskable, ratio, generator, self.mask_span)

    def corrupt(self, batch: Batch, generator: torch.Generator) -> Corruption:
        """Select positions (``select``) and split them by the config's ``mask_prob`` and ``random_prob`` (a
        ``CorruptionConfig``): masked, shown as a random token, or kept."""
        config = self.config
        if not isinstance(config, CorruptionConfig):
            raise TypeError(f"objective '{config.name}': corrupt() needs a CorruptionConfig (mask_prob, random_prob)")
        selected = self.select(batch, generator)
        masked, randomised = split_selected(selected, generator, config.mask_prob, config.random_prob)
        shown = replace_at_random(batch.input_ids.masked_fill(masked, self.specials.mask), randomised,
                                  self.random_pool, generator)
        return Corruption(selected, masked, shown)

    def forward(self, batch: Batch, generator: torch.Generator) -> ObjectiveOutput:
        raise NotImplementedError

    def score_rows(self, rows: Tensor) -> Tensor:
        """``self.head`` on (M, D) rows, computed on M rounded up to a multiple of ``8 * shape_multiple`` (zero rows,
        dropped again): a bounded set of shapes, whose kernels bf16 on CPU caches per shape. ``shape_multiple`` 1:
        the rows as they are."""
        count, multiple = rows.shape[0], 8 * self.shape_multiple if self.shape_multiple > 1 else 1
        padded = round_up(count, multiple)
        if padded != count:
            rows = torch.cat([rows, rows.new_zeros(padded - count, rows.shape[1])])
        return self.head(rows)[:count]

    @classmethod
    def predicts_masked_tokens(cls) -> bool:
        """Whether ``masked_log_probs`` is implemented (``polymask analyze semantics`` and ``compare`` need it)."""
        return cls.masked_log_probs is not Objective.masked_log_probs

    def masked_log_probs(self, batch: Batch, selected: Tensor) -> Tensor:
        """Log-probabilities (M, V) over the vocabulary at the ``selected`` positions (in the order of
        ``batch.input_ids[selected]``), as this objective predicts a masked token."""
        raise NotImplementedError(f"objective '{self.config.name}' does not predict masked tokens")


def checked_output(output: Any, name: str) -> ObjectiveOutput:
    """``output`` of objective ``name``'s ``forward`` if it is an ``ObjectiveOutput``; else one line saying what it is
    (a custom objective returning a bare loss)."""
    if not isinstance(output, ObjectiveOutput):
        raise PolymaskError(f"objective '{name}': forward returned {type(output).__name__}, not an ObjectiveOutput "
                            f"(loss, predictions, correct); polymask.objectives.token_loss(logits, targets) makes one")
    return output


def token_loss(logits: Tensor, targets: Tensor, masked: Tensor | None = None) -> ObjectiveOutput:
    """Mean cross-entropy (in fp32) over prediction rows, with the correct-prediction count; ``masked`` (M,) marks the
    rows of masked positions when some rows are of shown ones (then counted apart as well)."""
    loss = F.cross_entropy(logits.float(), targets)
    hits = logits.detach().argmax(dim=-1) == targets
    if masked is None or bool(masked.all()):
        return ObjectiveOutput(loss, int(targets.numel()), hits.sum())
    return ObjectiveOutput(loss, int(targets.numel()), hits.sum(), int(masked.sum()), hits[masked].sum())
