"""Checkpoints: safetensors for tensors, JSON for everything else, written atomically.

Layout of ``<run>/checkpoints/step-000600/``::

    model.safetensors      objective weights (``encoder.*`` plus the objective's own modules)
    optimizer.safetensors  optimizer moments and RNG states
    trainer_state.json     step, data position, optimizer hyper-parameters, Python RNG state
    config.json            the run config
    encoder.json           encoder config + vocabulary size (all that fine-tuning needs)
    tokenizer.json         the tokenizer (plus transformers side files)
    manifest.json          sha256 of every file above, written last

A checkpoint is written into a temporary folder and renamed into place, then
``checkpoints/latest.json`` is replaced atomically; a crash mid-write never damages a finished
checkpoint. Nothing is ever unpickled.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

from polymask.errors import CheckpointError
from polymask.jsonio import dumps
from polymask.model.encoder import Encoder, EncoderConfig
from polymask.tokenization import load_tokenizer, save_tokenizer

if TYPE_CHECKING:
    from polymask.objectives import Objective

LATEST = "latest.json"
MANIFEST = "manifest.json"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(2**22), b""):
            digest.update(block)
    return digest.hexdigest()


def _write_json(path: Path, data: Any) -> None:
    path.write_text(dumps(data, indent=1))


def _fsync_dir(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def optimizer_tensors(optimizer_state: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Split a (parameter-name keyed) optimizer state dict into flat tensors and JSON-able values."""
    tensors, scalars = {}, {}
    for name, values in optimizer_state["state"].items():
        for key, value in values.items():
            if isinstance(value, torch.Tensor):
                tensors[f"optimizer/{name}/{key}"] = value.detach().cpu().contiguous()
            else:
                scalars[f"{name}/{key}"] = value
    return tensors, {"param_groups": optimizer_state["param_groups"], "scalars": scalars}


def optimizer_state_from(tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> dict[str, Any]:
    """Inverse of ``optimizer_tensors``."""
    state: dict[str, dict[str, Any]] = {}
    for key, value in tensors.items():
        if key.startswith("optimizer/"):
            _, name, field = key.split("/")
            state.setdefault(name, {})[field] = value
    for key, value in meta["scalars"].items():
        name, field = key.split("/")
        state.setdefault(name, {})[field] = value
    return {"state": state, "param_groups": meta["param_groups"]}


def save_checkpoint(run_dir: Path, step: int, weights: dict[str, torch.Tensor], optimizer_state: dict[str, Any],
                    trainer_state: dict[str, Any], rng_tensors: dict[str, torch.Tensor], config: dict[str, Any],
                    encoder: Encoder, tokenizer: Tokenizer, keep: int) -> Path:
    """Write ``checkpoints/step-XXXXXX`` atomically, point ``latest.json`` at it, prune old ones."""
    root = run_dir / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step:06d}"
    tmp = root / f".tmp-{final.name}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    save_file({name: tensor.detach().cpu().contiguous() for name, tensor in weights.items()},
              str(tmp / "model.safetensors"))
    moments, optimizer_meta = optimizer_tensors(optimizer_state)
    save_file({**moments, **rng_tensors}, str(tmp / "optimizer.safetensors"))
    _write_json(tmp / "trainer_state.json", {**trainer_state, "optimizer": optimizer_meta})
    _write_json(tmp / "config.json", config)
    _write_json(tmp / "encoder.json", {"config": encoder.config.model_dump(mode="json"),
                                       "vocab_size": encoder.vocab_size})
    save_tokenizer(tokenizer, tmp)
    manifest = {path.name: _sha256(path) for path in sorted(tmp.iterdir())}
    _write_json(tmp / MANIFEST, {"step": step, "files": manifest})
    for path in tmp.iterdir():
        with open(path, "rb") as handle:
            os.fsync(handle.fileno())
    if final.exists():
        old = root / f".old-{final.name}"
        shutil.rmtree(old, ignore_errors=True)
        final.rename(old)
        tmp.rename(final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(final)
    pointer = root / f".{LATEST}.tmp"
    _write_json(pointer, {"checkpoint": final.name, "step": step})
    os.replace(pointer, root / LATEST)
    _fsync_dir(root)
    steps = sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("step-"))
    for stale in steps[:-keep]:
        if stale != final:
            shutil.rmtree(stale, ignore_errors=True)
    return final


