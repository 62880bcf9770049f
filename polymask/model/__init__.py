"""The shared encoder backbone."""
from polymask.model.encoder import PRESETS, Encoder, EncoderConfig

__all__ = ["PRESETS", "Encoder", "EncoderConfig"]
