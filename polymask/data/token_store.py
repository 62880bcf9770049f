"""Zero-copy access to tokenised sequences stored in an Arrow dataset."""
from __future__ import annotations

import numpy as np
from datasets import Dataset


class TokenStore:
    """Sequences of token ids read straight from a (memory-mapped) Arrow dataset."""

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset
        column = dataset.data.column("input_ids")
        self._offsets = [chunk.offsets.to_numpy() for chunk in column.chunks]
        self._values = [chunk.values.to_numpy() for chunk in column.chunks]
        self._starts = np.cumsum([0] + [len(chunk) for chunk in column.chunks])
        self.lengths = dataset.data.column("length").to_numpy().astype(np.int64)
        self.has_text = "text" in dataset.column_names

    def __len__(self) -> int:
        return int(self._starts[-1])

    def __getitem__(self, index: int) -> np.ndarray:
        chunk = int(np.searchsorted(self._starts, index, side="right") - 1)
        local = index - self._starts[chunk]
        offsets = self._offsets[chunk]
        return self._values[chunk][offsets[local]:offsets[local + 1]]

    def token_counts(self, vocab_size: int) -> np.ndarray:
        """How often each token id occurs in the stored sequences (length ``vocab_size``)."""
        counts = np.zeros(vocab_size, dtype=np.int64)
        for values in self._values:
            counts += np.bincount(values, minlength=vocab_size)[:vocab_size]
        return counts

    def texts(self, indices: np.ndarray) -> list[str]:
        """The normalised texts of these sequences (kept only when augmentation is on)."""
        return self.dataset.select(indices.tolist())["text"]
