"""SIGINT and SIGTERM during training: finish the current step, then stop cleanly.

While ``StopRequests`` is active, the first SIGINT (Ctrl-C) or SIGTERM (``kill``, a scheduler's
preemption) only records the signal; the training loop checks it between steps, saves a checkpoint,
writes ``summary.json`` marked interrupted and exits with 128 + the signal number (130 or 143). A
second signal raises ``KeyboardInterrupt`` at once, for a user who will not wait.
"""
from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequests:
    """Context manager recording SIGINT/SIGTERM (main thread only; elsewhere it records nothing)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "StopRequests":
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._record)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _record(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            raise KeyboardInterrupt
        self.signum = signum

    @property
    def requested(self) -> bool:
        return self.signum is not None


def exit_code(signum: int) -> int:
    """The shell's exit status for a process ended by ``signum`` (130 for SIGINT, 143 for SIGTERM)."""
    return 128 + signum


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name
