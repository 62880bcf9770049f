"""Make a built-in model from a pretraining checkpoint: its weights only (no optimizer state), stored in the
dtype asked for, with ``builtin.json`` (what ``polymask models`` lists), ``MODEL_CARD.md`` and a manifest."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch

from polymask.builtin_models import CARD, FACTS, STORAGE_DTYPES, check_name
from polymask.checkpoints.atomic import staged_folder
from polymask.checkpoints.pretrained import MANIFEST, LoadedCheckpoint, read_checkpoint, write_manifest
from polymask.errors import CheckpointError, OutputError
from polymask.export.model_card import CardFacts, card_facts
from polymask.jsonio import write_json, write_text
from polymask.tensor_checks import nonfinite_names
from polymask.weights_io import save_weights

DTYPES = {name: getattr(torch, name) for name in STORAGE_DTYPES}
#: Checkpoint files a built-in model does not carry (resuming state) or writes anew.
DROPPED = {"model.safetensors", "optimizer.safetensors", "trainer_state.json", MANIFEST}


def stored_weights(weights: dict[str, torch.Tensor], dtype: str) -> dict[str, torch.Tensor]:
    """Floating tensors in ``dtype``; refuses one that overflows it (float16 ends at 65504)."""
    if dtype not in DTYPES:
        raise CheckpointError(f"unknown dtype '{dtype}'; choose one of: {', '.join(DTYPES)}")
    stored = {name: tensor.to(DTYPES[dtype]) if tensor.is_floating_point() else tensor
              for name, tensor in weights.items()}
    overflow = nonfinite_names(stored)
    if overflow:
        raise CheckpointError(f"{', '.join(overflow[:4])}: values beyond {dtype}'s range; store as bfloat16 or float32")
    return stored


def builtin_facts(checkpoint: LoadedCheckpoint, dtype: str, corpus: str | None, step: int | None) -> dict[str, Any]:
    """What ``builtin.json`` states: modality, objective, corpus, the encoder's parameters, storage, step and
    pretraining tokens."""
    config = checkpoint.run_config
    paths = config.data.paths
    return {
        "modality": config.modality.name, "objective": config.objective.name,
        "corpus": corpus or (", ".join(path.name for path in paths) if paths
                             else f"polymask's built-in {config.modality.name} corpus"),
        "parameters": sum(p.numel() for p in checkpoint.build_encoder().parameters()),
        "preset": checkpoint.encoder_config.preset, "dtype": dtype, "step": step,
        "tokens": checkpoint.pretraining_tokens(),
    }


def default_card(name: str, facts: dict[str, Any], card: CardFacts) -> str:
    """A model card stating only what the checkpoint and its run recorded."""
    encoder, validation = card.encoder, card.validation
    accuracy = validation.get("val_accuracy")
    return "\n".join([
        f"# {name}", "",
        f"A polymask {facts['modality']} encoder pretrained with {facts['objective']}.", "",
        "| | |", "|---|---|",
        f"| encoder | {encoder['n_layers']} layers x {encoder['d_model']}, {encoder['n_heads']} heads "
        f"(preset {facts['preset']}), {facts['parameters']:,} parameters |",
        f"| corpus | {facts['corpus']} |",
        f"| steps | {card.step} of {card.max_steps} |",
        "| validation masked-token accuracy | " + ("not recorded" if accuracy is None else
                                                  f"{accuracy:.4f} at step {validation.get('step')}") + " |",
        f"| stored as | {facts['dtype']} (loaded as float32) |", "",
        "## Use", "",
        "```bash",
        f"polymask finetune --task <task, e.g. moleculenet/bbbp> --checkpoint {name}",
        f"polymask embed --checkpoint {name} --data records.csv --out vectors.npy",
        "```", "",
        f"From Python: `polymask.load_checkpoint(\"{name}\")`.", "",
        "## How it was made", "",
        f"`polymask models add` from the checkpoint `{card.source}`: its weights in {facts['dtype']}, its run "
        "config, encoder config and tokenizer; the optimizer state was dropped.", ""])


def make_builtin(checkpoint: str | Path, root: Path, name: str, dtype: str = "float16", corpus: str | None = None,
                 card: Path | None = None, overwrite: bool = False) -> Path:
    """Write ``root/name/``, a built-in model made from ``checkpoint`` (a run, checkpoint or built-in model);
    returns the folder. ``corpus`` describes the pretraining data (default: the run's corpus file names);
    ``card`` is the model card (default: one generated from the checkpoint's facts)."""
    final = Path(root) / check_name(name)
    if final.exists() and not overwrite:
        raise OutputError(f"{final} exists; pass --overwrite to replace it")
    if card is not None and not Path(card).is_file():
        raise OutputError(f"model card not found: {card}")
    loaded = read_checkpoint(checkpoint)
    weights = stored_weights(loaded.weights, dtype)
    made_from = card_facts(loaded)
    facts = builtin_facts(loaded, dtype, corpus, made_from.step)
    with staged_folder(final) as tmp:
        save_weights(weights, tmp / "model.safetensors")
        for file in loaded.folder.iterdir():
            if file.is_file() and file.name not in DROPPED | {FACTS, CARD}:
                shutil.copyfile(file, tmp / file.name)
        write_json(tmp / FACTS, facts)
        if card is None:
            write_text(tmp / CARD, default_card(name, facts, made_from))
        else:
            shutil.copyfile(card, tmp / CARD)
        write_manifest(tmp, {"step": facts["step"], "builtin": name, "dtype": dtype})
    return final
