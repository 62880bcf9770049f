"""Base classes for every config model in polymask."""
from __future__ import annotations

import typing
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from polymask.errors import ConfigError
from polymask.registry import did_you_mean

Model = TypeVar("Model", bound=BaseModel)


class StrictModel(BaseModel):
    """Base for every config: unknown keys are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=())


class ComponentConfig(StrictModel):
    """Config of a registered component (modality, objective); subclasses add their fields."""

    name: str = Field(description="registered name of the component")


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation holds (through Optional, SerializeAsAny, ...), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in typing.get_args(annotation):
        found = _model_in(argument)
        if found is not None:
            return found
    return None


def _field_names(model: type[BaseModel], location: tuple[Any, ...]) -> list[str]:
    """Field names of the model nested at ``location`` inside ``model`` ([] when there is none)."""
    current: type[BaseModel] | None = model
    for part in location:
        field = current.model_fields.get(part) if current is not None else None
        current = _model_in(field.annotation) if field is not None else None
    return list(current.model_fields) if current is not None else []


def validation_messages(error: ValidationError, model: type[BaseModel], prefix: str = "") -> list[str]:
    """One line per error, naming the field (``prefix.loc``) and the value; an unknown key gets the closest
    field names ("did you mean ...")."""
    lines = []
    for item in error.errors():
        if not item["loc"] and item["type"] == "value_error":  # a check across fields names them itself
            lines.append(str(item["ctx"]["error"]))
            continue
        location = ".".join(str(part) for part in (prefix, *item["loc"]) if part != "")
        shown = "" if item["type"] == "missing" else f" (got {item['input']!r})"
        hint = ""
        if item["type"] == "extra_forbidden":
            hint = did_you_mean(str(item["loc"][-1]), _field_names(model, item["loc"][:-1]))
            hint = f";{hint}" if hint else ""
        lines.append(f"{location or '<root>'}: {item['msg']}{shown}{hint}")
    return lines


def validated(model: type[Model], raw: dict[str, Any], what: str = "option") -> Model:
    """``raw`` validated into ``model``; a ``ConfigError`` naming every wrong field, in one line."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"invalid {what}: " + "; ".join(validation_messages(exc, model))) from None
