"""DNA: IUPAC validation, k-mer tokenizers (non-overlapping by default), windows, reverse complement."""
from __future__ import annotations

import functools
import itertools
import json
import random
import re
from typing import Collection, Iterable

from pydantic import Field
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

from polymask.errors import InvalidRecord
from polymask.modalities.base import Modality, ModalityConfig
from polymask.modalities.registry import MODALITIES
from polymask.tokenization import SPECIAL_TOKENS, add_special_token_processing

BASES = "ACGT"
#: IUPAC nucleotide codes other than A/C/G/T; each becomes N (U becomes T).
AMBIGUITY_CODES = "RYSWKMBDHVN"
COMPLEMENT = str.maketrans("ACGTN", "TGCAN")
NOT_IUPAC = re.compile(f"[^{BASES}{AMBIGUITY_CODES}]")


@functools.lru_cache(maxsize=None)
def kmer_split(k: int) -> re.Pattern[str]:
    """The pre-tokenizer pattern of non-overlapping k-mers (``Dna.build_tokenizer``): a k-mer of A/C/G/T, else one
    base."""
    return re.compile(f"[{BASES}]{{{k}}}|[{BASES}N]")


def _tokens_end(prepared: str, tokens: int, tokenizer: Tokenizer) -> int | None:
    """Where ``tokenizer``'s first ``tokens`` tokens of ``prepared`` end in it (None when they hold all of it)."""
    offsets = tokenizer.encode(prepared, add_special_tokens=False).offsets
    return None if len(offsets) <= tokens else offsets[tokens - 1][1]


def reads_kmers(tokenizer: Tokenizer, k: int, overlapping: bool) -> bool:
    """Whether ``tokenizer`` makes one token of each k-mer ``Dna.build_tokenizer`` splits a record into (a word-level
    vocabulary behind its pre-tokenizer: polymask's own, read from a file or not), so that the bases ``n`` tokens
    hold follow from k. A saved fine-tuned model's modality names no tokenizer file (its folder holds the tokenizer),
    so this is read off the tokenizer, not the config."""
    if tokenizer.normalizer is not None or not isinstance(tokenizer.model, models.WordLevel):
        return False
    pre_tokenizer = tokenizer.pre_tokenizer
    return pre_tokenizer is not None and _splits_kmers(pre_tokenizer.__getstate__(), k, overlapping)


@functools.lru_cache(maxsize=64)
def _splits_kmers(pre_tokenizer: bytes, k: int, overlapping: bool) -> bool:
    """Whether a pre-tokenizer (its JSON) splits a record into ``Dna.build_tokenizer``'s k-mers."""
    split = ({"type": "WhitespaceSplit"} if overlapping else
             {"type": "Split", "pattern": {"Regex": kmer_split(k).pattern}, "behavior": "Isolated", "invert": False})
    return json.loads(pre_tokenizer) == split


class DnaConfig(ModalityConfig):
    name: str = "dna"
    k: int = Field(6, ge=1, le=8, description="k-mer length")
    overlapping: bool = Field(False, description="overlapping k-mers (stride 1, DNABERT); masking then spans k tokens")
    augment: bool = Field(False, description="augment each window when drawn (reverse_complement, frame_shift)")
    reverse_complement: bool = Field(True, description="with augment: reverse-complement with probability 0.5")
    frame_shift: bool = Field(
        False, description="with augment and non-overlapping k-mers: also drop 0 to k-1 leading bases at random, so "
                           "every k-mer reading frame of a motif is seen")


