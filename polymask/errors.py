"""Errors polymask reports to users (the CLI prints them without a traceback)."""
from __future__ import annotations


class PolymaskError(Exception):
    """Base of every error with a message meant for the user."""


class ConfigError(PolymaskError, ValueError):
    """A config that does not validate; the message names every offending field."""


class InvalidRecord(PolymaskError, ValueError):
    """One input record that cannot be used; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class DataError(PolymaskError):
    """A corpus or task file that cannot be read (names the file, and the line when known)."""


class CheckpointError(PolymaskError):
    """A checkpoint that is missing, incomplete or corrupt."""
