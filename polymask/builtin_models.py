"""Built-in pretrained models: weights-only pretraining checkpoints found by name.

A built-in model is a folder ``<root>/<name>/`` holding a checkpoint in polymask's layout (model.safetensors,
possibly in half precision, polymask.json, encoder.json, tokenizer.json, manifest.json; no optimizer state),
plus ``MODEL_CARD.md`` and ``builtin.json`` (the facts ``polymask models`` lists). The roots searched, in
order: the folders ``$POLYMASK_PRETRAINED_DIR`` lists (separated like PATH; a user's own model zoo), then
the package's ``polymask/pretrained/``; the first folder of a name wins. Everything here is light (no torch),
so listing models and parsing ``--checkpoint`` stay quick.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polymask.errors import CheckpointError
from polymask.registry import did_you_mean
from polymask.resources import PACKAGE_DIR

PRETRAINED_ENV = "POLYMASK_PRETRAINED_DIR"
FACTS = "builtin.json"
CARD = "MODEL_CARD.md"
#: What every builtin.json states (``polymask models`` lists them in this order).
REQUIRED_FACTS = ("modality", "objective", "corpus", "parameters")
NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")
#: The precisions a built-in model's weights may be stored in (half precision loads as float32).
STORAGE_DTYPES = ("float16", "bfloat16", "float32")


def search_path() -> list[Path]:
    """The folders searched for built-in models, first match wins."""
    extra = [Path(p).expanduser() for p in os.environ.get(PRETRAINED_ENV, "").split(os.pathsep) if p]
    return [*extra, PACKAGE_DIR / "pretrained"]


def is_builtin(folder: Path) -> bool:
    """Whether ``folder`` is a built-in model's folder (it has builtin.json)."""
    return (Path(folder) / FACTS).is_file()


def builtin_folders() -> dict[str, Path]:
    """Every built-in model's folder, by name, in name order."""
    found: dict[str, Path] = {}
    for root in search_path():
        if root.is_dir():
            for folder in root.iterdir():
                if NAME.fullmatch(folder.name) and is_builtin(folder):
                    found.setdefault(folder.name, folder)
    return dict(sorted(found.items()))


def checkpoint_path(path_or_name: str | Path) -> Path:
    """The folder a checkpoint argument names: an existing path as given, else the built-in model of that
    name, else the path unchanged (loading it then reports it as not found). The type of every ``--checkpoint``."""
    path = Path(path_or_name)
    if path.exists() or not NAME.fullmatch(str(path_or_name)):
        return path
    return builtin_folders().get(str(path_or_name), path)


def not_found(path: Path) -> str:
    """The one-line message for a checkpoint that is no folder; a bare name also gets the built-in names."""
    message = f"checkpoint not found: {path}"
    if len(Path(path).parts) != 1:
        return message
    names = list(builtin_folders())
    if not names:
        return f"{message} (no such folder, and no built-in model is installed)"
    return f"{message}: no such folder nor built-in model;{did_you_mean(str(path), names)} " \
           f"built-in models: {', '.join(names)}"


def check_name(name: str) -> str:
    """``name`` if it can name a built-in model (lower case letters, digits, '.', '_', '-')."""
    if not NAME.fullmatch(name):
        raise CheckpointError(f"invalid built-in model name '{name}': use lower-case letters, digits, '.', '_' "
                              f"and '-', starting with a letter or digit")
    return name


@dataclass(frozen=True)
class BuiltinModel:
    """A built-in model's name, folder and facts (builtin.json)."""

    name: str
    folder: Path
    facts: dict[str, Any]

    @classmethod
    def read(cls, name: str, folder: Path) -> "BuiltinModel":
        path = folder / FACTS
        try:
            facts = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"{path}: unreadable ({exc})") from None
        missing = [key for key in REQUIRED_FACTS if not isinstance(facts, dict) or key not in facts]
        if missing:
            raise CheckpointError(f"{path}: missing {', '.join(missing)}")
        return cls(name, folder, facts)

    def size_bytes(self) -> int:
        """The folder's size on disk."""
        return sum(file.stat().st_size for file in self.folder.iterdir() if file.is_file())

    def columns(self) -> list[str]:
        """Name, modality, objective, corpus, parameters and size, as ``polymask models`` lists them."""
        facts = self.facts
        return [self.name, str(facts["modality"]), str(facts["objective"]), str(facts["corpus"]),
                f"{_count(int(facts['parameters']))} params", f"{self.size_bytes() / 1e6:.1f} MB"]


def builtin_models() -> list[BuiltinModel]:
    """Every built-in model, in name order (a malformed builtin.json is one ``CheckpointError`` line)."""
    return [BuiltinModel.read(name, folder) for name, folder in builtin_folders().items()]


def listing() -> str:
    """``polymask models``: one aligned line per built-in model, or one line saying there is none."""
    rows = [model.columns() for model in builtin_models()]
    if not rows:
        return f"no built-in model is installed (looked in {', '.join(map(str, search_path()))}; " \
               f"${PRETRAINED_ENV} adds folders)"
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows)


def _count(n: int) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return str(n)
