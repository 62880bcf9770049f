"""Natural-language text: Unicode NFC, byte-level BPE trained with ``tokenizers``, packed blocks."""
from __future__ import annotations

import unicodedata
from typing import Iterable

from pydantic import Field
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from polymask.errors import InvalidRecord
from polymask.modalities.base import Modality, ModalityConfig
from polymask.modalities.registry import MODALITIES
from polymask.tokenization import SPECIAL_TOKENS, add_special_token_processing


class TextConfig(ModalityConfig):
    name: str = "text"
    vocab_size: int = Field(8192, ge=300, description="BPE vocabulary size when a tokenizer is trained")


@MODALITIES.register("text")
class Text(Modality):
    """Paragraphs of text; records are concatenated and cut into full-length blocks (no padding)."""

    name = "text"
    Config = TextConfig
    packed = True
    default_corpus = ("text/austen.txt.gz",)
    default_columns = ("text", "sentence", "content")
    finetune_recipe = "glue"
    config: TextConfig

    def normalize(self, text: str) -> str:
        text = unicodedata.normalize("NFC", text).strip()
        if not text:
            raise InvalidRecord("empty text")
        return text

    def build_tokenizer(self, texts: Iterable[str], vocab_size: int | None = None) -> Tokenizer:
        tokenizer = Tokenizer(models.BPE())
        tokenizer.normalizer = normalizers.NFC()
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size or self.config.vocab_size, min_frequency=2, special_tokens=list(SPECIAL_TOKENS),
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
        tokenizer.train_from_iterator(texts, trainer=trainer)
        return add_special_token_processing(tokenizer)
