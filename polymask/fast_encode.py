"""Token ids of many texts at once: ``encode_batch(tokenizer, texts)``.

For a tokenizer that splits with one regex and looks the pieces up in a vocabulary (a ``Split``
pre-tokenizer, a ``WordLevel`` or ``WordPiece`` model, no normaliser: SMILES and non-overlapping
DNA k-mers), the ids are computed here: the same regex in Python, one dictionary lookup per token,
and the Rust tokenizer only for a word outside the vocabulary (a bracket atom spelt in pieces) or a
text the regex does not cover. The ids are those of ``Tokenizer.encode_batch`` (tested on every
MoleculeNet molecule); the rate is several times higher, because the library spends about a
microsecond on every pre-token however simple the regex (``benchmarks/smiles_tokenization.py``).
Any other tokenizer goes through ``Tokenizer.encode_batch``.
"""
from __future__ import annotations

import json
import re
from typing import Sequence

from tokenizers import Tokenizer

_MODELS = ("WordLevel", "WordPiece")


class RegexVocabEncoder:
    """The ids of a regex-split vocabulary tokenizer, computed in Python (see the module docstring)."""

    def __init__(self, tokenizer: Tokenizer, pattern: str) -> None:
        self.tokenizer = tokenizer
        # the tokenizer's regex, or else any one character: an empty word marks a character the regex does
        # not cover (the library would make a piece of the gap), and sends the text to the library
        self.pattern = re.compile(f"({pattern})|.", re.DOTALL)
        self.vocab = tokenizer.get_vocab(with_added_tokens=False)
        added = [token.content for token in tokenizer.get_added_tokens_decoder().values()]
        self.added = re.compile("|".join(map(re.escape, added))) if added else None
        self.words: dict[str, list[int]] = {}

    @classmethod
    def of(cls, tokenizer: Tokenizer) -> "RegexVocabEncoder | None":
        """The encoder for ``tokenizer``, or None when it is not a plain regex-split vocabulary tokenizer."""
        spec = json.loads(tokenizer.to_str())
        split = spec.get("pre_tokenizer") or {}
        regex = (split.get("pattern") or {}).get("Regex")
        plain = (spec.get("normalizer") is None and split.get("type") == "Split" and regex is not None
                 and split.get("behavior") == "Isolated" and not split.get("invert")
                 and spec["model"]["type"] in _MODELS)
        if not plain:
            return None
        inner = _without_groups(regex)
        return cls(tokenizer, inner) if inner is not None else None

    def _word(self, word: str) -> list[int]:
        """The ids of one pre-token: its vocabulary entry, else what the library makes of it (pieces, [UNK])."""
        ids = self.words.get(word)
        if ids is None:
            index = self.vocab.get(word)
            ids = [index] if index is not None else self.tokenizer.encode(word, add_special_tokens=False).ids
            self.words[word] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        """The ids of one text, without special tokens."""
        words = self.pattern.findall(text)
        if "" in words or (self.added is not None and self.added.search(text)):
            return self.tokenizer.encode(text, add_special_tokens=False).ids
        try:
            return list(map(self.vocab.__getitem__, words))
        except KeyError:  # a word outside the vocabulary
            return [index for word in words for index in self._word(word)]


def _without_groups(pattern: str) -> str | None:
    """``pattern`` with no capturing group (a group around the whole pattern dropped), or None if it has others."""
    try:
        if re.compile(pattern).groups == 0:
            return pattern
        if pattern.startswith("(") and pattern.endswith(")") and re.compile(pattern[1:-1]).groups == 0:
            return pattern[1:-1]
    except re.error:
        pass
    return None


_ENCODERS: dict[int, tuple[Tokenizer, RegexVocabEncoder | None]] = {}


def encode_batch(tokenizer: Tokenizer, texts: Sequence[str]) -> list[list[int]]:
    """Token ids of ``texts`` without special tokens, as ``tokenizer.encode_batch`` gives them."""
    entry = _ENCODERS.get(id(tokenizer))
    if entry is None or entry[0] is not tokenizer:
        entry = _ENCODERS[id(tokenizer)] = (tokenizer, RegexVocabEncoder.of(tokenizer))
    encoder = entry[1]
    if encoder is None:
        return [encoding.ids for encoding in tokenizer.encode_batch(list(texts), add_special_tokens=False)]
    return [encoder.encode(text) for text in texts]
