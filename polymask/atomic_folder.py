"""Folders written whole or not at all: fill a temporary sibling, flush it, rename it into place."""
from __future__ import annotations

import os
import shutil
from pathlib import Path


def move_into_place(tmp: Path, final: Path) -> None:
    """Flush every file of the finished folder ``tmp`` to disk and rename it to ``final``; an existing
    ``final`` is moved aside first and deleted after, so ``final`` is always either the old or the new one."""
    for path in tmp.iterdir():
        with open(path, "rb") as handle:
            os.fsync(handle.fileno())
    if final.exists():
        old = final.with_name(f".old-{final.name}")
        shutil.rmtree(old, ignore_errors=True)
        final.rename(old)
        tmp.rename(final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(final)
