"""The fine-tuned model folder: what ``polymask finetune`` keeps of each (task, seed) cell.

Layout of ``<cell>/seed-N/``::

    model.safetensors   the predictor's weights: ``encoder.*`` and ``head.*``
    finetuned.json      everything needed to apply it (``finetuned_meta.FinetunedMeta``)
    tokenizer.json      the tokenizer, copied in (plus transformers side files)
    manifest.json       sha256 of every file above, written last

The folder is written into a temporary folder and renamed into place (``staged_folder``), so a
crash never leaves a half-written model under the final name.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from tokenizers import Tokenizer

from polymask import jsonio
from polymask.builtin_models import builtin_folders
from polymask.checkpoints.atomic import staged_folder
from polymask.checkpoints.finetuned_meta import FORMAT, FinetunedMeta, read_finetuned_meta
from polymask.checkpoints.pretrained import FINETUNED_META, verify_checkpoint, write_manifest
from polymask.errors import CheckpointError
from polymask.tokenization import load_tokenizer, save_tokenizer
from polymask.weights_io import save_weights


@dataclass(frozen=True)
class SaveTarget:
    """Where a cell's chosen model is written, and the pretraining checkpoint its encoder came from (its
    folder, objective and step)."""

    folder: Path
    checkpoint: str
    objective: str
    step: int | None


@dataclass(frozen=True)
class LoadedFinetuned:
    """A verified fine-tuned model folder, read once: its validated ``finetuned.json`` (``meta``), its weights
    (``encoder.*`` and ``head.*``) and its tokenizer."""

    folder: Path
    meta: FinetunedMeta
    weights: dict[str, torch.Tensor]
    tokenizer: Tokenizer


def save_finetuned(folder: Path, model: torch.nn.Module, tokenizer: Tokenizer, meta: FinetunedMeta) -> Path:
    """Write the fine-tuned model folder atomically; returns ``folder``."""
    with staged_folder(folder) as tmp:
        save_weights({name: tensor.detach().cpu().contiguous() for name, tensor in model.state_dict().items()},
                     tmp / "model.safetensors")
        (tmp / FINETUNED_META).write_text(jsonio.dumps(meta.model_dump(mode="json"), indent=1))
        save_tokenizer(tokenizer, tmp)
        write_manifest(tmp, {"format": FORMAT})
    return folder


def is_finetuned(folder: Path) -> bool:
    return (Path(folder) / FINETUNED_META).is_file()


def resolve_finetuned(folder: Path) -> Path:
    """``folder`` itself, or the one fine-tuned model a finetune or benchmark output folder holds
    (``cells/<system>/<task>/seed-N/``); an output folder with several names them in the error."""
    folder = Path(folder)
    if is_finetuned(folder) or not (folder / "cells").is_dir():
        return folder
    saved = sorted(path.parent for path in (folder / "cells").glob(f"*/*/seed-*/{FINETUNED_META}"))
    if len(saved) == 1:
        return saved[0]
    if not saved:
        raise CheckpointError(f"{folder} holds no fine-tuned model (was it run with --no-save-models?)")
    shown = ", ".join(str(path.relative_to(folder)) for path in saved[:3])
    raise CheckpointError(f"{folder} holds {len(saved)} fine-tuned models; name one: {shown}"
                          f"{', ...' if len(saved) > 3 else ''} (all are listed in its results.md)")


def read_finetuned(folder: Path) -> LoadedFinetuned:
    """A fine-tuned model folder (or the one model an output folder holds, ``resolve_finetuned``), verified against
    its manifest, its ``finetuned.json`` validated; every fault is one ``CheckpointError`` naming the file."""
    folder = resolve_finetuned(folder)
    if not is_finetuned(folder):
        if not folder.exists():
            builtin = builtin_folders().get(str(folder))
            if builtin is not None:
                raise CheckpointError(f"{folder} is a built-in pretrained encoder, not a fine-tuned model: fine-tune "
                                      f"it first (polymask finetune --checkpoint {folder}) or embed with it "
                                      f"(polymask embed --checkpoint {folder})")
            raise CheckpointError(f"fine-tuned model not found: {folder}")
        raise CheckpointError(f"{folder} is not a fine-tuned model folder (no {FINETUNED_META}); a pretraining run or "
                              f"checkpoint, or a Hugging Face folder, is fine-tuned first (polymask finetune) or "
                              f"embedded as it is (polymask embed, polymask.load_checkpoint)")
    verify_checkpoint(folder)
    try:
        raw = json.loads((folder / FINETUNED_META).read_text())
        weights = load_file(str(folder / "model.safetensors"))
    except (ValueError, SafetensorError, OSError) as exc:
        raise CheckpointError(f"{folder}: unreadable fine-tuned model ({exc})") from None
    meta = read_finetuned_meta(raw, folder / FINETUNED_META)
    return LoadedFinetuned(folder, meta, weights, load_tokenizer(folder / "tokenizer.json"))


def folder_bytes(folder: Path) -> int:
    """Total size of the files in ``folder``."""
    return sum(path.stat().st_size for path in Path(folder).iterdir() if path.is_file())
