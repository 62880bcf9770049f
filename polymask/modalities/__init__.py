"""Modalities: how raw records of a kind of sequence become tokens. Register your own with
``@register_modality("name")`` on a ``Modality`` subclass."""
from typing import Callable

from polymask.modalities.base import Modality, ModalityConfig
from polymask.modalities.registry import MODALITIES
from polymask.modalities import dna, smiles, text  # noqa: F401  (registers the built-ins)


def register_modality(name: str) -> Callable[[type[Modality]], type[Modality]]:
    """Class decorator: register a ``Modality`` subclass as ``name``, which becomes its ``name`` (as saved runs and
    messages give it)."""

    def decorate(cls: type[Modality]) -> type[Modality]:
        MODALITIES.register(name)(cls)
        cls.name = name
        return cls

    return decorate


def build_modality(config: ModalityConfig) -> Modality:
    """Instantiate the registered modality named by ``config.name``."""
    return MODALITIES.get(config.name)(config)


__all__ = ["MODALITIES", "Modality", "ModalityConfig", "build_modality", "register_modality"]
