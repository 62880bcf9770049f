"""rxnfp's pretrained reaction-SMILES BERT as a standard Hugging Face folder (issue 39).

The rxnfp 0.1.0 wheel (MIT; Schwaller et al., Nature Machine Intelligence 2021) ships a 12-layer, 256-wide BERT
pretrained with masked language modelling on reaction SMILES, as a pickled ``pytorch_model.bin``, a
``config.json`` without ``model_type`` and a ``vocab.txt`` meant for rxnfp's own regex tokenizer. This writes a
folder that ``AutoModel``, ``AutoModelForMaskedLM`` and ``AutoTokenizer`` load, and so polymask's
``--checkpoint``:

    pip download rxnfp==0.1.0 --no-deps -d /work/rxnfp-wheel
    python benchmarks/rxnfp_folder.py /work/rxnfp-wheel/rxnfp-0.1.0-py3-none-any.whl --out hf/rxnfp-bert-pretrained

- ``config.json``: the wheel's, plus ``model_type: bert`` and ``architectures: [BertForMaskedLM]``.
- ``model.safetensors``: the weights, read with torch's safe loader (``weights_only=True``: tensors only, no
  arbitrary object is unpickled); the next-sentence head (``cls.seq_relationship``, unused by masked language
  modelling) dropped, and the decoder weight, a tied copy of the word embeddings, left to transformers' tying.
- ``tokenizer.json`` (``PreTrainedTokenizerFast``): the regex of the wheel's ``rxnfp/tokenization.py`` as an
  isolated Split pre-tokenizer, a WordLevel model over its ``vocab.txt`` with ``[UNK]`` for tokens outside it,
  ``[CLS] a [SEP]``, no lower-casing; ``tokenizer_config.json`` and ``special_tokens_map.json`` beside it.
  rxnfp's tokenizer silently drops characters its regex does not match: whitespace is dropped here too (``" CC
  O"`` reads as ``CCO``); any other such character (none in a valid SMILES) gets ``[UNK]`` instead.

Before the folder is moved into place it is loaded back as ``BertForMaskedLM`` (no weight missing or left over),
and each token of a few ESOL molecules is masked alone and predicted. ``--check-molecules`` also compares the
folder's token ids with rxnfp's own tokenizer on every molecule of MoleculeNet's default tasks
(``rxnfp_tokenizer_check.py``).
"""
from __future__ import annotations

import argparse
import ast
import io
import json
import pickle
import sys
import zipfile
from pathlib import Path

import pandas as pd
import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from transformers import AutoModelForMaskedLM, AutoTokenizer

from polymask.checkpoints.atomic import staged_folder
from polymask.errors import PolymaskError
from polymask.jsonio import write_json
from polymask.resources import builtin_dir
from polymask.tokenization import HF_SPECIALS, add_special_token_processing, save_tokenizer
from polymask.transformers_quiet import quiet_transformers
from polymask.weights_io import save_weights

MODEL_DIR = "rxnfp/models/transformers/bert_pretrained"
TOKENIZATION = "rxnfp/tokenization.py"
REGEX_NAME = "SMI_REGEX_PATTERN"
#: The next-sentence-prediction head: not part of BertForMaskedLM, never used by masked language modelling.
NSP_PREFIX = "cls.seq_relationship."
#: BertModel's pooler (what AutoModel builds): kept, though BertForMaskedLM has none.
POOLER_PREFIX = "bert.pooler."
TIED_DECODER, WORD_EMBEDDINGS = "cls.predictions.decoder.weight", "bert.embeddings.word_embeddings.weight"
CHECK_MOLECULES = 32


def read_member(source: Path, member: str) -> bytes:
    """A file of the rxnfp wheel: from the .whl (a zip) or from the folder it was unpacked into."""
    if source.is_dir():
        return (source / member).read_bytes()
    with zipfile.ZipFile(source) as wheel:
        return wheel.read(member)


def smiles_regex(tokenization_source: str) -> str:
    """The SMILES regex that rxnfp's tokenization module assigns to ``SMI_REGEX_PATTERN`` (read, never run)."""
    for node in ast.parse(tokenization_source).body:
        if isinstance(node, ast.Assign) and any(getattr(target, "id", None) == REGEX_NAME for target in node.targets):
            return ast.literal_eval(node.value)
    raise ValueError(f"{TOKENIZATION} assigns no {REGEX_NAME}")


def vocabulary(vocab_text: str) -> list[str]:
    """The tokens of a BERT ``vocab.txt``, one a line, the line number being the id."""
    return vocab_text.rstrip("\n").split("\n")


