"""Checkpoints: safetensors for tensors, JSON for everything else, written atomically.

Layout of ``<run>/checkpoints/step-000600/``::

    model.safetensors      objective weights (``encoder.*`` plus the objective's own modules)
    optimizer.safetensors  optimizer moments and RNG states (only resuming needs them: a kept checkpoint may
                           drop the file)
    trainer_state.json     step, data position, optimizer hyper-parameters, Python RNG state
    polymask.json          the run config (``config.json`` before: transformers' name, which made
                           ``AutoModel.from_pretrained`` take a polymask checkpoint for a Hugging Face folder)
    encoder.json           encoder config + vocabulary size (all that fine-tuning needs)
    tokenizer.json         the tokenizer (plus transformers side files)
    manifest.json          sha256 of every file above, written last

A checkpoint is written into a temporary folder and renamed into place, then
``checkpoints/latest.json`` is replaced atomically; a crash mid-write never damages a finished
checkpoint, and a checkpoint holding a NaN or an infinity is never written. ``latest.json`` may
only name a ``step-NNNNNN`` folder beside it. Loading verifies every checksum and loads weights
strictly (missing, unexpected, misshapen or non-finite tensors are refused by name); every fault
ends in one ``CheckpointError`` line. Nothing is ever unpickled.

A built-in model (``polymask.builtin_models``) is a checkpoint without optimizer state, found by name; its
weights may be stored in float16 or bfloat16, and every half-precision tensor is loaded as float32.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from tokenizers import Tokenizer

from polymask.builtin_models import FACTS as BUILTIN_FACTS
from polymask.builtin_models import checkpoint_path, is_builtin, not_found
from polymask.checkpoints.atomic import staged_folder
from polymask.config import RunConfig, build_run_config
from polymask.encoder_config import fill_legacy_defaults
from polymask.errors import CheckpointError, ConfigError, DataError, TrainingDiverged, one_line
from polymask.jsonio import dumps
from polymask.plugins import REGISTER_FIRST
from polymask.model.encoder import Encoder, EncoderConfig
from polymask.tensor_checks import check_weights, describe_nonfinite
from polymask.tokenization import load_tokenizer, save_tokenizer
from polymask.weights_io import save_weights

if TYPE_CHECKING:
    from polymask.objectives import Objective

RUN_CONFIG = "polymask.json"
#: The run config's name in checkpoints written before it was renamed; still read.
LEGACY_RUN_CONFIG = "config.json"
#: The metadata file that marks a fine-tuned model folder (``polymask.checkpoints.finetuned``), not a checkpoint.
FINETUNED_META = "finetuned.json"
LATEST = "latest.json"
MANIFEST = "manifest.json"
#: Only resuming needs it: a checkpoint kept without it (its manifest still lists it) is read, fine-tuned and
#: analysed, and refused in one line by ``--resume``.
OPTIMIZER_STATE = "optimizer.safetensors"
CHECKPOINT_NAME = re.compile(r"step-\d{6,}")


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read in blocks."""
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


def write_manifest(folder: Path, fields: dict[str, Any]) -> None:
    """Write ``manifest.json`` last into a finished folder: ``fields`` and the sha256 of every file in it
    (what ``verify_checkpoint`` checks)."""
    files = {path.name: file_sha256(path) for path in sorted(folder.iterdir())}
    _write_json(folder / MANIFEST, {**fields, "files": files})


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


def checkpoint_folder(run_dir: Path, step: int) -> Path:
    """Where ``save_checkpoint`` puts step ``step`` of the run in ``run_dir``."""
    return run_dir / "checkpoints" / f"step-{step:06d}"


