"""Masked language modelling (BERT): corrupt ~15% of tokens 80/10/10, predict them."""
from __future__ import annotations

import torch
from pydantic import Field

from polymask.data.batching import Batch
from polymask.model.encoder import Encoder
from polymask.objectives.base import CorruptionConfig, LMHead, Objective, ObjectiveOutput, token_loss
from polymask.objectives.registry import OBJECTIVES
from polymask.tokenization import SpecialIds


class MLMConfig(CorruptionConfig):
    name: str = "mlm"
    mask_prob: float = Field(0.8, ge=0, le=1, description="selected positions replaced by [MASK] (BERT's 80%)")
    random_prob: float = Field(0.1, ge=0, le=1, description="selected positions replaced by a random token")


@OBJECTIVES.register("mlm")
class MaskedLM(Objective):
    """BERT-style MLM; the vocabulary projection runs only on the selected positions."""

    Config = MLMConfig
    config: MLMConfig
    rank_inputs = ("masked_real", "unmasked", "mask_tokens")
    lm_export = "head"
    fill_mask_note = ("the MLM head the encoder was pretrained with, on the encoder's output: fill-mask is the "
                      "pretrained model's own prediction.")

    def __init__(self, config: MLMConfig, encoder: Encoder, specials: SpecialIds, mask_span: int = 1,
                 shape_multiple: int = 1) -> None:
        super().__init__(config, encoder, specials, mask_span, shape_multiple)
        self.head = LMHead(encoder.config.d_model, encoder.embed, encoder.config.norm_eps, encoder.config.activation)

    def forward(self, batch: Batch, generator: torch.Generator) -> ObjectiveOutput:
        corruption = self.corrupt(batch, generator)
        hidden = self.encoder(corruption.input_ids, attention_mask=batch.attention_mask)
        selected = corruption.selected
        return token_loss(self.score_rows(hidden[selected]), batch.input_ids[selected], corruption.masked[selected])

    def masked_log_probs(self, batch: Batch, selected: torch.Tensor) -> torch.Tensor:
        """Every selected position replaced by [MASK] (no random or kept tokens), then the LM head."""
        corrupted = batch.input_ids.masked_fill(selected, self.specials.mask)
        hidden = self.encoder(corrupted, attention_mask=batch.attention_mask)
        return self.head(hidden[selected]).float().log_softmax(dim=-1)