def resolve_checkpoint(path: Path) -> Path:
    """A checkpoint folder from a checkpoint folder, a ``checkpoints/`` folder or a run folder."""
    path = Path(path)
    if (path / MANIFEST).is_file() or (path / "model.safetensors").is_file():
        return path
    for root in (path, path / "checkpoints"):
        pointer = root / LATEST
        if pointer.is_file():
            try:
                name = json.loads(pointer.read_text())["checkpoint"]
            except (ValueError, KeyError) as exc:
                raise CheckpointError(f"{pointer}: unreadable pointer ({exc})") from None
            return root / name
    if not path.exists():
        raise CheckpointError(f"checkpoint not found: {path}")
    raise CheckpointError(f"{path} holds no checkpoint (no {MANIFEST}, no checkpoints/{LATEST}); "
                          f"it may be from a run that never saved one")


def verify_checkpoint(folder: Path) -> dict[str, Any]:
    """Check every file against the manifest; raise ``CheckpointError`` naming what is wrong."""
    manifest_path = folder / MANIFEST
    if not manifest_path.is_file():
        raise CheckpointError(f"{folder}: incomplete checkpoint (no {MANIFEST})")
    try:
        manifest = json.loads(manifest_path.read_text())
    except ValueError:
        raise CheckpointError(f"{manifest_path}: corrupt manifest") from None
    for name, digest in manifest["files"].items():
        file = folder / name
        if not file.is_file():
            raise CheckpointError(f"{folder}: missing file {name}")
        if _sha256(file) != digest:
            raise CheckpointError(f"{folder}: {name} is corrupt (checksum mismatch)")
    return manifest


@dataclass
class LoadedCheckpoint:
    folder: Path
    weights: dict[str, torch.Tensor]
    config: dict[str, Any]
    encoder_config: EncoderConfig
    vocab_size: int
    tokenizer: Tokenizer

    def trainer_state(self) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """Trainer state JSON and the optimizer/RNG tensors (only needed to resume)."""
        state = json.loads((self.folder / "trainer_state.json").read_text())
        return state, load_file(str(self.folder / "optimizer.safetensors"))

    def build_objective(self) -> "Objective":
        """The whole pretraining model (encoder + objective modules) with its weights, e.g. for analysis."""
        from polymask.config import build_run_config
        from polymask.modalities import build_modality
        from polymask.objectives import OBJECTIVES
        from polymask.tokenization import SpecialIds

        config = build_run_config(self.config)
        objective = OBJECTIVES.get(config.objective.name)(
            config.objective, Encoder(self.encoder_config, self.vocab_size), SpecialIds.of(self.tokenizer),
            build_modality(config.modality).mask_span)
        objective.load_state_dict(self.weights)
        return objective

    def build_encoder(self) -> Encoder:
        """A fresh encoder holding the checkpoint's ``encoder.*`` weights (objective modules dropped)."""
        encoder = Encoder(self.encoder_config, self.vocab_size)
        weights = {k.removeprefix("encoder."): v for k, v in self.weights.items() if k.startswith("encoder.")}
        encoder.load_state_dict(weights)
        return encoder


def upgrade_legacy_configs(run_config: dict[str, Any], encoder_config: dict[str, Any]) -> None:
    """Fill in, in place, the settings a checkpoint written before they existed was trained with.

    ``embed_norm`` (the embedding LayerNorm) arrived after the first checkpoints: an encoder config
    without the key was trained without the norm, and loads without it.
    """
    if "embed_norm" not in encoder_config:
        encoder_config["embed_norm"] = False
        if isinstance(run_config.get("model"), dict):
            run_config["model"]["embed_norm"] = False


def load_checkpoint(path: Path) -> LoadedCheckpoint:
    """Load (and verify) a checkpoint from a checkpoint or run folder."""
    folder = resolve_checkpoint(path)
    verify_checkpoint(folder)
    try:
        weights = load_file(str(folder / "model.safetensors"))
    except (SafetensorError, OSError) as exc:
        raise CheckpointError(f"{folder}: unreadable model.safetensors ({exc})") from None
    encoder_meta = json.loads((folder / "encoder.json").read_text())
    run_config = json.loads((folder / "config.json").read_text())
    upgrade_legacy_configs(run_config, encoder_meta["config"])
    return LoadedCheckpoint(folder, weights, run_config,
                            EncoderConfig.model_validate(encoder_meta["config"]), encoder_meta["vocab_size"],
                            load_tokenizer(folder / "tokenizer.json"))
