"""A small generic name -> object registry: modalities, objectives, task kinds, analyses and benchmark references
keep one."""
from __future__ import annotations

import difflib
from typing import Callable, Generic, Iterable, Iterator, TypeVar

T = TypeVar("T")


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """" did you mean 'x'?" (or "'x' or 'y'") for the choices closest to ``name``; "" when none is close."""
    close = difflib.get_close_matches(name, list(choices), n=3, cutoff=0.6)
    if not close:
        lowered = {choice.lower(): choice for choice in choices}
        close = [lowered[key] for key in difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.6)]
    return f" did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


class UnknownNameError(ValueError):
    """A name that is not registered; the message lists the valid choices."""


def _redefinition(old: object, new: object) -> bool:
    """Whether ``new`` is ``old``'s class defined again: same module and qualified name."""
    return isinstance(old, type) and isinstance(new, type) and (old.__module__, old.__qualname__) == (
        new.__module__, new.__qualname__)


class Registry(Generic[T]):
    """Maps names to registered objects (usually classes).

    >>> MODALITIES = Registry[type]("modality")
    >>> @MODALITIES.register("protein")
    ... class Protein: ...
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator that registers an object under ``name``. A different object under a taken name is an error; the
        same class defined again (a re-run notebook cell, a reloaded module) replaces the old definition."""

        def decorate(obj: T) -> T:
            existing = self._items.get(name)
            if existing is not None and existing is not obj and not _redefinition(existing, obj):
                raise ValueError(f"{self.kind} '{name}' is already registered ({existing!r})")
            self._items[name] = obj
            return obj

        return decorate

    def unregister(self, name: str) -> None:
        """Remove ``name`` (for tests and interactive sessions)."""
        self._items.pop(name, None)

    def get(self, name: str) -> T:
        """The object registered as ``name``; an unknown name lists the valid choices."""
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(
                f"unknown {self.kind} '{name}';{did_you_mean(name, self.names())} "
                f"choose one of: {', '.join(self.names()) or '(none)'}"
            ) from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
