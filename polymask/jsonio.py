"""Every file polymask writes goes through here: standard JSON, written atomically.

JSON: NaN and infinities are not JSON (JavaScript, Go and Rust parsers reject them), so an
undefined number is written as ``null``; numpy scalars and arrays become plain numbers and lists;
``allow_nan=False`` guards the rest. Read such a number back with ``number``.

Atomic: a file is written under a temporary name in the same folder (unique to the process),
flushed to disk and renamed over its final name, so a failed write (read-only folder, full disk)
never leaves a half-written file under the final name; the failure is raised as ``OutputError``
naming the file.
"""
from __future__ import annotations

import contextlib
import errno
import json
import math
import os
from pathlib import Path
from typing import Any, Callable, Iterator

from polymask.errors import OutputError


def standard(value: Any, default: Callable[[Any], Any] | None = None) -> Any:
    """``value`` with every non-finite float replaced by None, numpy/Path values made plain, and any
    other object passed through ``default`` (as ``json.dumps`` would)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key if isinstance(key, str) else str(key): standard(item, default) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [standard(item, default) for item in value]
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist"):  # numpy scalars and arrays, torch tensors
        return standard(value.tolist(), default)
    return standard(default(value)) if default is not None else value


def dumps(value: Any, *, indent: int | None = None, default: Callable[[Any], Any] | None = None) -> str:
    """Standard JSON text of ``value`` (NaN and infinities as null)."""
    return json.dumps(standard(value, default), indent=indent, allow_nan=False)


def number(value: Any) -> float:
    """A number read back from polymask's JSON: null (an undefined number) becomes NaN."""
    return float("nan") if value is None else float(value)


def _failure(path: Path, exc: OSError) -> OutputError:
    reason = exc.strerror or str(exc)
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
    return OutputError(f"cannot write {path}: {reason} ({'free some space or ' if full else ''}choose another output "
                       f"folder)")


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path to write ``path``'s content to; renamed over ``path`` when the block succeeds.

    The temporary name keeps the suffix (so writers that infer the format from it work) and is
    unique to the process; on any failure it is removed and ``path`` is left as it was."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}{path.suffix}")
    try:
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise _failure(path, exc) from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def make_dir(path: Path) -> Path:
    """Create the folder ``path`` (and its parents); ``OutputError`` naming it when that is impossible."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _failure(Path(path), exc) from None
    return Path(path)


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_json(path: Path, value: Any, *, indent: int | None = 1, default: Callable[[Any], Any] | None = None) -> Path:
    """Write ``value`` as standard JSON to ``path`` atomically."""
    return write_text(path, dumps(value, indent=indent, default=default) + "\n")


def append_jsonl(path: Path, value: Any) -> None:
    """Append one standard-JSON line to ``path`` (a log: readers skip a torn last line)."""
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(dumps(value) + "\n")
    except OSError as exc:
        raise _failure(Path(path), exc) from None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The objects of a JSON-lines log, skipping a line torn by a crash or a full disk."""
    records = []
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records
