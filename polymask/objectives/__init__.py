"""Objectives: MLM, MAE-LM and ExLM. Register your own with ``@register_objective``."""
from polymask.objectives.base import Objective, ObjectiveConfig, ObjectiveOutput
from polymask.objectives.registry import OBJECTIVES
from polymask.objectives import mlm  # noqa: F401  (registers the built-ins)
from polymask.objectives import exlm  # noqa: F401
from polymask.objectives import maelm  # noqa: F401

register_objective = OBJECTIVES.register

__all__ = ["OBJECTIVES", "Objective", "ObjectiveConfig", "ObjectiveOutput", "register_objective"]