def save_checkpoint(run_dir: Path, step: int, weights: dict[str, torch.Tensor], optimizer_state: dict[str, Any],
                    trainer_state: dict[str, Any], rng_tensors: dict[str, torch.Tensor], config: dict[str, Any],
                    encoder: Encoder, tokenizer: Tokenizer, keep: int) -> Path:
    """Write ``checkpoints/step-XXXXXX`` atomically, point ``latest.json`` at it, prune old ones.

    Refuses (``TrainingDiverged``) to write weights or optimizer moments holding NaN or inf."""
    moments, optimizer_meta = optimizer_tensors(optimizer_state)
    nonfinite = describe_nonfinite({**weights, **moments})
    if nonfinite:
        raise TrainingDiverged(f"step {step}: non-finite values in {nonfinite}; checkpoint not written "
                               f"(checkpoints/{LATEST} still names the last finite one)")
    final = checkpoint_folder(run_dir, step)
    root = final.parent
    root.mkdir(parents=True, exist_ok=True)
    with staged_folder(final) as tmp:
        save_weights({name: tensor.detach().cpu().contiguous() for name, tensor in weights.items()},
                     tmp / "model.safetensors")
        save_weights({**moments, **rng_tensors}, tmp / OPTIMIZER_STATE)
        _write_json(tmp / "trainer_state.json", {**trainer_state, "optimizer": optimizer_meta})
        _write_json(tmp / RUN_CONFIG, config)
        _write_json(tmp / "encoder.json", {"config": encoder.config.model_dump(mode="json"),
                                           "vocab_size": encoder.vocab_size})
        save_tokenizer(tokenizer, tmp)
        write_manifest(tmp, {"step": step})
    pointer = root / f".{LATEST}.tmp"
    _write_json(pointer, {"checkpoint": final.name, "step": step})
    os.replace(pointer, root / LATEST)
    _fsync_dir(root)
    steps = sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("step-"))
    for stale in steps[:-keep]:
        if stale != final:
            shutil.rmtree(stale, ignore_errors=True)
    return final


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint folder from a checkpoint folder, a ``checkpoints/`` folder, a run folder or a built-in
    model's name (an existing path wins over a name)."""
    path = checkpoint_path(path)
    if (path / MANIFEST).is_file() or (path / "model.safetensors").is_file():
        return path
    for root in (path, path / "checkpoints"):
        pointer = root / LATEST
        if pointer.is_file():
            return follow_pointer(pointer)
    if not path.exists():
        raise CheckpointError(not_found(path))
    raise CheckpointError(f"{path} holds no checkpoint (no {MANIFEST}, no checkpoints/{LATEST}); "
                          f"it may be from a run that never saved one")


