"""Faults a user can cause, shared by the fault-matrix tests: broken data files and corrupt checkpoints.

Each whole-file fault writes one file (or folder) holding a small SMILES table with columns
``smiles,y`` — usable by ``train --column smiles`` and by a regression task — except for its fault.
Each checkpoint corruption damages a copy of a run folder in place.
"""
from __future__ import annotations

import builtins
import gzip
import hashlib
import json
import os
import random
import shutil
from pathlib import Path
from typing import Callable

import torch
from safetensors.torch import load_file, save_file

MOLECULES = ["CCO", "c1ccccc1", "CC(=O)O", "CCN(CC)CC", "O=C(O)c1ccccc1O", "CC(C)Cc1ccc(C(C)C(=O)O)cc1",
             "CN1C=NC2=C1C(=O)N(C(=O)N2C)C", "C1CCOC1", "ClCCl", "OCC(O)CO"]


def table(rows: int = 400) -> str:
    """A valid ``smiles,y`` CSV of ``rows`` rows."""
    return "smiles,y\n" + "".join(f"{MOLECULES[i % len(MOLECULES)]},{i % 7 / 3:.3f}\n" for i in range(rows))


def _write(folder: Path, name: str, data: bytes | str) -> Path:
    path = folder / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def _truncated_gzip(folder: Path) -> Path:
    blob = gzip.compress(table(6000).encode())
    return _write(folder, "data.csv.gz", blob[:len(blob) * 3 // 5])  # breaks off well after the first block


def _directory(folder: Path) -> Path:
    path = folder / "data.csv"
    path.mkdir()
    (path / "part-0.csv").write_text(table())
    return path


def _binary(folder: Path) -> Path:
    generator = random.Random(0)
    return _write(folder, "data.csv", bytes(generator.randrange(256) for _ in range(4000)))


def _non_utf8(folder: Path) -> Path:
    lines = table().splitlines(keepends=True)
    return _write(folder, "data.csv", ("".join(lines[:50]) + "CCO,caf\xe9\n" + "".join(lines[50:])).encode("latin-1"))


#: kind -> writer of the faulty file into a folder (its path returned).
WHOLE_FILE_FAULTS: dict[str, Callable[[Path], Path]] = {
    "empty file": lambda folder: _write(folder, "data.csv", ""),
    "unknown extension": lambda folder: _write(folder, "data.xyz", table()),
    "truncated gzip": _truncated_gzip,
    "gz that is not gzip": lambda folder: _write(folder, "data.csv.gz", table()),
    "directory": _directory,
    "unreadable file": lambda folder: _write(folder, "data.csv", table()),  # made unreadable by ``unreadable``
    "binary data": _binary,
    "not UTF-8": _non_utf8,
    "CSV without the column": lambda folder: _write(folder, "data.csv", table().replace("smiles,y", "mol,y", 1)),
    "ragged CSV": lambda folder: _write(folder, "data.csv", table().replace(",", ",1,").replace("smiles,1,y", "smiles,y")),
}


def unreadable(path: Path, monkeypatch) -> None:
    """Make ``path`` unreadable: permissions for a normal user; root reads anything, so there every
    ``open`` of it fails as it would for a normal user."""
    if os.geteuid() != 0:
        path.chmod(0)
        return
    target, real_open = path.resolve(), builtins.open

    def guarded_open(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and Path(file).resolve() == target:
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded_open)


# -- checkpoints ----------------------------------------------------------------------------------

def latest_checkpoint(run: Path) -> Path:
    return run / "checkpoints" / json.loads((run / "checkpoints" / "latest.json").read_text())["checkpoint"]


def rehash(folder: Path) -> None:
    """Rewrite the manifest so that it matches the (damaged) files: a corruption checksums cannot catch."""
    files = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())
             if p.is_file() and p.name != "manifest.json"}
    (folder / "manifest.json").write_text(json.dumps({"step": 0, "files": files}))


def _edit_tensors(edit: Callable[[dict[str, torch.Tensor]], None]) -> Callable[[Path], None]:
    def corrupt(run: Path) -> None:
        folder = latest_checkpoint(run)
        tensors = load_file(str(folder / "model.safetensors"))
        edit(tensors)
        save_file(tensors, str(folder / "model.safetensors"))
        rehash(folder)
    return corrupt


def _in_checkpoint(edit: Callable[[Path], None], consistent: bool = True) -> Callable[[Path], None]:
    def corrupt(run: Path) -> None:
        folder = latest_checkpoint(run)
        edit(folder)
        if consistent:
            rehash(folder)
    return corrupt


def _pointer(content: str) -> Callable[[Path], None]:
    return lambda run: (run / "checkpoints" / "latest.json").write_text(content)


def _drop_first(tensors: dict[str, torch.Tensor]) -> None:
    del tensors[sorted(tensors)[0]]


