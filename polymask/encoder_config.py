"""The encoder's size and behaviour (``model.*`` of a run config), kept apart from the encoder itself so
that a run config validates without importing torch."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from polymask.schema import StrictModel

PRESETS: dict[str, dict[str, int]] = {
    "tiny": {"d_model": 64, "n_layers": 2, "n_heads": 2, "d_ff": 256},
    "mini": {"d_model": 256, "n_layers": 4, "n_heads": 4, "d_ff": 1024},
    "small": {"d_model": 512, "n_layers": 6, "n_heads": 8, "d_ff": 2048},
    "base": {"d_model": 768, "n_layers": 12, "n_heads": 12, "d_ff": 3072},
}


# what a saved encoder config without the key was trained with (the key arrived later)
LEGACY_DEFAULTS: dict[str, Any] = {"embed_norm": False, "activation": "gelu_tanh"}


def fill_legacy_defaults(saved: dict[str, Any]) -> list[str]:
    """Fill in, in place, the settings a saved encoder config written before they existed was trained with;
    returns the keys filled."""
    missing = [key for key in LEGACY_DEFAULTS if key not in saved]
    saved.update({key: LEGACY_DEFAULTS[key] for key in missing})
    return missing


class EncoderConfig(StrictModel):
    """Encoder size and behaviour; ``preset`` fills the sizes, explicit fields override it."""

    preset: Literal["tiny", "mini", "small", "base"] = Field(
        "mini", description="size preset: tiny (tests), mini (4x256), small (6x512), base (BERT-base, 12x768)")
    d_model: int = Field(256, ge=8, description="hidden width")
    n_layers: int = Field(4, ge=1, description="Transformer blocks")
    n_heads: int = Field(4, ge=1, description="attention heads")
    d_ff: int = Field(1024, ge=8, description="MLP hidden width")
    dropout: float = Field(0.0, ge=0, lt=1, description="residual dropout")
    attention_dropout: float = Field(0.0, ge=0, lt=1, description="attention-probability dropout")
    rope_theta: float = Field(10000.0, gt=0, description="rotary base")
    rope_2d: bool = Field(
        False, description="two position coordinates, half of each head per coordinate: decided by the objective "
                           "(ExLM's objective.rope_2d), which a run config's model section takes; not set there")
    norm_eps: float = Field(1e-5, gt=0, description="LayerNorm epsilon")
    embed_norm: bool = Field(
        True, description="LayerNorm on the token embeddings before the first block (RoBERTa's, ModernBERT's); "
                          "checkpoints written before it existed load with false")
    activation: Literal["gelu", "gelu_tanh"] = Field(
        "gelu", description="GELU of the MLPs and LM heads: exact (erf, as BERT and ESM; exports as a native "
                            "transformers EsmModel) or tanh-approximated (checkpoints written before this field "
                            "load with gelu_tanh)")

    @model_validator(mode="before")
    @classmethod
    def _apply_preset(cls, data: Any) -> Any:
        if isinstance(data, dict):
            preset = data.get("preset", "mini")
            if preset in PRESETS:
                return {**PRESETS[preset], **data}
        return data

    @model_validator(mode="after")
    def _check_heads(self) -> "EncoderConfig":
        sections = 2 if self.rope_2d else 1
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % (2 * sections):
            raise ValueError(f"d_model ({self.d_model}) / n_heads ({self.n_heads}) must be a whole head "
                             f"dimension divisible by {2 * sections}")
        return self
