"""Folders written whole or not at all: fill a temporary sibling, flush it, rename it into place."""
from __future__ import annotations

import contextlib
import errno
import os
import shutil
from pathlib import Path
from typing import Iterator

from polymask.errors import OutputError


def _move_into_place(tmp: Path, final: Path) -> None:
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


@contextlib.contextmanager
def staged_folder(final: Path) -> Iterator[Path]:
    """A fresh temporary sibling of ``final`` to fill; moved into place when the block succeeds, removed
    whatever goes wrong (a full disk ends in one ``OutputError`` naming ``final``, no folder left behind)."""
    tmp = final.with_name(f".tmp-{final.name}-{os.getpid()}")
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        yield tmp
        _move_into_place(tmp, final)
    except OSError as exc:
        hint = "free some space or choose another output folder" if exc.errno in (errno.ENOSPC, errno.EDQUOT) \
            else "choose another output folder"
        raise OutputError(f"cannot write {final}: {exc.strerror or exc} ({hint})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
