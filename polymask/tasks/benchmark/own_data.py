"""Fine-tuning on a user's own table (``polymask finetune --data FILE --target COLUMN``, ``polymask.finetune(data=...)``).

The table becomes an in-memory task spec (``tasks.data.own_table``) read with the checkpoint's modality, and runs
through the same cells as a built-in task, so the result is a benchmark cell's saved model.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from polymask.errors import ConfigError
from polymask.tasks.benchmark.runner import slug
from polymask.tasks.benchmark.systems import System, checkpoint_system
from polymask.tasks.data.own_table import own_task_spec
from polymask.tasks.data.spec import OwnDataSplit, TableKind, TaskSpec
from polymask.tasks.finetune.hf_folder import is_hf_folder
from polymask.tasks.finetune.options import FinetuneConfig


def own_data_task(data: Path, targets: Sequence[str], checkpoint: Path, config: FinetuneConfig,
                  input_column: str | None = None, kind: TableKind | None = None,
                  split: OwnDataSplit | None = None) -> tuple[System, TaskSpec]:
    """The checkpoint's row and the spec of the task in ``data``, read with the checkpoint's modality."""
    if is_hf_folder(checkpoint):
        raise ConfigError(f"{checkpoint}: --data needs a polymask checkpoint, whose modality reads the table; a "
                          f"Hugging Face folder is fine-tuned on built-in tasks (--task)")
    system = checkpoint_system(checkpoint, config)
    return system, own_task_spec(data, targets, system.modality, input_column, kind, split)


def default_out(spec: TaskSpec) -> Path:
    """Where ``polymask finetune`` writes when no folder is given: ``runs/finetune-<task>``."""
    return Path("runs") / f"finetune-{slug(spec.key)}"