def _nan_weights(tensors: dict[str, torch.Tensor]) -> None:
    name = next(n for n in sorted(tensors) if tensors[n].is_floating_point())
    tensors[name] = torch.full_like(tensors[name], float("nan"))


def _wrong_shape(tensors: dict[str, torch.Tensor]) -> None:
    name = next(n for n in sorted(tensors) if tensors[n].ndim == 2)
    tensors[name] = tensors[name][:, :-1].contiguous()


def _symlink_outside(run: Path) -> None:
    elsewhere = run.parent / f"{run.name}-elsewhere"
    shutil.copytree(latest_checkpoint(run), elsewhere)
    (run / "checkpoints" / "step-000099").symlink_to(elsewhere, target_is_directory=True)
    (run / "checkpoints" / "latest.json").write_text('{"checkpoint": "step-000099", "step": 99}')


def _manifest(content: str) -> Callable[[Path], None]:
    return _in_checkpoint(lambda folder: (folder / "manifest.json").write_text(content), consistent=False)


def _json_file(name: str, content: str) -> Callable[[Path], None]:
    return _in_checkpoint(lambda folder: (folder / name).write_text(content))


#: 30 corruptions that make a checkpoint unusable for every verb (resume, fine-tune, analyse).
CHECKPOINT_CORRUPTIONS: dict[str, Callable[[Path], None]] = {
    "latest.json is a list": _pointer("[]"),
    "latest.json is not JSON": _pointer('{"checkpoint": '),
    "latest.json is empty": _pointer(""),
    "latest.json names a number": _pointer('{"checkpoint": 5}'),
    "latest.json points into another run": _pointer('{"checkpoint": "../../other-run/checkpoints/step-000002"}'),
    "latest.json is an absolute path": _pointer('{"checkpoint": "/tmp"}'),
    "latest.json names an absent checkpoint": _pointer('{"checkpoint": "step-000999"}'),
    "latest.json names a file": lambda run: ((run / "checkpoints" / "step-000777").write_text("x"),
                                             _pointer('{"checkpoint": "step-000777"}')(run)),
    "checkpoint is a symlink out of the run": _symlink_outside,
    "no checkpoints at all": lambda run: shutil.rmtree(run / "checkpoints"),
    "manifest missing": _in_checkpoint(lambda folder: (folder / "manifest.json").unlink(), consistent=False),
    "manifest not JSON": _manifest("{{"),
    "manifest is a list": _manifest("[1, 2]"),
    "manifest without files": _manifest('{"step": 2}'),
    "manifest files is a list": _manifest('{"files": ["model.safetensors"]}'),
    "manifest names absent files": _in_checkpoint(lambda folder: (folder / "encoder.json").unlink(), consistent=False),
    "manifest names a path outside": _manifest('{"files": {"../../../etc/hostname": "00"}}'),
    "manifest checksum not a string": _manifest('{"files": {"model.safetensors": 5}}'),
    "weights corrupt (checksum)": _in_checkpoint(lambda folder: (folder / "model.safetensors").write_bytes(
        (folder / "model.safetensors").read_bytes()[:-64] + bytes(64)), consistent=False),
    "weights truncated": _in_checkpoint(lambda folder: (folder / "model.safetensors").write_bytes(
        (folder / "model.safetensors").read_bytes()[:300])),
    "weights not safetensors": _in_checkpoint(lambda folder: (folder / "model.safetensors").write_bytes(b"\x80\x04K")),
    "weights file is a folder": _in_checkpoint(lambda folder: ((folder / "model.safetensors").unlink(),
                                                               (folder / "model.safetensors").mkdir())),
    "a tensor missing": _edit_tensors(_drop_first),
    "an unexpected tensor": _edit_tensors(lambda tensors: tensors.update(extra=torch.zeros(3))),
    "a tensor of the wrong shape": _edit_tensors(_wrong_shape),
    "NaN weights": _edit_tensors(_nan_weights),
    "encoder.json is a list": _json_file("encoder.json", "[]"),
    "encoder.json has a bad field": _json_file("encoder.json", '{"config": {"d_model": "wide"}, "vocab_size": 10}'),
    "polymask.json names an unknown modality": _json_file("polymask.json", '{"modality": "nope", "objective": "mlm"}'),
    "tokenizer.json is garbage": _json_file("tokenizer.json", '{"model": 1}'),
}

#: Corruptions only resuming reads (fine-tuning and analysis do not need the optimizer state).
RESUME_ONLY_CORRUPTIONS: dict[str, Callable[[Path], None]] = {
    "trainer_state.json is a list": _json_file("trainer_state.json", "[]"),
    "trainer_state.json lacks the state": _json_file("trainer_state.json", '{"optimizer": {"param_groups": [], "scalars": {}}}'),
    "optimizer.safetensors is garbage": _in_checkpoint(lambda folder: (folder / "optimizer.safetensors").write_bytes(b"{}")),
}
