"""The modality registry (kept apart from the package ``__init__`` so modules can import it early)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from polymask.registry import Registry

if TYPE_CHECKING:
    from polymask.modalities.base import Modality

MODALITIES: Registry[type["Modality"]] = Registry("modality")
