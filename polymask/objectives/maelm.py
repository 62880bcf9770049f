"""MAE-LM (arXiv 2302.02060): [MASK] tokens never enter the encoder; a shallow decoder reconstructs.

The selected positions are removed from the encoder's input (``visible.compact_visible``); the visible
tokens keep their original position ids, so the encoder runs on a shorter batch and its cost falls
with the mask ratio. Encoder outputs go back to their original positions, the shared [MASK]
embedding (the encoder's input embedding row) fills the removed ones, and a shallow bidirectional
decoder with its own positions predicts the removed tokens through a head tied to the input
embedding. The loss covers the selected positions only.

As in the reference, every selected position is removed by default. ``mask_prob`` below 1 removes only
that share; ``random_prob`` of them show a random token and the rest keep theirs: those stay in the
encoder's input at their positions, and the decoder predicts them beside the removed ones (BERT's
80/10/10 is ``mask_prob=0.8, random_prob=0.1``).
"""
from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field
from torch import Tensor

from polymask.data.batching import Batch
from polymask.model.encoder import Encoder
from polymask.objectives.base import Corruption, CorruptionConfig, LMHead, Objective, ObjectiveOutput, token_loss
from polymask.objectives.decoder import ShallowDecoder
from polymask.objectives.registry import OBJECTIVES
from polymask.objectives.visible import compact_visible, scatter_back
from polymask.tokenization import SpecialIds


class MAELMConfig(CorruptionConfig):
    name: str = "maelm"
    mask_prob: float = Field(1.0, ge=0, le=1, description="selected positions removed from the encoder input (the "
                             "rest stay in it, kept or randomised, and are predicted too)")
    decoder_layers: int | None = Field(
        None, ge=1, description="decoder blocks; default a third of the encoder's, at least 1")
    decoder_width: int | None = Field(None, ge=8, description="decoder width; default the encoder's (narrower projects)")
    decoder_heads: int | None = Field(None, ge=1, description="decoder heads; default keeps the encoder's head size")
    decoder_dropout: float = Field(0.0, ge=0, lt=1, description="dropout inside the decoder")
    decoder_positions: Literal["rotary", "absolute"] = Field(
        "rotary", description="rotary: the encoder's kind of positions; absolute: a learned position table added "
        "to the decoder's input, as the reference decoder has")
    decoder_input_norm: bool = Field(False, description="LayerNorm on the decoder's input, as the reference has")
    decoder_max_positions: int = Field(2048, ge=8, description="longest sequence the absolute position table covers")


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
        absolute = config.decoder_max_positions if config.decoder_positions == "absolute" else None
        self.decoder = ShallowDecoder(enc.d_model, width, layers, heads, 4 * width, config.decoder_dropout,
                                      enc.norm_eps, enc.rope_theta, enc.activation, absolute, config.decoder_input_norm)
        self.head = LMHead(enc.d_model, encoder.embed, enc.norm_eps, enc.activation)
        if config.decoder_positions != "rotary" or config.decoder_input_norm:
            self.lm_export = None  # the exported decoder (export/hf_remote) has rotary positions and no input norm

    def predict(self, batch: Batch, corruption: Corruption | Tensor) -> Tensor:
        """Vocabulary logits (M, V) at the selected positions, in the order of ``input_ids[selected]``: the masked
        ones are removed from the encoder's input, the others stay in it as shown (a tensor of selected positions:
        all of them removed)."""
        if isinstance(corruption, Tensor):
            corruption = Corruption.all_masked(batch.input_ids, corruption, self.specials.mask)
        real = torch.ones_like(corruption.masked) if batch.attention_mask is None else batch.attention_mask
        visible = compact_visible(corruption.input_ids, real & ~corruption.masked, self.specials.pad,
                                  self.shape_multiple)
        hidden = self.encoder(visible.input_ids, attention_mask=visible.attention_mask,
                              position_ids=visible.position_ids)
        mask_embedding = self.encoder.embed.weight[self.specials.mask]
        states = scatter_back(hidden, visible, mask_embedding, batch.input_ids.shape[1])
        decoded = self.decoder(states, batch.attention_mask)
        return self.score_rows(decoded[corruption.selected])

    def forward(self, batch: Batch, generator: torch.Generator) -> ObjectiveOutput:
        corruption = self.corrupt(batch, generator)
        selected = corruption.selected
        return token_loss(self.predict(batch, corruption), batch.input_ids[selected], corruption.masked[selected])

    def masked_log_probs(self, batch: Batch, selected: Tensor) -> Tensor:
        return self.predict(batch, selected).float().log_softmax(dim=-1)
