"""Fine-tuning on a user's own table: ``polymask finetune --data FILE --target COLUMN`` and ``polymask.finetune``.

The table becomes an in-memory task spec (``tasks.data.own_table``) read with the checkpoint's modality, and runs
through the same cells as a built-in task, so the result is a benchmark cell's saved model.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from polymask.builtin_models import checkpoint_path
from polymask.errors import ConfigError
from polymask.tasks.benchmark.runner import cell_path, report_settings, run_benchmark, slug
from polymask.tasks.benchmark.systems import System, checkpoint_system
from polymask.tasks.data.own_table import own_task_spec
from polymask.tasks.data.spec import OwnDataSplit, TableKind, TaskSpec
from polymask.tasks.finetune.hf_folder import is_hf_folder
from polymask.tasks.finetune.options import FinetuneConfig, finetune_settings


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


def finetune(data: str | Path, target: str | Sequence[str], checkpoint: str | Path, *,
             input_column: str | None = None, kind: TableKind | None = None, split: OwnDataSplit | None = None,
             out: str | Path | None = None, seed: int = 0, progress: bool = False, **settings: Any) -> Path:
    """Fine-tune ``checkpoint`` (a run or checkpoint folder, or a built-in model's name) to predict the ``target``
    column(s) of the table ``data`` (.csv, .tsv, .jsonl or .parquet) from its ``input_column`` (default: the
    modality's usual column names), as ``polymask finetune --data`` does; returns the saved model's folder, which
    ``polymask.load_model`` opens. ``kind`` (regression, binary, multiclass) is inferred from the target values
    unless given; ``split`` is scaffold for SMILES, random otherwise (80/10/10). ``settings`` are
    ``FinetuneConfig`` fields (``epochs=5``, ``lr=1e-4``, ...). The report is ``<out>/results.md``.

    >>> model = polymask.load_model(polymask.finetune("solubility.csv", "logS", "smiles-mlm-1.7m"))
    """
    config = finetune_settings(settings)
    if not config.save_model:
        raise ConfigError("polymask.finetune returns the saved model; save_model must stay true")
    targets = [target] if isinstance(target, str) else list(target)
    system, spec = own_data_task(Path(data), targets, checkpoint_path(checkpoint), config, input_column, kind, split)
    folder = Path(out) if out is not None else default_out(spec)
    run_benchmark([system], [spec], [seed], folder, f"Fine-tuning on {spec.key}", None,
                  report_settings(config, str(data)), progress, missing_ok=False)
    return cell_path(folder, system, spec, seed).with_suffix("")
