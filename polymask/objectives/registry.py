"""The objective registry."""
from __future__ import annotations

from typing import TYPE_CHECKING

from polymask.registry import Registry

if TYPE_CHECKING:
    from polymask.objectives.base import Objective

OBJECTIVES: Registry[type["Objective"]] = Registry("objective")
