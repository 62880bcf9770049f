"""Exclusive folder locks between processes: one run per run folder, one builder per cache entry.

A lock is an ``flock`` on an open file, so the kernel releases it when its process ends however it
ends (``kill -9`` included): a lock file left behind never blocks a later process. The file holds
the owner's process id and command line, which a process that finds the lock taken reports.
"""
from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path
from typing import IO, Callable

from polymask.errors import OutputError, RunBusy


class FolderLock:
    """An exclusive lock held through ``path`` until ``release`` (or the end of the process)."""

    def __init__(self, path: Path, handle: IO[str]) -> None:
        self.path = path
        self._handle: IO[str] | None = handle

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()  # closing the file releases the flock
            self._handle = None

    def __enter__(self) -> "FolderLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _owner(path: Path) -> str:
    try:
        text = path.read_text().strip()
    except OSError:
        text = ""
    return text or "unknown"


def _is_current(path: Path, handle: IO[str]) -> bool:
    """Whether ``handle`` is still the file at ``path`` (its holder may have removed it, and another process
    created a new one there, while this one waited)."""
    try:
        return os.path.samestat(os.fstat(handle.fileno()), os.stat(path))
    except FileNotFoundError:
        return False


def acquire(path: Path, busy_message: Callable[[str], str], *, wait: bool = False,
            on_wait: Callable[[str], None] | None = None) -> FolderLock:
    """Lock ``path`` (created if needed). Taken by another process: raise ``RunBusy(busy_message(owner))``,
    or with ``wait`` call ``on_wait(owner)`` and block until it is free. A holder may remove the file when it
    is done: the lock is then taken again on the file now at ``path``, never on the removed one."""
    path = Path(path)
    while True:
        try:
            handle = open(path, "a+")
        except OSError as exc:
            raise OutputError(f"cannot write {path}: {exc.strerror or exc} (choose a writable folder)") from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _owner(path)
            if not wait:
                handle.close()
                raise RunBusy(busy_message(owner)) from None
            if on_wait is not None:
                on_wait(owner)
            fcntl.flock(handle, fcntl.LOCK_EX)
        if _is_current(path, handle):
            break
        handle.close()
    handle.seek(0)
    handle.truncate()
    handle.write(f"process {os.getpid()} ({' '.join(sys.argv) or 'python'})\n")
    handle.flush()
    return FolderLock(path, handle)


def lock_run_folder(run_dir: Path) -> FolderLock:
    """The run folder's lock; a second run on a busy folder fails at once, naming the first."""
    return acquire(run_dir / ".lock", lambda owner: f"run folder {run_dir} is in use by {owner}; wait for it to "
                                                    f"finish or choose another --out")
