"""Errors polymask reports to users (the CLI prints them without a traceback)."""
from __future__ import annotations


def one_line(exc: BaseException, limit: int = 400) -> str:
    """An exception's message folded into one line (a multi-line pydantic or library message: its lines joined
    with "; "), cut at ``limit`` characters."""
    text = "; ".join(" ".join(line.split()) for line in str(exc).splitlines() if line.strip()).replace(":;", ":")
    return text[:limit] + ("..." if len(text) > limit else "")


class PolymaskError(Exception):
    """Base of every error with a message meant for the user."""


class ConfigError(PolymaskError, ValueError):
    """A config that does not validate; the message names every offending field."""


class InvalidRecord(PolymaskError, ValueError):
    """One input record that cannot be used; ``reason`` says why, ``kind`` is the reason without the record's
    particulars (atom numbers, lengths), under which the run's report counts it."""

    def __init__(self, reason: str, kind: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind or reason


class ModalityFailed(PolymaskError):
    """A modality's ``normalize`` that failed otherwise than with ``InvalidRecord`` (a bug in a custom modality): the
    command stops rather than skip every record."""


class DataError(PolymaskError):
    """A corpus or task file that cannot be read (names the file, and the line when known)."""


class TaskFileMissing(DataError):
    """A task's data file found nowhere (a benchmark lists such tasks as not run)."""


class CheckpointError(PolymaskError):
    """A checkpoint that is missing, incomplete or corrupt."""


class OutputError(PolymaskError):
    """An output that cannot be written (read-only folder, full disk); names the file."""


class RunBusy(PolymaskError):
    """A run folder another process is writing to."""


class RankLost(PolymaskError):
    """Another rank of a torchrun job stopped answering within ``train.dist_timeout``, or ended. The command line
    exits after its one line without interpreter teardown (``polymask.cli.end_worker``): the process group's
    teardown can wait out ``dist_timeout`` again for every collective still queued for the lost rank; a Python
    caller should do the same."""


class TrainingDiverged(PolymaskError):
    """Training produced non-finite losses or gradients for several steps in a row."""


class RunInterrupted(KeyboardInterrupt):
    """Training stopped by SIGINT or SIGTERM after saving its state; ``exit_code`` is 130 or 143.

    A ``KeyboardInterrupt``, so Python callers of ``polymask.train`` see Ctrl-C as they expect."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