@MODALITIES.register("dna")
class Dna(Modality):
    """Nucleotide sequences as k-mers: non-overlapping (Nucleotide Transformer) or overlapping (DNABERT)."""

    name = "dna"
    Config = DnaConfig
    overflow = "window"
    default_corpus = ("dna/16s_gold.fasta.gz",)
    default_columns = ("sequence", "seq", "dna")
    learned_vocabulary = False
    finetune_recipe = "dna"
    task_invariances = ("reverse_complement", "shift")
    config: DnaConfig

    def normalize(self, text: str) -> str:
        sequence = "".join(text.split()).upper().replace("U", "T")
        if not sequence:
            raise InvalidRecord("empty sequence")
        invalid = NOT_IUPAC.search(sequence)
        if invalid:
            raise InvalidRecord(f"character {invalid.group()!r} at position {invalid.start()} is not an IUPAC nucleotide code")
        sequence = sequence.translate(str.maketrans(AMBIGUITY_CODES, "N" * len(AMBIGUITY_CODES)))
        if self.config.overlapping and len(sequence) < self.config.k:
            raise InvalidRecord(f"sequence of {len(sequence)} bases is shorter than k={self.config.k}")
        return sequence

    def augment(self, text: str, rng: random.Random) -> str:
        """One of ``variants`` at random: the strands (``reverse_complement``) and reading frames (``frame_shift``)
        the config allows."""
        if not self.config.augment:
            return text
        allowed = [name for name, on in (("reverse_complement", self.config.reverse_complement),
                                         ("shift", self.config.frame_shift)) if on]
        return rng.choice(self.variants(text, allowed))

    def augmented(self, invariances: Collection[str] = ()) -> Dna:
        """The reverse complement for a ``reverse_complement``-invariant label, reading-frame shifts (non-overlapping
        k-mers) for a ``shift``-invariant one: a TF-binding window has both; a promoter aligned on its
        transcription start has neither (its label has a direction and a position)."""
        varied = self.varied(invariances)
        return Dna(self.config.model_copy(update={
            "augment": True, "reverse_complement": "reverse_complement" in varied, "frame_shift": "shift" in varied}))

    def varied(self, invariances: Collection[str]) -> list[str]:
        """``invariances`` less ``shift`` where there is no reading frame to shift (overlapping k-mers, k = 1)."""
        shifts = self.config.k > 1 and not self.config.overlapping
        return [name for name in invariances if name != "shift" or shifts]

    def variants(self, text: str, invariances: Collection[str] = ()) -> list[str]:
        """Both strands for a ``reverse_complement``-invariant label; for a ``shift``-invariant one (non-overlapping
        k-mers) each of the k reading frames too, as ``augmented`` draws them: up to 2k variants."""
        strands = [text, text.translate(COMPLEMENT)[::-1]] if "reverse_complement" in invariances else [text]
        frames = self.config.k if "shift" in self.varied(invariances) else 1
        return [strand[shift:] for strand in strands for shift in range(min(frames, len(strand)))]

    @property
    def _own_kmers(self) -> bool:
        """Whether records are read by polymask's non-overlapping k-mer tokenizer (not a tokenizer file of the run's
        own, whose tokens may span any number of bases)."""
        return self.config.tokenizer is None and not self.config.overlapping

    def exported_tokenizer(self, tokenizer: Tokenizer) -> Tokenizer:
        """For polymask's non-overlapping k-mers, a copy that spells a sequence as ``normalize`` does before it
        tokenises (whitespace removed, upper case, U as T, other IUPAC codes as N), so that transformers alone reads
        ``acgu`` or ``ACRT`` as polymask does instead of as [UNK]. Overlapping k-mers are written space-separated
        by the user (a tokenizer cannot make them), as the model card says."""
        if not self._own_kmers:
            return tokenizer
        copy = Tokenizer.from_str(tokenizer.to_str())
        steps = [normalizers.Replace(Regex(r"\s+"), "")]
        steps += [normalizers.Replace(letter.lower(), letter) for letter in BASES + AMBIGUITY_CODES + "U"]
        steps += [normalizers.Replace("U", "T"), normalizers.Replace(Regex(f"[{AMBIGUITY_CODES}]"), "N")]
        copy.normalizer = normalizers.Sequence(steps)
        return copy

    def exported_tokenizer_note(self) -> str:
        if self._own_kmers:
            return "This tokenizer spells a sequence as polymask does (upper case, U as T, other IUPAC codes as N)."
        return ("Write a sequence as polymask does first: upper case, U as T, other IUPAC codes as N"
                + (", as space-separated overlapping k-mers." if self.config.overlapping else "."))

    def first_window(self, text: str, max_len: int, tokenizer: Tokenizer) -> str:
        """The bases ``max_len - 2`` tokens of ``tokenizer`` hold. Polymask's k-mers (``reads_kmers``): overlapping,
        ``max_len - 2 + k - 1`` bases; non-overlapping, an N (or a run's last bases) is a token of one base, so a
        window with N holds fewer than ``(max_len - 2) * k`` bases; it ends where the tokenizer's last token does, or
        the reverse strand would read bases the forward one never reaches. Another tokenizer (a file of the run's
        own, tokens of any length): the record is tokenised and cut where its ``max_len - 2``-th token ends
        (overlapping k-mers: after the k-mer that token is part of)."""
        k, tokens = self.config.k, max(max_len - 2, 1)
        if not reads_kmers(tokenizer, k, self.config.overlapping):
            end = _tokens_end(self.tokenizer_input(text), tokens, tokenizer)
            if end is None:
                return text
            return text[:(end - 1) // (k + 1) + k] if self.config.overlapping else text[:end]
        if self.config.overlapping:
            return text[:tokens + k - 1]
        if len(text) >= tokens * k and "N" not in text[:tokens * k]:  # k-mers end to end: the tokenizer's split
            return text[:tokens * k]
        end = 0
        for end_token in itertools.islice(kmer_split(k).finditer(text), tokens):
            end = end_token.end()
        return text[:end]

    def tokenizer_input(self, text: str) -> str:
        if not self.config.overlapping:
            return text
        k = self.config.k
        return " ".join(text[i:i + k] for i in range(len(text) - k + 1))

    @property
    def mask_span(self) -> int:
        return self.config.k if self.config.overlapping else 1

    @property
    def tokenizer_name(self) -> str:
        if self.config.k == 6 and not self.config.overlapping:
            return "dna"
        return f"dna-{self.config.k}mer" + ("-overlap" if self.config.overlapping else "")

    def build_tokenizer(self, texts: Iterable[str] = (), vocab_size: int | None = None) -> Tokenizer:
        """The k-mer vocabulary is fixed by k: every k-mer of A/C/G/T (plus single bases and N)."""
        k = self.config.k
        kmers = ["".join(letters) for letters in itertools.product(BASES, repeat=k)]
        if self.config.overlapping:
            vocab = list(SPECIAL_TOKENS) + kmers
            pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        else:
            vocab = list(SPECIAL_TOKENS) + list(BASES + "N") + (kmers if k > 1 else [])
            pre_tokenizer = pre_tokenizers.Split(Regex(kmer_split(k).pattern), behavior="isolated")
        tokenizer = Tokenizer(models.WordLevel({token: index for index, token in enumerate(vocab)}, unk_token="[UNK]"))
        tokenizer.pre_tokenizer = pre_tokenizer
        tokenizer.decoder = decoders.Fuse()
        return add_special_token_processing(tokenizer)

    def decode(self, tokenizer: Tokenizer, ids: list[int]) -> str:
        if not self.config.overlapping:
            return super().decode(tokenizer, ids)
        kmers = [tokenizer.id_to_token(i) for i in ids if i >= len(SPECIAL_TOKENS)]
        return kmers[0] + "".join(kmer[-1] for kmer in kmers[1:]) if kmers else ""
