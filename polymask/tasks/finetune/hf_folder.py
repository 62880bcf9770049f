"""A local Hugging Face model folder where fine-tuning expects polymask's encoder and tokenizer.

A folder is told apart from a polymask checkpoint by its files (``is_hf_folder``): ``config.json`` and none of
polymask's run, checkpoint or model files. It loads with ``AutoModel`` and ``AutoTokenizer`` from local files
only. Remote code runs for polymask's own export alone (``model_type: polymask``, its code files byte for byte
those this polymask ships, which ``polymask export`` copies in); any other folder that needs remote code
(``AutoConfig``, ``AutoModel`` or ``AutoTokenizer`` in its config.json's ``auto_map``) is refused in one line.

Three small adapters let ``finetune`` take such a folder unchanged: ``HFEncoder`` (the model's last hidden
state where ``Encoder``'s output goes), ``HFTokenizer`` (the folder's own tokenizer where a
``tokenizers.Tokenizer`` goes) and ``RawInputs`` (the task's modality validating and augmenting records, but
handing them to the tokenizer as plain normalised text: a DNA sequence as one string, never as k-mers).
"""
from __future__ import annotations

import copy
import itertools
import inspect
import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Collection, NamedTuple, Sequence

import torch
from torch import Tensor, nn

from polymask.builtin_models import FACTS as BUILTIN_FACTS
from polymask.checkpoints.hf_folder_check import check_hf_folder
from polymask.checkpoints.pretrained import FINETUNED_META, LATEST, MANIFEST, RUN_CONFIG, file_sha256
from polymask.errors import CheckpointError, DataError, one_line
from polymask.modalities.base import Modality
from polymask.resources import PACKAGE_DIR
from polymask.tokenization import SpecialIds
from polymask.transformers_quiet import quiet_transformers

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

#: Suffixes of the files a Hugging Face folder keeps weights in.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack", ".ckpt", ".gguf")
#: Files and folders that make a folder polymask's own (run, checkpoint, built-in or fine-tuned model).
POLYMASK_FILES = (MANIFEST, RUN_CONFIG, "encoder.json", LATEST, "checkpoints", FINETUNED_META, BUILTIN_FACTS)
#: Modules of an ``AutoModel`` off the path to its last hidden state, which a folder may leave out: BERT's pooler
#: (fine-tuning pools the hidden states itself) and ESM's contact head.
OFF_PATH_MODULES = ("pooler.", "contact_head.")
#: The remote code ``polymask export`` copies into its folders (read here as files, never imported).
EXPORT_CODE = PACKAGE_DIR / "export" / "hf_remote"


def is_polymask_folder(path: Path) -> bool:
    """Whether ``path`` holds a polymask run, checkpoint, built-in or fine-tuned model's files."""
    return any((Path(path) / name).exists() for name in POLYMASK_FILES)


def is_hf_folder(path: Path) -> bool:
    """Whether ``path`` is a Hugging Face model folder: config.json and no polymask run or checkpoint files."""
    return (Path(path) / "config.json").is_file() and not is_polymask_folder(path)


def _remote_code(folder: Path, config: dict) -> bool:
    """Whether the folder's own code may run: only in polymask's export, its code files identical to this
    polymask's. Refuses (one line) any other folder whose model needs its own code."""
    if config.get("model_type") == "polymask":
        ours = [file for file in EXPORT_CODE.glob("*.py") if file.name != "__init__.py"]
        differing = [file.name for file in ours
                     if not (folder / file.name).is_file() or (folder / file.name).read_bytes() != file.read_bytes()]
        if differing:
            raise CheckpointError(f"{folder}: a polymask export whose code ({', '.join(differing)}) is not this "
                                  f"polymask's; export the checkpoint again with `polymask export`")
        return True
    needs_code = sorted(set(config.get("auto_map") or {}) & {"AutoConfig", "AutoModel", "AutoTokenizer"})
    if needs_code:  # remote code for other classes only (a native polymask export's heads) is never run here
        raise CheckpointError(f"{folder}: its model needs its own code ({', '.join(needs_code)} in config.json's "
                              f"auto_map); polymask runs the remote code of its own exports only")
    return False


class Encoded(NamedTuple):
    """What fine-tuning reads of an encoding: its token ids, and which input (0, 1; None for a special token) each
    comes from, by which ``cut_encoding`` cuts a pair."""

    ids: list[int]
    sequence_ids: list[int | None]


