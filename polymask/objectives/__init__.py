"""Objectives: MLM, MAE-LM and ExLM. Register your own with ``@register_objective``."""
from polymask.model.encoder import Encoder
from polymask.objectives.base import (MASK_RATIO, Corruption, CorruptionConfig, Objective, ObjectiveConfig,
                                      ObjectiveOutput, token_loss)
from polymask.objectives.registry import OBJECTIVES
from polymask.objectives import mlm  # noqa: F401  (registers the built-ins)
from polymask.objectives import exlm  # noqa: F401
from polymask.objectives import maelm  # noqa: F401
from polymask.tokenization import SpecialIds

register_objective = OBJECTIVES.register


def build_objective(config: ObjectiveConfig, encoder: Encoder, specials: SpecialIds, mask_span: int = 1,
                    shape_multiple: int = 1) -> Objective:
    """Instantiate the registered objective named by ``config.name`` around ``encoder``: ``mask_span`` is the
    modality's, ``shape_multiple`` the resolved ``train.shape_multiple`` (1 outside training)."""
    return OBJECTIVES.get(config.name)(config, encoder, specials, mask_span, shape_multiple)


__all__ = ["MASK_RATIO", "OBJECTIVES", "Corruption", "CorruptionConfig", "Objective", "ObjectiveConfig",
           "ObjectiveOutput", "build_objective",
           "register_objective", "token_loss"]
