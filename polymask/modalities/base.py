"""The ``Modality`` base class: how raw records of one kind of sequence become tokens.

A modality validates and canonicalises each record (``normalize``), optionally augments it when
a batch is drawn (``augment``), owns a ``tokenizers.Tokenizer`` (built by ``build_tokenizer``,
saved under ``tokenizers/<name>/``) and decides the masking unit (``mask_span``) and what pretraining does
with sequences longer than the model (``overflow``: cut into windows, or skip and report; a model applied to a
longer record reads its first ``max_len`` tokens whatever the modality, ``data.model_inputs``).
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import ClassVar, Collection, Iterable, Literal

from pydantic import Field
from tokenizers import Tokenizer

from polymask.errors import DataError
from polymask.resources import builtin_dir
from polymask.schema import ComponentConfig
from polymask.tokenization import load_tokenizer


class ModalityConfig(ComponentConfig):
    """Options shared by every modality."""

    tokenizer: Path | None = Field(
        None, description="tokenizer.json, its folder, or the name of a built-in tokenizer folder under tokenizers/ "
                          "(e.g. text-corpus); default: the modality's built-in one")
    augment: bool = Field(False, description="augment each sequence when it is drawn (modality-specific)")
    max_chars: int | None = Field(
        None, ge=1, description="records longer than this many characters are skipped and counted before parsing; "
                                "null: no limit")


class Modality:
    """Base class; subclasses set ``name``/``Config`` and implement ``normalize`` and ``build_tokenizer``."""

    name: ClassVar[str]
    Config: ClassVar[type[ModalityConfig]] = ModalityConfig
    #: Pretraining's corpus: "window": long sequences are cut into consecutive windows; "skip": reported and skipped.
    overflow: ClassVar[Literal["window", "skip"]] = "skip"
    #: True: records are concatenated and cut into full-length blocks (text); False: one per sequence.
    packed: ClassVar[bool] = False
    #: Built-in corpus files, relative to ``polymask/corpora``.
    default_corpus: ClassVar[tuple[str, ...]] = ()
    #: Column or field to read from tabular files when the user names none.
    default_columns: ClassVar[tuple[str, ...]] = ("text", "sequence")
    #: False when the vocabulary is fixed by the modality (k-mers, residues): with no built-in
    #: tokenizer file, ``build_tokenizer(())`` makes one without a corpus.
    learned_vocabulary: ClassVar[bool] = True
    #: Transformations that keep every label a record can have (SMILES: the atom order a string is written in), so
    #: that fine-tuning may draw them and test-time averaging may average over them whatever a task declares.
    label_free_invariances: ClassVar[tuple[str, ...]] = ()
    #: What a task spec's ``invariant_to`` may name besides those: the transformations ``variants`` and
    #: ``augmented`` know (DNA: reverse_complement, shift). A spec naming another is refused when it is read.
    task_invariances: ClassVar[tuple[str, ...]] = ()
    #: How ``polymask finetune --data`` splits a table of these records by default: "scaffold" (Bemis-Murcko
    #: groups of molecules, so that test molecules have scaffolds training never saw) or "random".
    default_split: ClassVar[Literal["scaffold", "random"]] = "random"
    #: The benchmark whose fine-tuning recipe (``tasks/<name>/recipe.yaml``, chosen on its validation splits) a
    #: user's own table of these records is fine-tuned with where the command line is silent; None: the defaults.
    finetune_recipe: ClassVar[str | None] = None
    #: Modalities whose tasks it reads besides its own (a user's SMILES modality with another tokenizer reading
    #: MoleculeNet: ``("smiles",)``); a task of any other modality is refused before fine-tuning.
    task_modalities: ClassVar[tuple[str, ...]] = ()

    @property
    def drops_cut_variants(self) -> bool:
        """Whether test-time averaging leaves out a variant that ``max_len`` cuts where its record fits
        (``data.variants.encode_variants``): for records pretraining keeps whole ("skip" overflow, not packed), as
        SMILES, whose randomised atom orders can run longer than the canonical record. About variants only: a record
        longer than the model is read from its first ``max_len`` tokens on every path (``data.model_inputs``)."""
        return self.overflow == "skip" and not self.packed

    def reads_tasks_of(self, modality: str) -> bool:
        """Whether the tasks of ``modality`` (a task spec's ``modality``) are records this modality reads."""
        return modality == self.name or modality in self.task_modalities

    def __init__(self, config: ModalityConfig | None = None) -> None:
        self.config = config if config is not None else self.Config(name=self.name)

    def normalize(self, text: str) -> str:
        """Validate and canonicalise one record; raise ``InvalidRecord(reason)`` if unusable."""
        raise NotImplementedError

    def normalize_with_changes(self, text: str) -> tuple[str, tuple[str, ...]]:
        """``normalize``, and the names of the optional steps that changed the record (the run's report counts
        them per step; SMILES standardisation reports its steps)."""
        return self.normalize(text), ()

    def augment(self, text: str, rng: random.Random) -> str:
        """A random variant of a normalised record (identity by default)."""
        return text

    def augmented(self, invariances: Collection[str] = ()) -> Modality:
        """This modality with fine-tuning's augmentation on: the variants that keep any label, plus those a task
        declares its labels ``invariances`` to (a task spec's ``invariant_to``)."""
        return type(self)(self.config.model_copy(update={"augment": True}))

    def invariances(self, declared: Collection[str] = ()) -> list[str]:
        """What a task's labels are invariant to: what its spec declares (``invariant_to``), then this modality's
        ``label_free_invariances``."""
        return [*declared, *(name for name in self.label_free_invariances if name not in declared)]

    def varied(self, invariances: Collection[str]) -> list[str]:
        """Those of ``invariances`` under which ``variants`` and ``augment`` change a record (all by default): what a
        model averaged over, reported as such."""
        return list(invariances)

    def variants(self, text: str, invariances: Collection[str] = ()) -> list[str]:
        """The fixed variants of a normalised record that keep a label invariant to ``invariances`` (a task spec's
        ``invariant_to``), the record itself first: what test-time averaging predicts on. Itself alone by default."""
        return [text]

    def tokenizer_input(self, text: str) -> str:
        """The string handed to the tokenizer for a normalised record."""
        return text

    def exported_tokenizer(self, tokenizer: Tokenizer) -> Tokenizer:
        """The tokenizer a Hugging Face export ships: polymask's own by default (records are prepared first, as
        the model card says)."""
        return tokenizer

    def exported_tokenizer_note(self) -> str:
        """What a model card tells a transformers user about preparing records for ``exported_tokenizer``'s
        tokenizer ("" when the general advice holds)."""
        return ""

    def export_record_advice(self, max_len: int) -> str:
        """A model card's word on records: ``exported_tokenizer_note`` and what polymask does with a record longer
        than ``max_len`` tokens, the same for every modality (``data.model_inputs``)."""
        longer = f"polymask reads a longer record's first {max_len} tokens: tokenise with `truncation=True`."
        return " ".join(filter(None, (self.exported_tokenizer_note(), longer)))

    def first_window(self, text: str, max_len: int, tokenizer: Tokenizer) -> str:
        """The start of a normalised record that a model of ``max_len`` tokens reads ([CLS] ... [SEP]): cut before
        tokenising (a chromosome in a FASTA) and before variants are made (a reverse strand then reads the bases
        the forward one does). ``tokenizer``: the one the model reads with (DNA cuts where its ``max_len - 2``-th
        token ends). The whole record by default (tokenised whole, then cut to its first ``max_len`` tokens)."""
        return text

    def build_tokenizer(self, texts: Iterable[str], vocab_size: int | None = None) -> Tokenizer:
        """Build this modality's tokenizer from normalised records."""
        raise NotImplementedError

    def new_tokenizer(self, texts: Iterable[str], vocab_size: int | None = None) -> Tokenizer:
        """``build_tokenizer``, checked to give a ``tokenizers.Tokenizer`` (a custom modality's may not)."""
        tokenizer = self.build_tokenizer(texts, vocab_size)
        if not isinstance(tokenizer, Tokenizer):
            raise DataError(f"modality '{self.name}': build_tokenizer returned {type(tokenizer).__name__}, not a "
                            f"tokenizers.Tokenizer")
        return tokenizer

    @property
    def mask_span(self) -> int:
        """Masking unit in tokens: 1, or k for overlapping k-mers (a base would leak otherwise)."""
        return 1

    @property
    def tokenizer_name(self) -> str:
        """Folder under ``tokenizers/`` holding the built-in tokenizer for this configuration."""
        return self.name

    def corpus_paths(self) -> list[Path]:
        """The built-in pretraining corpus."""
        if not self.default_corpus:
            raise DataError(f"modality '{self.name}' has no built-in corpus; pass --data FILE")
        root = builtin_dir("corpora")
        return [root / relative for relative in self.default_corpus]

    def load_tokenizer(self) -> Tokenizer:
        """The configured tokenizer, else the built-in one for this configuration."""
        if self.config.tokenizer is not None:
            given, named = self.config.tokenizer, builtin_dir("tokenizers") / self.config.tokenizer
            use_name = not given.exists() and not given.is_absolute() and named.is_dir()  # a path that exists wins
            return load_tokenizer(named if use_name else given)
        path = builtin_dir("tokenizers") / self.tokenizer_name / "tokenizer.json"
        if not path.is_file() and not self.learned_vocabulary:
            return self.new_tokenizer(())
        if not path.is_file():
            raise DataError(
                f"no built-in tokenizer '{self.tokenizer_name}' for modality '{self.name}'; build one with "
                f"`polymask tokenizer train --modality {self.name} --input FILES --out DIR` "
                f"and pass it as modality.tokenizer=DIR")
        return load_tokenizer(path)

    def decode(self, tokenizer: Tokenizer, ids: list[int]) -> str:
        """Token ids back to the normalised record (special tokens dropped)."""
        return tokenizer.decode(ids, skip_special_tokens=True)
