"""Fine-tuning on a user's own table (``polymask finetune --data FILE --target COLUMN``, ``polymask.finetune(data=...)``).

The table becomes an in-memory task spec (``tasks.data.own_table``) read with the checkpoint's modality, and runs
through the same cells as a built-in task, so the result is a benchmark cell's saved model.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from polymask.checkpoints.pretrained import read_checkpoint
from polymask.errors import ConfigError
from polymask.modalities import build_modality
from polymask.tasks.benchmark.runner import slug
from polymask.tasks.benchmark.systems import System, checkpoint_system
from polymask.tasks.data.own_table import own_task_spec
from polymask.tasks.data.spec import OwnDataSplit, TableKind, TaskSpec
from polymask.tasks.finetune.hf_folder import is_hf_folder
from polymask.tasks.finetune.options import FinetuneConfig
from polymask.tasks.finetune.recipe import own_table_settings


def own_data_task(data: Path, targets: Sequence[str], checkpoint: Path, given: dict[str, Any],
                  input_column: str | None = None, kind: TableKind | None = None,
                  split: OwnDataSplit | None = None,
                  invariant_to: Sequence[str] = ()) -> tuple[System, TaskSpec, FinetuneConfig]:
    """The checkpoint's row, the spec of the task in ``data`` read with the checkpoint's modality, and the
    fine-tuning settings: ``given`` over the recipe of the modality's benchmark (``Modality.finetune_recipe``)."""
    if is_hf_folder(checkpoint):
        raise ConfigError(f"{checkpoint}: --data needs a polymask checkpoint, whose modality reads the table; a "
                          f"Hugging Face folder is fine-tuned on built-in tasks (--task)")
    loaded = read_checkpoint(checkpoint)
    modality = build_modality(loaded.run_config.modality)
    config = own_table_settings(modality.finetune_recipe, given)
    system = checkpoint_system(checkpoint, config, loaded)
    return system, own_task_spec(data, targets, system.modality, input_column, kind, split,
                                 invariant_to), config


def default_out(spec: TaskSpec) -> Path:
    """Where ``polymask finetune`` writes when no folder is given: ``runs/finetune-<task>``."""
    return Path("runs") / f"finetune-{slug(spec.key)}"
