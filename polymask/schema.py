"""Base classes for every config model in polymask."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class StrictModel(BaseModel):
    """Base for every config: unknown keys are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=())


class ComponentConfig(StrictModel):
    """Config of a registered component (modality, objective); subclasses add their fields."""

    name: str = Field(description="registered name of the component")
