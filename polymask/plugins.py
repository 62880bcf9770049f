"""``--plugin``: import the modules or .py files that register custom modalities, objectives and task kinds.

Whatever goes wrong in a plugin (a syntax error, an exception at import, a name registered twice) ends in one
``PolymaskError`` naming the plugin and the line."""
from __future__ import annotations

import importlib
import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType

from polymask.errors import PolymaskError, one_line

#: What a message about a saved model whose modality, objective or task kind is not registered advises.
REGISTER_FIRST = "import the module that registers it first (--plugin on the command line)"


def load_plugins(specs: list[str] | None) -> None:
    """Import each plugin, by module name or .py path; a file already imported (named twice) is not run again."""
    for spec in specs or []:
        if spec.endswith(".py"):
            path = Path(spec)
            if not path.is_file():
                raise PolymaskError(f"plugin file not found: {path}")
            _load(spec, path.resolve())
        else:
            _load(spec, None)


def _load(spec: str, path: Path | None) -> ModuleType:
    try:
        return _import_file(path) if path is not None else importlib.import_module(spec)
    except ModuleNotFoundError as exc:
        if path is None and exc.name is not None and (spec + ".").startswith(exc.name + "."):
            raise PolymaskError(f"cannot import plugin module '{spec}': {exc}") from None
        raise PolymaskError(_failure(spec, path, exc)) from None
    except Exception as exc:
        raise PolymaskError(_failure(spec, path, exc)) from None


def _import_file(path: Path) -> ModuleType:
    """Run a .py file as a module, under its stem unless that names another module (``datasets.py`` would hide
    the library), in ``sys.modules`` so that what it defines pickles; removed again if it fails."""
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) == str(path):
            return module
    name = _module_name(path)
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise PolymaskError(f"plugin {path}: not a Python file")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _module_name(path: Path) -> str:
    """``path``'s stem where no other module has that name, else a private name."""
    stem = path.stem
    if stem.isidentifier() and stem not in sys.modules:
        found = importlib.util.find_spec(stem)
        if found is None or found.origin is not None and Path(found.origin).resolve() == path:
            return stem
    base = f"polymask_plugin_{stem if stem.isidentifier() else 'file'}"
    name, count = base, 1
    while name in sys.modules:
        count += 1
        name = f"{base}_{count}"
    return name


def _failure(spec: str, path: Path | None, exc: BaseException) -> str:
    """One line for a plugin that failed: the plugin, where (the plugin's own line when it is in the traceback),
    the exception."""
    if isinstance(exc, SyntaxError) and exc.filename:  # raised by the parser: its own file and line
        return f"plugin {spec} failed at import ({exc.filename}, line {exc.lineno}): SyntaxError: {exc.msg}"
    frames = [frame for frame in traceback.extract_tb(exc.__traceback__) if not frame.filename.startswith("<")]
    own = [frame for frame in frames if path is not None and Path(frame.filename) == path]
    frame = (own or frames or [None])[-1]
    where = f" ({frame.filename}, line {frame.lineno})" if frame is not None else ""
    return f"plugin {spec} failed at import{where}: {type(exc).__name__}: {one_line(exc)}"
