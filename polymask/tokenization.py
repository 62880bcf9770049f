"""Tokenizer helpers shared by every modality: special tokens, saving, loading, HF export.

Every polymask tokenizer is a ``tokenizers.Tokenizer`` whose first five ids are
[PAD] [UNK] [CLS] [SEP] [MASK], with a post-processor that wraps a sequence as
``[CLS] a [SEP]`` (and a pair as ``[CLS] a [SEP] b [SEP]``). Saved folders hold
``tokenizer.json`` plus the files ``transformers.PreTrainedTokenizerFast.from_pretrained`` reads.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tokenizers import AddedToken, Encoding, Tokenizer, processors

from polymask.errors import DataError
from polymask.jsonio import atomic_path, dumps, make_dir, write_text

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
HF_SPECIALS = {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]",
               "sep_token": "[SEP]", "mask_token": "[MASK]"}


@dataclass(frozen=True)
class SpecialIds:
    """Ids of the five special tokens of a tokenizer."""

    pad: int
    unk: int
    cls: int
    sep: int
    mask: int

    @classmethod
    def of(cls, tokenizer: Tokenizer) -> "SpecialIds":
        ids = [tokenizer.token_to_id(token) for token in SPECIAL_TOKENS]
        missing = [token for token, index in zip(SPECIAL_TOKENS, ids) if index is None]
        if missing:
            raise DataError(f"tokenizer lacks the special tokens {missing}; polymask needs {list(SPECIAL_TOKENS)}")
        return cls(*ids)

    @property
    def all(self) -> tuple[int, ...]:
        return (self.pad, self.unk, self.cls, self.sep, self.mask)


def cut_encoding(encoding: Encoding, max_len: int) -> list[int]:
    """An encoded input's ids cut to ``max_len`` tokens, its specials kept: one input loses its end; a pair loses the
    end of its longer part, a token at a time (BERT's longest-first), so a long first sentence never crowds out the
    second. Unchanged when it fits."""
    ids = encoding.ids
    if len(ids) <= max_len:
        return ids
    parts = encoding.sequence_ids
    kept_per_part = [parts.count(0), parts.count(1)]
    for _ in range(len(ids) - max_len):
        kept_per_part[0 if kept_per_part[0] > kept_per_part[1] else 1] -= 1
    seen = [0, 0]
    kept = []
    for token, part in zip(ids, parts):
        if part is not None:
            seen[part] += 1
            if seen[part] > kept_per_part[part]:
                continue
        kept.append(token)
    return kept


def add_special_token_processing(tokenizer: Tokenizer) -> Tokenizer:
    """Mark the five specials as special (skipped when decoding) and install the
    [CLS] a [SEP] / [CLS] a [SEP] b [SEP] post-processor. The ids must run 0..n-1 (the embedding has one row
    per id): a vocabulary listing a token twice would leave a hole."""
    ids = SpecialIds.of(tokenizer)
    used = sorted(tokenizer.get_vocab().values())
    if used != list(range(len(used))):
        raise ValueError(f"token ids are not 0..{len(used) - 1}: the vocabulary lists a token twice or skips an id")
    tokenizer.add_special_tokens([AddedToken(token, special=True) for token in SPECIAL_TOKENS])
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", ids.cls), ("[SEP]", ids.sep)],
    )
    return tokenizer


def with_mask_taking_its_space(tokenizer: Tokenizer) -> Tokenizer:
    """For a byte-level BPE, a copy whose [MASK] absorbs the space before it (as RoBERTa's <mask> does): "is
    [MASK]." then masks the word " Paris" the model learnt to predict, not a lone space before an empty slot.
    Other tokenizers (SMILES, DNA: no spaces inside a record) come back unchanged."""
    if type(tokenizer.pre_tokenizer).__name__ != "ByteLevel":
        return tokenizer
    copy = Tokenizer.from_str(tokenizer.to_str())
    copy.add_special_tokens([AddedToken("[MASK]", special=True, lstrip=True)])
    return copy


def to_hf(tokenizer: Tokenizer) -> "PreTrainedTokenizerFast":
    """Wrap as a ``transformers.PreTrainedTokenizerFast`` with the special tokens declared."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, **HF_SPECIALS)


def save_tokenizer(tokenizer: Tokenizer, directory: Path, model_max_length: int | None = None) -> Path:
    """Write ``tokenizer.json`` and the ``tokenizer_config.json`` that ``transformers.AutoTokenizer`` reads
    as a ``PreTrainedTokenizerFast`` with the special tokens (and ``model_max_length`` when given), each
    written whole under a temporary name and renamed into place.

    The config is written by hand, not by ``save_pretrained``: transformers 5 would name its own backend
    class there, which transformers 4 cannot load."""
    make_dir(directory)
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_input_names": ["input_ids", "attention_mask"],
              "clean_up_tokenization_spaces": False, **HF_SPECIALS}
    if model_max_length is not None:
        config["model_max_length"] = model_max_length
    with atomic_path(directory / "tokenizer.json") as tmp:
        tokenizer.save(str(tmp))
    write_text(directory / "tokenizer_config.json", dumps(config, indent=1) + "\n")
    return directory / "tokenizer.json"


def load_tokenizer(path: Path) -> Tokenizer:
    """Load a ``tokenizer.json`` (or the folder holding one) with a clear error when it is unusable."""
    file = path / "tokenizer.json" if path.is_dir() else path
    if not file.is_file():
        raise DataError(f"tokenizer file not found: {file}")
    try:
        tokenizer = Tokenizer.from_file(str(file))
    except Exception as exc:  # the Rust side raises a plain Exception
        raise DataError(f"{file}: not a valid tokenizers JSON file ({exc})") from None
    SpecialIds.of(tokenizer)
    return tokenizer


def fingerprint(tokenizer: Tokenizer) -> str:
    """A content hash of the tokenizer (vocabulary, rules and specials)."""
    return hashlib.sha256(tokenizer.to_str().encode()).hexdigest()
