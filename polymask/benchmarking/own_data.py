"""A user's own table as a task (``finetune --data FILE --target COLUMN``, ``benchmark --data ...``, and
``polymask.finetune``/``polymask.benchmark`` with ``data=``).

The table becomes an in-memory task spec (``tasks.data.own_table``) read with the checkpoint's modality, and runs
through the same cells as a built-in task, so the result is a benchmark cell's saved model and its table a benchmark's.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from polymask.benchmarking.runner import slug
from polymask.checkpoints.pretrained import LoadedCheckpoint
from polymask.errors import ConfigError
from polymask.finetune_config import FinetuneConfig
from polymask.modalities import build_modality
from polymask.modalities.base import Modality
from polymask.tasks.data.own_table import OwnTable, describe_own_task
from polymask.tasks.data.spec import TaskSpec
from polymask.tasks.finetune.recipe import own_table_settings


def table_modality(checkpoints: Sequence[Path], loaded: Mapping[Path, LoadedCheckpoint]) -> Modality:
    """The modality a user's table is read with: the first polymask checkpoint's (a Hugging Face folder beside it
    reads the same records); ``loaded``: the polymask checkpoints among ``checkpoints``, read."""
    first = next((path for path in checkpoints if path in loaded), None)
    if first is None:
        raise ConfigError(f"{checkpoints[0]}: --data needs a polymask checkpoint, whose modality reads the table; a "
                          f"Hugging Face folder is fine-tuned on built-in tasks (--task), or benchmarked beside a "
                          f"polymask checkpoint")
    return build_modality(loaded[first].run_config.modality)


def own_data_task(table: OwnTable, checkpoints: Sequence[Path], loaded: Mapping[Path, LoadedCheckpoint],
                  given: dict[str, Any]) -> tuple[Modality, TaskSpec, FinetuneConfig]:
    """The modality that reads ``table`` (``table_modality``), the spec of its task, and the fine-tuning settings:
    ``given`` over the recipe of the modality's benchmark (``Modality.finetune_recipe``)."""
    modality = table_modality(checkpoints, loaded)
    return modality, table.spec(modality), own_table_settings(modality.finetune_recipe, given)


def nothing_to_vary(config: FinetuneConfig, modality: Modality, spec: TaskSpec) -> str:
    """A note for a table whose settings augment or average over variants its labels declare none of."""
    asked = [name for name in ("augment", "test_time_average") if getattr(config, name)]
    declared = modality.invariances(spec.invariant_to)
    if not asked or modality.varied(declared):
        return ""
    why = (f"no record of this model varies under {', '.join(declared)}" if declared else
           "the table declares no invariance of its labels (--invariant-to, e.g. reverse_complement shift for "
           "strand-free DNA windows)")
    return f"; {' and '.join(asked)} vary nothing: {why}"


def own_table_note(spec: TaskSpec, modality: Modality, config: FinetuneConfig) -> str:
    """How a user's table was read and fine-tuned, in one line for the terminal and the report's settings."""
    recipe = modality.finetune_recipe
    return describe_own_task(spec) + (
        f"; fine-tuned with the {recipe} recipe (tasks/{recipe}/recipe.yaml) where no option says otherwise"
        if recipe else "") + nothing_to_vary(config, modality, spec)


def default_out(spec: TaskSpec) -> Path:
    """Where ``polymask finetune`` writes when no folder is given: ``runs/finetune-<task>``."""
    return Path("runs") / f"finetune-{slug(spec.key)}"