class HFTokenizer:
    """A transformers tokenizer where fine-tuning expects a ``tokenizers.Tokenizer``: ``encode_batch`` adds the
    folder's own special tokens and never truncates (``data.model_inputs`` cuts to ``max_len`` and counts);
    ``token_to_id`` answers polymask's special-token names ([PAD], [SEP], ...) with the folder's own tokens
    (CLS falls back to BOS, SEP to EOS), which is how ``SpecialIds.of`` finds the padding and end ids."""

    def __init__(self, tokenizer: "PreTrainedTokenizerBase") -> None:
        self.hf = tokenizer
        cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
        self.specials = {"[PAD]": tokenizer.pad_token_id, "[UNK]": tokenizer.unk_token_id,
                         "[CLS]": tokenizer.bos_token_id if cls is None else cls,
                         "[SEP]": tokenizer.eos_token_id if sep is None else sep, "[MASK]": tokenizer.mask_token_id}

    def token_to_id(self, token: str) -> int | None:
        return self.specials.get(token)

    def encode_batch(self, inputs: Sequence[str | tuple[str, str]]) -> list[Encoded]:
        """Texts, or (first, second) pairs, as the folder's tokenizer encodes them."""
        if not inputs:
            return []
        columns = [list(column) for column in zip(*(item if isinstance(item, tuple) else (item,) for item in inputs))]
        batch = self.hf(*columns, add_special_tokens=True, truncation=False, verbose=False)
        return [Encoded(list(row), self._parts(batch, index, row)) for index, row in enumerate(batch["input_ids"])]

    def _parts(self, batch: Any, index: int, row: list[int]) -> list[int | None]:
        """Which input each token of row ``index`` comes from: the fast tokenizer's record, else by the separator
        (the tokens after the first one come from the second input)."""
        if batch.is_fast:
            return batch.sequence_ids(index)
        special = self.hf.get_special_tokens_mask(row, already_has_special_tokens=True)
        separators = itertools.accumulate(int(token == self.specials["[SEP]"]) for token in row)
        return [None if flag else min(seen, 1) for flag, seen in zip(special, separators)]


@dataclass(frozen=True)
class Width:
    """What ``SequencePredictor`` reads of an encoder's config: the width of its hidden states."""

    d_model: int


def segment_ids(input_ids: Tensor, separator: int) -> Tensor:
    """BERT's token type ids of ``[CLS] A [SEP] B [SEP]`` rows: 0 up to and with the first separator, 1 after it
    (padding after a single text gets 1 too, which its attention mask hides)."""
    ends = (input_ids == separator).long()
    return ((ends.cumsum(dim=1) - ends) > 0).long()


class HFEncoder(nn.Module):
    """A transformers model where polymask's ``Encoder`` goes: ``forward(input_ids, attention_mask=...)`` gives its
    last hidden state (B, L, D), ``config.d_model`` is D. It starts in training mode, as a freshly built
    ``Encoder`` does; its dropout is the folder's config's. With ``segment_separator`` (a model that reads token
    type ids), the second text of a pair is marked as its tokenizer would (``segment_ids``)."""

    def __init__(self, model: nn.Module, segment_separator: int | None = None) -> None:
        super().__init__()
        self.model = model.train()
        self.config = Width(int(model.config.hidden_size))
        self.segment_separator = segment_separator

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        mask = None if attention_mask is None else attention_mask.long()
        segments = {} if self.segment_separator is None else \
            {"token_type_ids": segment_ids(input_ids, self.segment_separator)}
        return self.model(input_ids=input_ids, attention_mask=mask, **segments).last_hidden_state


class RawInputs(Modality):
    """``modality``'s record handling (validation, augmentation) with records handed to a foreign tokenizer as
    plain normalised text (``Modality.tokenizer_input``'s default), whatever ``modality`` formats for its own."""

    def __init__(self, modality: Modality) -> None:
        super().__init__(modality.config)
        self.inner = modality

    def normalize(self, text: str) -> str:
        return self.inner.normalize(text)

    def augment(self, text: str, rng: random.Random) -> str:
        return self.inner.augment(text, rng)

    def reads_tasks_of(self, modality: str) -> bool:
        return self.inner.reads_tasks_of(modality)

    def augmented(self, invariances: Collection[str] = ()) -> "RawInputs":
        return RawInputs(self.inner.augmented(invariances))

    def invariances(self, declared: Collection[str] = ()) -> list[str]:
        return self.inner.invariances(declared)

    def varied(self, invariances: Collection[str]) -> list[str]:
        return self.inner.varied(invariances)

    def variants(self, text: str, invariances: Collection[str] = ()) -> list[str]:
        return self.inner.variants(text, invariances)


@dataclass
class HFFolder:
    """A loaded Hugging Face folder: its pretrained model (copied for each fine-tuning) and its tokenizer."""

    folder: Path
    model: nn.Module
    tokenizer: HFTokenizer
    #: The separator token after which a pair's second text starts, for a model that reads token type ids.
    segment_separator: int | None = None

    @property
    def name(self) -> str:
        return self.folder.resolve().name

    def architecture(self) -> dict[str, Any]:
        """The model's config.json settings, without where it was read from or which transformers wrote it."""
        return {key: value for key, value in self.model.config.to_dict().items()
                if key not in ("_name_or_path", "transformers_version")}

    def file_sizes(self) -> dict[str, int]:
        """Bytes of each file in the folder."""
        return {path.name: path.stat().st_size for path in sorted(self.folder.iterdir()) if path.is_file()}

    def file_hashes(self, weights: bool = True) -> dict[str, str]:
        """The sha256 of each file in the folder (without ``weights``: of those that hold no weights, such as the
        tokenizer's): what a benchmark cell of it records as its identity."""
        return {path.name: file_sha256(path) for path in sorted(self.folder.iterdir())
                if path.is_file() and (weights or path.suffix not in WEIGHT_SUFFIXES)}

    @property
    def model_type(self) -> str:
        return str(self.model.config.model_type)

    def encoder(self, seed: int) -> HFEncoder:
        """A fresh copy of the pretrained model (``seed`` unused: every cell starts from the same weights)."""
        return HFEncoder(copy.deepcopy(self.model), self.segment_separator)

    def untrained_encoder(self, seed: int) -> HFEncoder:
        """The same architecture built from its config, randomly initialised by its own rule (per seed)."""
        torch.manual_seed(10_000 + seed)
        return HFEncoder(type(self.model)(copy.deepcopy(self.model.config)), self.segment_separator)


