"""Command-line options generated from config models, so that a setting's type, help and default are written
once, on its pydantic field.

    add_model_options(parser, FinetuneConfig, ["lr", "epochs"])   # --lr, --epochs: help and default from the fields
    given = given_fields(args, FinetuneConfig)                     # {"lr": 5e-5}: only what the user gave
    config = settings_from(args, FinetuneConfig)                   # validated; a wrong value is a ConfigError

An option's default is None in the parser ("not given"), so that what stands between the command line and the
model's default (a benchmark's recipe, a checkpoint's own setting) can tell the two apart; its help ends in
"(default: <the field's default>)", read from the model. Each model's options live in the namespace under
``<Model>.<field>``: two models with a field of the same name (or a verb's own option) never collide.
"""
from __future__ import annotations

import argparse
import types
import typing
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping, TypeVar

from pydantic import BaseModel

from polymask.schema import validated

Model = TypeVar("Model", bound=BaseModel)

SCALARS = (int, float, str, Path)


def shown_default(value: Any) -> str:
    """A default as ``--help`` shows it: None (an optional setting left out) as "none"."""
    return "none" if value is None else str(value)


def _option_kind(annotation: Any) -> dict[str, Any]:
    """``add_argument`` keywords for a field's type: a scalar's ``type``, a Literal's ``choices``, a bool's
    --x/--no-x pair; ``X | None`` as X (leaving an option out is how the command line says None)."""
    args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        return _option_kind(args[0])
    if annotation is bool:
        return {"action": argparse.BooleanOptionalAction}
    if typing.get_origin(annotation) is Literal:
        return {"choices": list(args), "type": type(args[0])}
    if annotation in SCALARS:
        return {"type": annotation, "metavar": None}
    raise TypeError(f"no command-line option for a field of type {annotation!r}; give it through --set")


def add_model_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup, model: type[BaseModel],
                      fields: Iterable[str], *, stand_in: str = "", flags: Mapping[str, str] | None = None) -> None:
    """One option per field of ``model`` in ``fields``: ``--field-name`` (or ``--<flags[field]>``), typed by the
    field's annotation, its help the field's description and "(default: <the field's default><stand_in>)".
    ``stand_in`` names what holds where the option is left out, before the default (" or the benchmark's
    recipe")."""
    for name in fields:
        field = model.model_fields[name]
        kind = _option_kind(field.annotation)
        if "metavar" in kind:
            kind["metavar"] = name.upper()
        default = field.get_default(call_default_factory=True)
        help_text = f"{field.description or name} (default: {shown_default(default)}{stand_in})"
        flag = "--" + (flags or {}).get(name, name.replace("_", "-"))
        parser.add_argument(flag, dest=f"{model.__name__}.{name}", default=None, help=help_text.replace("%", "%%"),
                            **kind)


def given_fields(args: argparse.Namespace, model: type[BaseModel]) -> dict[str, Any]:
    """The fields of ``model`` whose options (from ``add_model_options``) the command line gave."""
    prefix = f"{model.__name__}."
    return {dest[len(prefix):]: value for dest, value in vars(args).items()
            if dest.startswith(prefix) and value is not None}


def settings_from(args: argparse.Namespace, model: type[Model]) -> Model:
    """``model`` from the options the command line gave, its defaults elsewhere."""
    return validated(model, given_fields(args, model))


def add_plugin_option(parser: argparse.ArgumentParser, registers: str) -> None:
    """``--plugin``: modules or .py files imported before the verb runs (``polymask.plugins.load_plugins``), which register
    ``registers`` (custom modalities, objectives)."""
    parser.add_argument("--plugin", action="append",
                        help=f"module or .py file registering {registers} (repeatable; default: none)")