def follow_pointer(pointer: Path) -> Path:
    """The checkpoint ``latest.json`` names: only a ``step-NNNNNN`` folder in the pointer's own folder."""
    root = pointer.parent
    try:
        data = json.loads(pointer.read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{pointer}: unreadable pointer ({exc})") from None
    name = data.get("checkpoint") if isinstance(data, dict) else None
    if not isinstance(name, str) or not CHECKPOINT_NAME.fullmatch(name):
        raise CheckpointError(f"{pointer}: must be {{\"checkpoint\": \"step-NNNNNN\"}} naming a folder beside it, "
                              f"got {json.dumps(data)[:80]}; refusing to follow it")
    folder = root / name
    if not folder.is_dir() or folder.resolve().parent != root.resolve():
        raise CheckpointError(f"{pointer}: names {name}, which is not a checkpoint folder in {root}")
    return folder


def read_json_object(folder: Path, name: str) -> dict[str, Any]:
    """A JSON object file of a checkpoint; ``CheckpointError`` naming the file if absent or malformed."""
    path = folder / name
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{folder}: missing file {name}") from None
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: unreadable ({exc})") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def verify_checkpoint(folder: Path) -> dict[str, Any]:
    """Check every file against the manifest; raise ``CheckpointError`` naming what is wrong."""
    manifest_path = folder / MANIFEST
    if not manifest_path.is_file():
        foreign = not (folder / "encoder.json").is_file() and any(
            (folder / name).is_file() for name in ("model.safetensors", "pytorch_model.bin", "tokenizer_config.json"))
        hint = "; if it is a Hugging Face model folder, its config.json is missing (model.save_pretrained writes it)" \
            if foreign else ""
        raise CheckpointError(f"{folder}: incomplete checkpoint (no {MANIFEST}){hint}")
    manifest = read_json_object(folder, MANIFEST)
    files = manifest.get("files")
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise CheckpointError(f"{manifest_path}: not a checkpoint manifest (needs a 'files' map of names to sha256)")
    for name, digest in files.items():
        file = folder / name
        if name == OPTIMIZER_STATE and not file.exists():
            continue  # removed to keep the weights small: the checkpoint reads, it cannot resume
        if file.parent != folder or not file.is_file():
            raise CheckpointError(f"{folder}: missing file {name}")
        if file_sha256(file) != digest:
            raise CheckpointError(f"{folder}: {name} is corrupt (checksum mismatch)")
    return manifest


@dataclass
class LoadedCheckpoint:
    """A verified checkpoint, read once: its weights, its validated run config (``run_config``, legacy fields
    upgraded), the encoder it holds, its tokenizer, and its manifest (``step``: the step it was saved at)."""

    folder: Path
    weights: dict[str, torch.Tensor]
    encoder_config: EncoderConfig
    vocab_size: int
    tokenizer: Tokenizer
    run_config: RunConfig
    manifest: dict[str, Any]

    @property
    def step(self) -> int | None:
        """The step the checkpoint was saved at (its manifest's; a built-in model's may be None)."""
        step = self.manifest.get("step")
        return None if step is None else int(step)

    @property
    def name(self) -> str:
        """What tables and plots call it: the built-in model's name, else its run folder's name."""
        return self.folder.name if is_builtin(self.folder) else self.run_dir().name

    def pretraining_tokens(self) -> int | None:
        """Real (unpadded) tokens the checkpoint was pretrained on, from its trainer state or, for a built-in
        model, its builtin.json; None when neither records it."""
        if (self.folder / "trainer_state.json").is_file():
            return int(read_json_object(self.folder, "trainer_state.json")["state"]["tokens"])
        if is_builtin(self.folder):
            tokens = read_json_object(self.folder, BUILTIN_FACTS).get("tokens")
            return None if tokens is None else int(tokens)
        return None

    def run_dir(self) -> Path:
        """The run folder the checkpoint was saved in, where a resumed run continues; a built-in model has none."""
        if is_builtin(self.folder):
            raise CheckpointError(f"{self.folder.name} is a built-in model (weights only, no optimizer state): it "
                                  f"cannot be resumed; fine-tune it, embed with it or export it")
        return self.folder.parent.parent

    def trainer_state(self) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """Trainer state JSON and the optimizer/RNG tensors (only needed to resume)."""
        state = read_json_object(self.folder, "trainer_state.json")
        if not (self.folder / OPTIMIZER_STATE).exists():
            raise CheckpointError(f"{self.folder}: its optimizer state ({OPTIMIZER_STATE}) was removed, so the run "
                                  f"cannot resume from it; fine-tune, embed, analyse or export it, or remove "
                                  f"{self.run_dir()} to pretrain the run again from its first step")
        return state, _load_tensors(self.folder, OPTIMIZER_STATE)

    def build_objective(self) -> "Objective":
        """The whole pretraining model (encoder + objective modules) with its weights, e.g. for analysis."""
        from polymask.modalities import build_modality
        from polymask.objectives import build_objective
        from polymask.tokenization import SpecialIds

        config = self.run_config
        objective = build_objective(config.objective, Encoder(self.encoder_config, self.vocab_size),
                                    SpecialIds.of(self.tokenizer), build_modality(config.modality).mask_span)
        check_weights(objective.state_dict(), self.weights, f"{self.folder}/model.safetensors")
        objective.load_state_dict(self.weights)
        return objective

    def build_encoder(self) -> Encoder:
        """The encoder with the checkpoint's weights, objective modules dropped; the whole checkpoint is checked
        first, so a tensor that no part of the pretraining model has is refused like a missing one."""
        return self.build_objective().encoder


def upgrade_legacy_configs(run_config: dict[str, Any], encoder_config: dict[str, Any]) -> None:
    """Fill in, in place, the encoder settings a checkpoint written before they existed was trained with
    (``encoder_config.LEGACY_DEFAULTS``: no embedding LayerNorm, the tanh GELU), in the run config too; and give the
    run config's ``model.rope_2d`` the encoder's (written before the objective's choice was copied there)."""
    model = run_config.get("model")
    for key in fill_legacy_defaults(encoder_config):
        if isinstance(model, dict):
            model[key] = encoder_config[key]
    if isinstance(model, dict) and "rope_2d" in model:
        model["rope_2d"] = encoder_config.get("rope_2d", False)


def run_config_name(folder: Path) -> str:
    """The run config's file in a checkpoint: ``polymask.json``, or ``config.json`` in one written before."""
    return LEGACY_RUN_CONFIG if not (folder / RUN_CONFIG).is_file() and (folder / LEGACY_RUN_CONFIG).is_file() \
        else RUN_CONFIG


def read_checkpoint(path: str | Path) -> LoadedCheckpoint:
    """Load (and verify) a checkpoint from a checkpoint or run folder, or a built-in model's name: every checksum,
    the encoder description and the run config (legacy fields upgraded, then validated into ``run_config``)."""
    folder = resolve_checkpoint(path)
    if (folder / FINETUNED_META).is_file():
        raise CheckpointError(f"{folder} is a fine-tuned model, not a pretraining checkpoint; load it with "
                              f"polymask.load_model")
    manifest = verify_checkpoint(folder)
    weights = _upcast(_load_tensors(folder, "model.safetensors"))
    encoder_meta = read_json_object(folder, "encoder.json")
    config_name = run_config_name(folder)
    run_config = read_json_object(folder, config_name)
    try:
        upgrade_legacy_configs(run_config, encoder_meta["config"])
        encoder_config, vocab_size = EncoderConfig.model_validate(encoder_meta["config"]), int(encoder_meta["vocab_size"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{folder}/encoder.json: not an encoder description ({one_line(exc)})") from None
    try:
        validated = build_run_config(run_config)
    except ConfigError as exc:
        raise CheckpointError(f"{folder}/{config_name}: {unregistered_part(run_config) or one_line(exc)}") from None
    try:
        tokenizer = load_tokenizer(folder / "tokenizer.json")
    except DataError as exc:
        raise CheckpointError(one_line(exc)) from None
    return LoadedCheckpoint(folder, weights, encoder_config, vocab_size, tokenizer, validated, manifest)


def unregistered_part(run_config: dict[str, Any]) -> str | None:
    """The saved run's modality or objective that nothing registered in this process (its plugin not imported)."""
    from polymask.modalities import MODALITIES
    from polymask.objectives import OBJECTIVES

    for key, registry in (("modality", MODALITIES), ("objective", OBJECTIVES)):
        part = run_config.get(key)
        name = part.get("name") if isinstance(part, dict) else part
        if isinstance(name, str) and name not in registry:
            return f"the run's {key} '{name}' is not registered; {REGISTER_FIRST}"
    return None


def _upcast(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Half-precision tensors (a built-in model's storage) as float32, the precision everything trains in."""
    return {name: tensor.float() if tensor.dtype in (torch.float16, torch.bfloat16) else tensor
            for name, tensor in weights.items()}


def _load_tensors(folder: Path, name: str) -> dict[str, torch.Tensor]:
    try:
        return load_file(str(folder / name))
    except FileNotFoundError:
        raise CheckpointError(f"{folder}: missing file {name}") from None
    except (SafetensorError, OSError, ValueError) as exc:
        raise CheckpointError(f"{folder}: unreadable {name} ({one_line(exc)})") from None