def _load_error(exc: Exception) -> str:
    """transformers' reason a model did not load, in one line; a pickle that is more than tensors is named so."""
    if "weights_only" in str(exc):
        return ("pytorch_model.bin holds more than tensors, so loading it would run code; refused: take the weights "
                "as model.safetensors from a source you trust")
    return one_line(exc)


def _check_weights_fit(folder: Path, loading: dict[str, Any]) -> None:
    """One line when the weights file does not fill the model config.json describes: a tensor of another shape, or
    model tensors the file lacks (a wrong model_type or layer count). Tensors the model does not use (a pretraining
    head) and missing ``OFF_PATH_MODULES`` are fine."""
    mismatched = sorted(loading.get("mismatched_keys") or [])
    if mismatched:
        name, *shapes = mismatched[0]
        found = f" ({' in the file, '.join(str(tuple(shape)) for shape in shapes)} in the model)" if shapes else ""
        raise CheckpointError(f"{folder}: config.json does not fit its weights: {len(mismatched)} tensors of another "
                              f"shape, e.g. {name}{found}; fix config.json's sizes (hidden_size, vocab_size, ...)")
    missing = sorted(key for key in loading.get("missing_keys") or [] if not key.startswith(OFF_PATH_MODULES))
    if missing:
        raise CheckpointError(f"{folder}: config.json does not fit its weights: the file lacks {len(missing)} of the "
                              f"model's tensors, e.g. {missing[0]}; fix config.json's model_type or "
                              f"num_hidden_layers")


def load_hf_folder(path: Path) -> HFFolder:
    """Load a Hugging Face folder's model and tokenizer (local files only), once ``check_hf_folder`` finds what
    transformers needs in it; every fault is one ``CheckpointError`` line naming the folder."""
    from transformers import AutoModel, AutoTokenizer

    folder = Path(path)
    remote = _remote_code(folder, check_hf_folder(folder))
    with quiet_transformers():
        try:
            model, loading = AutoModel.from_pretrained(str(folder), local_files_only=True, trust_remote_code=remote,
                                                       output_loading_info=True, ignore_mismatched_sizes=True)
        except Exception as exc:  # transformers raises OSError, ValueError, KeyError, ... for an unusable folder
            raise CheckpointError(f"{folder}: transformers cannot load its model ({_load_error(exc)})") from None
        try:
            hf_tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True, trust_remote_code=remote)
        except Exception as exc:  # as above
            raise CheckpointError(f"{folder}: transformers cannot load its tokenizer ({one_line(exc)}); save the "
                                  f"model's tokenizer into the folder again (tokenizer.save_pretrained)") from None
    _check_weights_fit(folder, loading)
    if getattr(model.config, "is_encoder_decoder", False):
        raise CheckpointError(f"{folder}: a {model.config.model_type} model is an encoder-decoder; polymask fine-tunes "
                              f"encoders (BERT, RoBERTa, ESM, ... or a polymask export)")
    if len(hf_tokenizer) <= len(set(hf_tokenizer.all_special_ids)):  # transformers 5 makes one of specials alone
        raise CheckpointError(f"{folder}: no tokenizer (its vocabulary is special tokens only); save the model's "
                              f"tokenizer into the folder (tokenizer.save_pretrained)")
    if not isinstance(getattr(model.config, "hidden_size", None), int):
        raise CheckpointError(f"{folder}/config.json: states no hidden_size, the width a task head needs")
    tokenizer = HFTokenizer(hf_tokenizer)
    try:
        SpecialIds.of(tokenizer)
    except DataError as exc:
        raise CheckpointError(f"{folder}: {exc}") from None
    return HFFolder(folder, model, tokenizer, _segment_separator(model, hf_tokenizer))


def _segment_separator(model: nn.Module, tokenizer: "PreTrainedTokenizerBase") -> int | None:
    """The separator after which a pair's second text gets token type 1, where the model reads token types and
    the folder's tokenizer marks a pair's second text so (BERT); None otherwise (RoBERTa: all 0; ESM: none)."""
    if "token_type_ids" not in inspect.signature(model.forward).parameters \
            or getattr(model.config, "type_vocab_size", 0) < 2 or tokenizer.sep_token_id is None:
        return None
    pair = tokenizer("a", "b", return_token_type_ids=True)
    return tokenizer.sep_token_id if 1 in pair.get("token_type_ids", []) else None
