"""Analyses of pretrained checkpoints, each a ``polymask analyze <name>`` sub-command.

An analysis module registers a function that adds its sub-parser (with ``handler`` set):

    @ANALYSES.register("rank")
    def add_parser(sub: argparse._SubParsersAction) -> None: ...
"""
from __future__ import annotations

import argparse
from typing import Callable

from polymask.registry import Registry

ANALYSES: Registry[Callable[[argparse._SubParsersAction], None]] = Registry("analysis")

from polymask.analysis import rank, semantics  # noqa: E402,F401  (register `polymask analyze rank|semantics`)
