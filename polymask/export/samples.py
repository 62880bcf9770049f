"""Real records to check an export on: a few records of the checkpoint's own training corpus."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch
from tokenizers import Tokenizer

from polymask.checkpoints.pretrained import LoadedCheckpoint
from polymask.errors import DataError, InvalidRecord
from polymask.tokenization import cut_encoding

if TYPE_CHECKING:
    from polymask.modalities.base import Modality


def sample_texts(checkpoint: LoadedCheckpoint, count: int = 8, scan: int = 200) -> list[str]:
    """``count`` tokenizer inputs of varied lengths from the first ``scan`` valid records of the corpus the
    checkpoint was trained on (its data paths; the modality's built-in corpus when it has none or they are
    not on this machine, as for a built-in model); [] when unreadable."""
    from polymask.modalities import build_modality

    config = checkpoint.run_config
    modality = build_modality(config.modality)
    try:
        paths = config.data.corpus_paths()
    except DataError:
        paths = []
    return sample_records(modality, paths, config.data.column, count, scan)


def sample_records(modality: "Modality", paths: list[Path], column: str | None = None, count: int = 8,
                   scan: int = 200) -> list[str]:
    """``count`` tokenizer inputs of varied lengths from the first ``scan`` valid records of ``paths`` (none
    given: the modality's built-in corpus); [] when nothing can be read."""
    from polymask.data.readers import read_records
    from polymask.data.records import normalize_record

    try:
        paths = paths or modality.corpus_paths()
    except DataError:
        return []
    texts: list[str] = []
    for path in paths:
        try:
            for record in read_records(path, column, modality.default_columns):
                try:
                    texts.append(modality.tokenizer_input(normalize_record(modality, record.text)))
                except InvalidRecord:
                    continue
                if len(texts) >= scan:
                    break
        except DataError:
            continue
        if len(texts) >= scan:
            break
    by_length = sorted(set(texts), key=len)
    if len(by_length) <= count:
        return by_length
    return [by_length[round(i * (len(by_length) - 1) / (count - 1))] for i in range(count)]


def encode_padded(tokenizer: Tokenizer, texts: list[str], max_len: int) -> dict[str, torch.Tensor]:
    """input_ids and attention_mask (B, L), right-padded, of tokenizer inputs (the export check's sample records, as
    a transformers user hands them to the exported tokenizer): an over-long one keeps its first ``max_len`` tokens,
    ending in [SEP], as `truncation=True` cuts it and as polymask reads a longer record (``data.model_inputs``)."""
    pad = tokenizer.token_to_id("[PAD]")
    rows = [cut_encoding(encoding, max_len) for encoding in tokenizer.encode_batch(texts)]
    width = max(len(ids) for ids in rows)
    input_ids = torch.tensor([ids + [pad] * (width - len(ids)) for ids in rows])
    attention_mask = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids in rows])
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def sample_batch(checkpoint: LoadedCheckpoint, max_len: int) -> dict[str, torch.Tensor] | None:
    """A padded batch of real records for ``check_export``; None when the corpus cannot be read."""
    texts = sample_texts(checkpoint)
    return encode_padded(checkpoint.tokenizer, texts, max_len) if texts else None
