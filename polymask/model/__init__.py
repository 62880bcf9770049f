"""The shared encoder backbone."""
from polymask.encoder_config import PRESETS, EncoderConfig
from polymask.model.encoder import Encoder

__all__ = ["PRESETS", "Encoder", "EncoderConfig"]
