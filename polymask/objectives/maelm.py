"""MAE-LM (arXiv 2302.02060): [MASK] tokens never enter the encoder; a shallow decoder reconstructs.

The selected positions are removed from the encoder's input (``visible.compact_visible``); the visible
tokens keep their original position ids, so the encoder runs on a shorter batch and its cost falls
with the mask ratio. Encoder outputs go back to their original positions, the shared [MASK]
embedding (the encoder's input embedding row) fills the removed ones, and a shallow bidirectional
decoder with its own positions predicts the removed tokens through a head tied to the input
embedding. The loss covers removed positions only; there is no 80/10/10 (nothing is replaced).
"""
from __future__ import annotations

import torch
from pydantic import Field
from torch import Tensor

from polymask.data.batching import Batch
from polymask.model.encoder import Encoder
from polymask.objectives.base import LMHead, Objective, ObjectiveConfig, ObjectiveOutput, token_loss
from polymask.objectives.decoder import ShallowDecoder
from polymask.objectives.registry import OBJECTIVES
from polymask.objectives.visible import compact_visible, scatter_back
from polymask.tokenization import SpecialIds


class MAELMConfig(ObjectiveConfig):
    name: str = "maelm"
    decoder_layers: int | None = Field(
        None, ge=1, description="decoder blocks; default a third of the encoder's, at least 1")
    decoder_width: int | None = Field(None, ge=8, description="decoder width; default the encoder's (narrower projects)")
    decoder_heads: int | None = Field(None, ge=1, description="decoder heads; default keeps the encoder's head size")
    decoder_dropout: float = Field(0.0, ge=0, lt=1, description="dropout inside the decoder")


@OBJECTIVES.register("maelm")
class MAELM(Objective):
    """MAE-LM's objective; its decoder and head are dropped at fine-tuning."""

    Config = MAELMConfig
    config: MAELMConfig
    rank_inputs = ("unmasked", "visible_only")
    lm_export = "decoder"
    fill_mask_note = ("MAE-LM's own prediction path: [MASK] tokens are hidden from the encoder (the visible tokens "
                      "keep their positions), the shared [MASK] embedding takes their place, and the pretrained "
                      "shallow decoder and head reconstruct them. `AutoModel` gives the encoder alone, the part to "
                      "fine-tune.")

    def __init__(self, config: MAELMConfig, encoder: Encoder, specials: SpecialIds, mask_span: int = 1,
                 shape_multiple: int = 1) -> None:
        super().__init__(config, encoder, specials, mask_span, shape_multiple)
        enc = encoder.config
        width = config.decoder_width or enc.d_model
        heads = config.decoder_heads or max(1, width // (enc.d_model // enc.n_heads))
        layers = config.decoder_layers or max(1, enc.n_layers // 3)
        self.decoder = ShallowDecoder(enc.d_model, width, layers, heads, 4 * width, config.decoder_dropout,
                                      enc.norm_eps, enc.rope_theta, enc.activation)
        self.head = LMHead(enc.d_model, encoder.embed, enc.norm_eps, enc.activation)

    def predict(self, batch: Batch, selected: Tensor) -> Tensor:
        """Vocabulary logits (M, V) at the removed positions, in the order of ``input_ids[selected]``."""
        real = torch.ones_like(selected) if batch.attention_mask is None else batch.attention_mask
        visible = compact_visible(batch.input_ids, real & ~selected, self.specials.pad, self.shape_multiple)
        hidden = self.encoder(visible.input_ids, attention_mask=visible.attention_mask,
                              position_ids=visible.position_ids)
        mask_embedding = self.encoder.embed.weight[self.specials.mask]
        states = scatter_back(hidden, visible, mask_embedding, batch.input_ids.shape[1])
        decoded = self.decoder(states, batch.attention_mask)
        return self.score_rows(decoded[selected])

    def forward(self, batch: Batch, generator: torch.Generator) -> ObjectiveOutput:
        selected = self.select(batch, generator)
        return token_loss(self.predict(batch, selected), batch.input_ids[selected])

    def masked_log_probs(self, batch: Batch, selected: Tensor) -> Tensor:
        return self.predict(batch, selected).float().log_softmax(dim=-1)
