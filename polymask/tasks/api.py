"""The downstream side from Python: fine-tune, benchmark and read tasks as the command line does.

    import polymask
    model = polymask.load_model(polymask.finetune("smiles-mlm-1.7m", task="moleculenet/bbbp"))
    model = polymask.load_model(polymask.finetune("smiles-mlm-1.7m", data="my.csv", target="logS"))
    table = polymask.benchmark("moleculenet", ["smiles-mlm-1.7m"], tasks=["esol", "bbbp"], seeds=3)
    task = polymask.load_task("glue/rte", tables={"train": ds["train"], "test": ds["validation"]})

``settings`` are ``FinetuneConfig`` fields (``epochs=5``, ``lr=1e-4``, ``pooling="cls"``, ...); where they are
silent, a benchmark's recipe (``tasks/<benchmark>/recipe.yaml``) and then the defaults hold, as on the command line.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from polymask.builtin_models import checkpoint_path
from polymask.errors import ConfigError
from polymask.tasks.benchmark.own_data import default_out, own_data_task
from polymask.tasks.benchmark.runner import cell_path, report_settings, run_benchmark
from polymask.tasks.benchmark.systems import pretrained_systems, reference_systems
from polymask.tasks.data.loading import TableSource, TaskData
from polymask.tasks.data.loading import load_task as load_task_data
from polymask.tasks.data.own_table import describe_own_task
from polymask.tasks.data.spec import OwnDataSplit, TableKind, TaskSpec, as_task_spec, benchmark_tasks
from polymask.tasks.finetune.hf_folder import is_hf_folder
from polymask.tasks.finetune.options import FinetuneConfig
from polymask.tasks.finetune.recipe import recipe_settings

if TYPE_CHECKING:
    import pandas as pd

    from polymask.modalities.base import Modality


def _data_location(data_dir: Path | None) -> str:
    return str(data_dir) if data_dir else "built-in"


def seed_list(seeds: int | Sequence[int]) -> list[int]:
    """Fine-tuning seeds: a count ``n`` (0..n-1) or the seeds themselves; none is a ``ConfigError``."""
    chosen = list(range(seeds)) if isinstance(seeds, int) else [int(seed) for seed in seeds]
    if not chosen:
        raise ConfigError("no fine-tuning seed: give a count (seeds=3) or the seeds (seeds=[0, 1, 2])")
    return chosen


def _nothing_to_vary(config: FinetuneConfig, modality: "Modality", spec: TaskSpec) -> str:
    """A note for a table whose settings augment or average over variants its labels declare none of."""
    asked = [name for name in ("augment", "test_time_average") if getattr(config, name)]
    declared = modality.invariances(spec.invariant_to)
    if not asked or modality.varied(declared):
        return ""
    why = (f"no record of this model varies under {', '.join(declared)}" if declared else
           "the table declares no invariance of its labels (--invariant-to, e.g. reverse_complement shift for "
           "strand-free DNA windows)")
    return f"; {' and '.join(asked)} vary nothing: {why}"


def run_finetune(checkpoint: Path, task: str | TaskSpec | None, data: Path | None, targets: Sequence[str],
                 given: dict[str, Any], seeds: int | Sequence[int], out: Path | None, data_dir: Path | None,
                 progress: bool, input_column: str | None = None, kind: TableKind | None = None,
                 split: OwnDataSplit | None = None, invariant_to: Sequence[str] = ()) -> tuple[Path, Path]:
    """(report, the first seed's model folder) of fine-tuning ``checkpoint`` on ``task`` or on the ``targets`` of
    the table ``data`` (exactly one of them), ``given`` settings over the recipe; ``polymask finetune``'s path."""
    if (task is None) == (data is None):
        raise ConfigError("give a task or your own table (data and its target columns), not both")
    if data is not None and not targets:
        raise ConfigError(f"--data {data} needs --target (target= from Python): the column(s) to predict")
    given_table_options = [f"--{name.replace('_', '-')}" for name, value in (
        ("target", targets), ("input_column", input_column), ("kind", kind), ("split", split),
        ("invariant_to", invariant_to)) if value]
    if task is not None and given_table_options:
        raise ConfigError(f"{', '.join(given_table_options)}: for your own table (--data); a task spec declares its "
                          f"own columns, kind and split")
    if data is not None:
        system, spec, config = own_data_task(data, targets, checkpoint, given, input_column, kind, split, invariant_to)
        recipe = system.modality.finetune_recipe
        systems, location = [system], describe_own_task(spec) + (
            f"; fine-tuned with the {recipe} recipe (tasks/{recipe}/recipe.yaml) where no option says otherwise"
            if recipe else "") + _nothing_to_vary(config, system.modality, spec)
        if progress:
            print(f"polymask: {location}", file=sys.stderr)
    else:
        spec = as_task_spec(task)
        config = recipe_settings(spec.benchmark, given)
        systems, location = pretrained_systems([checkpoint], config, [spec]), _data_location(data_dir)
    folder = out or default_out(spec)
    chosen = seed_list(seeds)
    report = run_benchmark(systems, [spec], chosen, folder, f"Fine-tuning on {spec.key}", data_dir,
                           report_settings(config, location), progress, missing_ok=False)
    return report, cell_path(folder, systems[0], spec, chosen[0]).with_suffix("")


def finetune(checkpoint: str | Path, task: str | Path | TaskSpec | None = None, *, data: str | Path | None = None,
             target: str | Sequence[str] | None = None, input_column: str | None = None, kind: TableKind | None = None,
             split: OwnDataSplit | None = None, invariant_to: str | Sequence[str] = (),
             seeds: int | Sequence[int] = (0,), out: str | Path | None = None, data_dir: str | Path | None = None,
             progress: bool = False, **settings: Any) -> Path:
    """Fine-tune ``checkpoint`` (a run or checkpoint folder, or a built-in model's name) on a built-in ``task``
    (``moleculenet/bbbp``, or a task YAML) or on the ``target`` column(s) of your own table ``data`` (.csv, .tsv,
    .jsonl, .parquet; kind inferred from the targets unless given, split 80/10/10: scaffold for SMILES, random
    otherwise; ``invariant_to``: what its labels do not change under, e.g. ``["reverse_complement", "shift"]`` for
    strand-free DNA windows), as ``polymask finetune`` does; ``seeds``: a count or the seeds. Returns the saved model
    of the first seed, which ``polymask.load_model`` opens; the report is ``<out>/results.md``. (A Hugging Face folder
    keeps no fine-tuned model: benchmark it with ``polymask.benchmark``.)"""
    if settings.get("save_model") is False:
        raise ConfigError("polymask.finetune returns the saved model; save_model must stay true")
    path = checkpoint_path(str(checkpoint))
    if is_hf_folder(path):
        raise ConfigError(f"{path} is a Hugging Face folder, which keeps no fine-tuned model for polymask.finetune to "
                          f"return; compare it with polymask.benchmark (or polymask finetune for the report)")
    targets = [target] if isinstance(target, str) else list(target or [])
    invariances = [invariant_to] if isinstance(invariant_to, str) else list(invariant_to)
    _, model = run_finetune(path, str(task) if isinstance(task, Path) else task,
                            Path(data) if data is not None else None, targets, settings, seeds,
                            Path(out) if out is not None else None, Path(data_dir) if data_dir else None, progress,
                            input_column, kind, split, invariances)
    return model


def default_benchmark_out(name: str) -> Path:
    """Where a benchmark writes when no folder is given: ``runs/benchmark-<name>``."""
    return Path("runs") / f"benchmark-{name}"


def run_benchmark_verb(name: str, checkpoints: Sequence[Path], tasks: Sequence[str] | None,
                       seeds: int | Sequence[int], references: bool, out: Path | None, data_dir: Path | None,
                       progress: bool, given: dict[str, Any], finished_only: bool = False) -> Path:
    """The results folder of ``polymask benchmark``'s run: ``given`` settings over the benchmark's recipe
    (``finished_only``: its report from the cells already finished, running none)."""
    if not checkpoints:
        raise ConfigError("no checkpoint to benchmark: give at least one")
    keys = benchmark_tasks(name, list(tasks) if tasks else None)
    config = recipe_settings(name, given)
    systems = pretrained_systems(list(checkpoints), config, keys, untrained=references)
    if references:
        systems += reference_systems(name, systems[0].modality, config)
    folder = out or default_benchmark_out(name)
    run_benchmark(systems, keys, seed_list(seeds), folder, f"{name} benchmark", data_dir,
                  report_settings(config, _data_location(data_dir)), progress, finished_only=finished_only)
    return folder


def benchmark(name: str, checkpoints: Sequence[str | Path], *, tasks: Sequence[str] | None = None,
              seeds: int | Sequence[int] = 3, references: bool = True, out: str | Path | None = None,
              data_dir: str | Path | None = None, progress: bool = False, finished_only: bool = False,
              **settings: Any) -> "pd.DataFrame":
    """Fine-tune every checkpoint on benchmark ``name``'s ``tasks`` (default: its default set; ``["all"]``: every
    task) with ``seeds`` (a count or the seeds), beside the untrained twin and the benchmark's reference rows unless
    ``references`` is off, as ``polymask benchmark`` does. Returns the results table (``<out>/results.csv``: one row
    per system and task, mean, std and per-seed values of the task's metric on its evaluation split).
    ``finished_only``: run no cell, report the finished ones and list the rest under ``unfinished`` in results.json
    (the table's ``seeds`` then counts each row's finished seeds)."""
    import pandas as pd

    folder = run_benchmark_verb(name, [checkpoint_path(str(c)) for c in checkpoints], tasks, seeds, references,
                                Path(out) if out is not None else None, Path(data_dir) if data_dir else None,
                                progress, settings, finished_only)
    return pd.read_csv(folder / "results.csv")


def load_task(task: str | Path | TaskSpec, modality: "str | Modality | None" = None, data_dir: str | Path | None = None,
              tables: Mapping[str, TableSource] | None = None) -> TaskData:
    """A task's examples, read, validated and split as fine-tuning reads them: ``task`` by key (``glue/rte``), YAML
    path or spec; ``modality`` by name or object (default: the spec's, with its default settings); ``tables``
    supplies parts (``train``, ``valid``, ``test``, ``all``) as ``datasets.Dataset`` objects or paths in place of
    the spec's files."""
    from polymask.modalities import MODALITIES

    spec = as_task_spec(str(task) if isinstance(task, Path) else task)
    reader = MODALITIES.get(modality or spec.modality)() if modality is None or isinstance(modality, str) else modality
    return load_task_data(spec, reader, Path(data_dir) if data_dir else None, tables)
