"""Modalities: how raw records of a kind of sequence become tokens. Register your own with
``@register_modality("name")`` on a ``Modality`` subclass."""
from polymask.modalities.base import Modality, ModalityConfig
from polymask.modalities.registry import MODALITIES
from polymask.modalities import dna, smiles, text  # noqa: F401  (registers the built-ins)

register_modality = MODALITIES.register


def build_modality(config: ModalityConfig) -> Modality:
    """Instantiate the registered modality named by ``config.name``."""
    return MODALITIES.get(config.name)(config)


__all__ = ["MODALITIES", "Modality", "ModalityConfig", "build_modality", "register_modality"]