def smiles_tokenizer(vocab: list[str], regex: str) -> Tokenizer:
    """rxnfp's tokenization as a fast tokenizer: regex pieces, each looked up whole ([UNK] if absent), no
    lower-casing, wrapped as ``[CLS] a [SEP]``."""
    tokenizer = Tokenizer(models.WordLevel({token: index for index, token in enumerate(vocab)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Replace(Regex(r"\s+"), "")  # rxnfp's regex skips whitespace: dropped
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(regex), behavior="isolated")
    tokenizer.decoder = decoders.Fuse()
    return add_special_token_processing(tokenizer)


def safe_state(pickled: bytes) -> dict[str, torch.Tensor]:
    """A pickled state dict read with torch's safe loader: tensors and plain containers only, never code."""
    try:
        return torch.load(io.BytesIO(pickled), weights_only=True, map_location="cpu")
    except pickle.UnpicklingError:
        raise ValueError(f"{MODEL_DIR}/pytorch_model.bin holds more than tensors, so unpickling it would run code; "
                         f"refused: download the rxnfp wheel again from the package index") from None


def mlm_weights(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """BertForMaskedLM's tensors of a BertForPreTraining state: the next-sentence head dropped, the decoder weight
    (which must equal the word embeddings) left for transformers to tie; each tensor contiguous, in its own storage."""
    if TIED_DECODER in state and not torch.equal(state[TIED_DECODER], state[WORD_EMBEDDINGS]):
        raise ValueError(f"{TIED_DECODER} differs from {WORD_EMBEDDINGS}: the head is not tied as config.json says")
    return {name: tensor.clone(memory_format=torch.contiguous_format) for name, tensor in state.items()
            if name != TIED_DECODER and not name.startswith(NSP_PREFIX)}


def bert_config(raw: dict) -> dict:
    """The wheel's config.json with what AutoModel needs to find BERT in it."""
    return {**raw, "model_type": "bert", "architectures": ["BertForMaskedLM"]}


def write_tokenizer(tokenizer: Tokenizer, folder: Path, max_len: int) -> None:
    """tokenizer.json, and the tokenizer_config.json and special_tokens_map.json that AutoTokenizer reads."""
    save_tokenizer(tokenizer, folder, model_max_length=max_len)
    write_json(folder / "special_tokens_map.json", HF_SPECIALS)


def check_folder(folder: Path) -> str:
    """Load ``folder`` as BertForMaskedLM (every weight present, none left over but BertModel's pooler) and mask
    each token of a few ESOL molecules alone: one line saying how many the model predicts."""
    with quiet_transformers():
        model, info = AutoModelForMaskedLM.from_pretrained(str(folder), output_loading_info=True)
    info["unexpected_keys"] = [name for name in info["unexpected_keys"] if not name.startswith(POOLER_PREFIX)]
    faults = {kind: names for kind, names in info.items() if names}
    if faults:
        raise ValueError(f"the converted weights do not fit BertForMaskedLM: {faults}")
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    molecules = pd.read_csv(builtin_dir("tasks") / "moleculenet" / "data" / "delaney-processed.csv.gz")["smiles"]
    right = total = 0
    for smiles in molecules[:CHECK_MOLECULES]:
        ids = torch.tensor(tokenizer(smiles)["input_ids"])
        masked = ids.repeat(len(ids) - 2, 1)
        positions = torch.arange(1, len(ids) - 1)
        masked[torch.arange(len(positions)), positions] = tokenizer.mask_token_id
        with torch.no_grad():
            logits = model(input_ids=masked).logits
        right += int((logits[torch.arange(len(positions)), positions].argmax(-1) == ids[positions]).sum())
        total += len(positions)
    return f"{right} of {total} tokens of {CHECK_MOLECULES} ESOL molecules predicted when masked alone " \
           f"({right / total:.3f})"


def convert(source: Path, out: Path) -> None:
    """Write the Hugging Face folder ``out`` from the rxnfp wheel (or its unpacked folder) ``source``."""
    regex = smiles_regex(read_member(source, TOKENIZATION).decode())
    print(f"regex: {REGEX_NAME} of {TOKENIZATION}: {regex}")
    vocab = vocabulary(read_member(source, f"{MODEL_DIR}/vocab.txt").decode())
    tokenizer = smiles_tokenizer(vocab, regex)
    print(f"tokenizer: {len(vocab)} tokens, WordLevel over the regex pieces, [UNK] fallback, [CLS] a [SEP]")
    config = bert_config(json.loads(read_member(source, f"{MODEL_DIR}/config.json")))
    state = safe_state(read_member(source, f"{MODEL_DIR}/pytorch_model.bin"))
    weights = mlm_weights(state)
    print(f"weights: {len(state)} tensors read with weights_only=True; {len(weights)} kept "
          f"({sum(t.numel() for t in weights.values()):,} numbers), next-sentence head and tied decoder dropped")
    with staged_folder(out) as folder:
        write_json(folder / "config.json", config)
        save_weights(weights, folder / "model.safetensors", metadata={"format": "pt"})
        write_tokenizer(tokenizer, folder, int(config["max_position_embeddings"]))
        print(f"check: {check_folder(folder)}")
    print(f"wrote {out}: config.json, model.safetensors, tokenizer.json, tokenizer_config.json, "
          f"special_tokens_map.json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", type=Path, help="rxnfp-0.1.0-py3-none-any.whl, or the folder it was unpacked into")
    parser.add_argument("--out", type=Path, required=True, help="the Hugging Face folder to write")
    parser.add_argument("--check-molecules", action="store_true",
                        help="compare the folder's token ids with rxnfp's own tokenizer on the eight MoleculeNet "
                             "tasks of the committed table")
    parser.add_argument("--data-dir", type=Path, help="MoleculeNet CSVs (default: $POLYMASK_DATA_DIR, built-in copies)")
    parser.add_argument("--report", type=Path, default=Path("docs/results/rxnfp/tokenizer-check.md"),
                        help="where --check-molecules writes its table")
    args = parser.parse_args()
    try:
        convert(args.wheel, args.out)
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, PolymaskError) as exc:  # no wheel, member, tensor
        sys.exit(f"rxnfp_folder: {exc}")
    if args.check_molecules:
        from rxnfp_tokenizer_check import write_check

        write_check(args.wheel, args.out, args.data_dir, args.report)


if __name__ == "__main__":
    main()
