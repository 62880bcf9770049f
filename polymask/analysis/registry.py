"""The registry of ``polymask analyze <name>`` sub-commands.

An analysis module registers a function that adds its sub-parser (with ``handler`` set):

    @ANALYSES.register("rank")
    def add_parser(sub: argparse._SubParsersAction) -> None: ...

The command line imports the built-in analyses (``polymask.analysis.rank``, ``semantics``) before it
reads the registry.
"""
from __future__ import annotations

import argparse
from typing import Callable

from polymask.registry import Registry

ANALYSES: Registry[Callable[[argparse._SubParsersAction], None]] = Registry("analysis")
