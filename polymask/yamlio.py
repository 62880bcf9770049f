"""Every YAML file polymask reads goes through here: run recipes (``configs/``), task specs and benchmark recipes
(``tasks/``), and the values of ``--set key=value``. A file that is not YAML, or not a mapping, is one
``ConfigError`` line naming the file (and the line where YAML stopped)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from polymask.errors import ConfigError


def read_yaml(path: Path, what: str) -> dict[str, Any]:
    """The mapping the YAML file ``path`` holds ({} when it is empty); ``what`` names the file's role in the error,
    e.g. "a run config"."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: unreadable ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not a YAML text file (byte {exc.start} is not UTF-8)") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}{_where(exc)}: not valid YAML: {_problem(exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: {what} must be a mapping at the top level, not a {type(data).__name__}")
    return data


def parse_yaml_value(text: str, where: str) -> Any:
    """The value the YAML text ``text`` holds (a ``--set key=value``'s value); ``where`` names it in the
    ``ConfigError`` when it is not YAML."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: not valid YAML: {_problem(exc)}") from None


def _where(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None)
    return f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


def _problem(error: yaml.YAMLError) -> str:
    parts = [getattr(error, "context", None), getattr(error, "problem", None)]
    return ": ".join(str(part) for part in parts if part) or " ".join(str(error).split())
