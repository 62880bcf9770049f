"""Locate the built-in data folders (tokenizers/, configs/, tasks/, corpora/).

In a source checkout or editable install they sit next to the package; in a built wheel they are
carried inside it under ``polymask/_builtin/``.
"""
from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def builtin_dir(kind: str) -> Path:
    """The folder holding built-in ``kind`` files ("tokenizers", "configs", "tasks" or "corpora")."""
    candidates = [PACKAGE_DIR / kind] if kind == "corpora" else [
        PACKAGE_DIR / "_builtin" / kind,
        PACKAGE_DIR.parent / kind,
    ]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"built-in folder '{kind}' not found (looked in {', '.join(map(str, candidates))})")


def builtin_config(name: str) -> Path | None:
    """The path of ``configs/<name>.yaml`` if it exists."""
    path = builtin_dir("configs") / f"{name.removesuffix('.yaml')}.yaml"
    return path if path.is_file() else None


def builtin_config_names() -> list[str]:
    """The names of the built-in recipes (``configs/*.yaml`` without the suffix)."""
    return sorted(path.stem for path in builtin_dir("configs").glob("*.yaml"))
