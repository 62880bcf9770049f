"""Span masking of overlapping k-mers on real 16S rRNA windows: no masked k-mer can be read off its neighbours.

With overlapping k-mers (stride 1) the body token at index j of a window is the k-mer of bases j..j+k-1.
Definition used here: a base is *masked* when no visible (unmasked) k-mer of its window contains it,
so nothing the encoder sees spells it out. The masking must hide every k-mer that contains a masked
base, and mask no other k-mer: a masked k-mer without a masked base could be spelled out from the
visible k-mers around it (the leak DESIGN.md warns about).
"""
import gzip

import numpy as np
import pytest
import torch

from polymask.data.batching import collate
from polymask.data.corpus import prepare_corpus
from polymask.modalities.dna import Dna, DnaConfig
from polymask.model.encoder import Encoder, EncoderConfig
from polymask.objectives import OBJECTIVES
from polymask.tokenization import SpecialIds

K = 6
RECORDS = 40


@pytest.fixture(scope="module")
def windows(tmp_path_factory):
    """Tokens and bases of the windows of 40 N-free 16S records (overlapping 6-mers, 128-token windows)."""
    modality = Dna(DnaConfig(k=K, overlapping=True))
    tokenizer = modality.load_tokenizer()
    with gzip.open(modality.corpus_paths()[0], "rt") as handle:
        records = handle.read().split("\n>")
    sequences = [modality.normalize("".join(record.splitlines()[1:])) for record in records]
    sequences = [s for s in sequences if "N" not in s][:RECORDS]  # an N k-mer is [UNK], a special token
    folder = tmp_path_factory.mktemp("16s")
    fasta = folder / "16s.fa"
    fasta.write_text("".join(f">r{i}\n{s}\n" for i, s in enumerate(sequences)))
    corpus = prepare_corpus(modality, tokenizer, [fasta], column=None, max_len=128, val_fraction=0.0,
                            max_val_records=0, seed=0, cache_dir=folder / "cache", strict=True)
    ids = [corpus.train[i].tolist() for i in range(len(corpus.train))]
    bases = [modality.decode(tokenizer, window) for window in ids]
    return modality, tokenizer, ids, bases


def masked_bases(body_mask: np.ndarray) -> np.ndarray:
    """Per base of a window: True when every k-mer containing it is masked (no visible k-mer shows it)."""
    visible = np.zeros(len(body_mask) + K - 1, dtype=bool)
    for j in np.flatnonzero(~body_mask):
        visible[j:j + K] = True
    return ~visible


def select(modality, tokenizer, ids, span: int, seed: int, name: str = "mlm") -> torch.Tensor:
    """The positions objective ``name`` selects (MLM corrupts them, MAE-LM removes them, ExLM expands them)."""
    specials = SpecialIds.of(tokenizer)
    kind = OBJECTIVES.get(name)
    config = kind.Config(name=name)
    encoder = Encoder(EncoderConfig(preset="tiny", **kind.encoder_overrides(config)), tokenizer.get_vocab_size())
    return kind(config, encoder, specials, span).select(collate(ids, specials.pad), torch.Generator().manual_seed(seed))


def test_windows_are_real_overlapping_kmers(windows):
    modality, tokenizer, ids, bases = windows
    assert modality.mask_span == K and len(ids) >= 2 * RECORDS
    for window, sequence in zip(ids, bases):
        body = [tokenizer.id_to_token(i) for i in window[1:-1]]
        assert body == [sequence[j:j + K] for j in range(len(sequence) - K + 1)]


@pytest.mark.parametrize("objective", ["mlm", "maelm", "exlm"])
def test_span_masking_hides_exactly_the_kmers_that_contain_a_masked_base(windows, objective):
    modality, tokenizer, ids, bases = windows
    selected = select(modality, tokenizer, ids, modality.mask_span, seed=0, name=objective)
    masked_kmers = hidden_total = base_total = 0
    for row, (window, sequence) in enumerate(zip(ids, bases)):
        body_mask = selected[row, 1:len(window) - 1].numpy()
        hidden = masked_bases(body_mask)
        containing_a_masked_base = np.array([hidden[j:j + K].any() for j in range(len(body_mask))])
        assert np.array_equal(body_mask, containing_a_masked_base)
        # the same from the sequence: visible k-mers spell out every base except the masked ones
        spelled = [None] * len(sequence)
        for j in np.flatnonzero(~body_mask):
            spelled[j:j + K] = tokenizer.id_to_token(window[j + 1])
        assert [b is None for b in spelled] == hidden.tolist()
        masked_kmers += body_mask.sum()
        hidden_total += hidden.sum()
        base_total += len(sequence)
    assert 0.10 < masked_kmers / sum(len(w) - 2 for w in ids) < 0.20  # mask_ratio 0.15
    assert hidden_total / base_total > 0.02  # at least one base per masked span


def test_single_token_masking_would_leak_through_neighbours(windows):
    modality, tokenizer, ids, _ = windows
    selected = select(modality, tokenizer, ids, span=1, seed=0)
    leaked = masked = 0
    for row, window in enumerate(ids):
        body_mask = selected[row, 1:len(window) - 1].numpy()
        hidden = masked_bases(body_mask)
        for j in np.flatnonzero(body_mask):
            masked += 1
            leaked += not hidden[j:j + K].any()
    assert leaked / masked > 0.9
