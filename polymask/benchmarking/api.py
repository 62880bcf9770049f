"""The downstream side from Python: fine-tune, benchmark and read tasks as the command line does.

    import polymask
    model = polymask.load_model(polymask.finetune("smiles-mlm-1.7m", task="moleculenet/bbbp"))
    model = polymask.load_model(polymask.finetune("smiles-mlm-1.7m", data="my.csv", target="logS"))
    table = polymask.benchmark("moleculenet", ["smiles-mlm-1.7m"], tasks=["esol", "bbbp"], seeds=3)
    table = polymask.benchmark(checkpoints="smiles-mlm-1.7m", data="my.csv", target="logS")
    task = polymask.load_task("glue/rte", tables={"train": ds["train"], "test": ds["validation"]})

``settings`` are ``FinetuneConfig`` fields (``epochs=5``, ``lr=1e-4``, ``pooling="cls"``, ...); where they are
silent, a benchmark's recipe (``tasks/<benchmark>/recipe.yaml``) and then the defaults hold, as on the command line.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from polymask.benchmarking.constant import MEAN_ROW
from polymask.benchmarking.own_data import default_out, own_data_task, own_table_note
from polymask.benchmarking.runner import cell_path, report_settings, run_benchmark, slug
from polymask.benchmarking.systems import pretrained_systems, read_polymask_checkpoints, reference_systems
from polymask.builtin_models import checkpoint_path
from polymask.checkpoints.pretrained import LoadedCheckpoint
from polymask.errors import ConfigError
from polymask.finetune_config import FinetuneConfig
from polymask.modalities import MODALITIES
from polymask.tasks.data.loading import TableSource, TaskData
from polymask.tasks.data.loading import load_task as load_task_data
from polymask.tasks.data.own_table import OwnTable
from polymask.tasks.data.spec import OwnDataSplit, TableKind, TaskSpec, as_task_spec, chosen_tasks
from polymask.tasks.finetune.hf_folder import is_hf_folder
from polymask.tasks.finetune.recipe import own_table_settings, recipe_settings

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


#: The options that say how a user's table is read (``--target`` ... of finetune and benchmark; ``OwnTable``'s fields).
TABLE_OPTIONS = ("target", "input_column", "kind", "split", "split_column", "invariant_to")


def _names(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """One name or several, as a tuple (none: empty)."""
    return (value,) if isinstance(value, str) else tuple(value or ())


def own_table(data: str | Path | None, options: Mapping[str, Any]) -> OwnTable | None:
    """The user's table ``data`` read as the table ``options`` (``TABLE_OPTIONS`` by name) say, or None without
    ``data``; table options without a table, or a table without a target, are a ``ConfigError``."""
    given = [f"--{name.replace('_', '-')}" for name in TABLE_OPTIONS if options.get(name)]
    if data is None:
        if given:
            raise ConfigError(f"{', '.join(given)}: for your own table (--data); a task spec declares its own "
                              f"columns, kind and split")
        return None
    if not options.get("target"):
        raise ConfigError(f"--data {data} needs --target (target= from Python): the column(s) to predict")
    return OwnTable(Path(data), _names(options["target"]), options.get("input_column"), options.get("kind"),
                    options.get("split"), options.get("split_column"), _names(options.get("invariant_to")))


def _settings_name_tasks_run(config: FinetuneConfig, specs: Sequence[TaskSpec]) -> None:
    """``ConfigError`` for ``task_settings`` naming a task that is not run (of a table or of tasks of no benchmark,
    which no recipe check covers): a misspelt name would change nothing, silently."""
    unknown = sorted(set(config.task_settings) - {spec.name for spec in specs})
    if unknown:
        raise ConfigError(f"task_settings names no task of this run: {', '.join(unknown)} (its tasks: "
                          f"{', '.join(spec.name for spec in specs)})")


def _own_data(table: OwnTable, checkpoints: Sequence[Path], loaded: dict[Path, LoadedCheckpoint],
              given: dict[str, Any], progress: bool) -> tuple[Modality, TaskSpec, FinetuneConfig, str]:
    """``own_data_task`` and the line that says how the table was read (printed with ``progress``)."""
    modality, spec, config = own_data_task(table, checkpoints, loaded, given)
    _settings_name_tasks_run(config, [spec])
    location = own_table_note(spec, modality, config)
    if progress:
        print(f"polymask: {location}", file=sys.stderr)
    return modality, spec, config, location


def run_finetune(checkpoint: Path, task: str | TaskSpec | None, table: OwnTable | None, given: dict[str, Any],
                 seeds: int | Sequence[int], out: Path | None, data_dir: Path | None,
                 progress: bool) -> tuple[Path, Path]:
    """(report, the first seed's model folder) of fine-tuning ``checkpoint`` on ``task`` or on the user's ``table``
    (exactly one of them), ``given`` settings over the recipe; ``polymask finetune``'s path."""
    if (task is None) == (table is None):
        raise ConfigError("give a task or your own table (data and its target columns), not both")
    loaded = None  # pretrained_systems reads it, unless the table's modality needed it first
    if table is not None:
        loaded = read_polymask_checkpoints([checkpoint])
        _, spec, config, location = _own_data(table, [checkpoint], loaded, given, progress)
    else:
        spec = as_task_spec(task)
        config, location = recipe_settings(spec.benchmark, given), _data_location(data_dir)
    systems = pretrained_systems([checkpoint], config, [spec], loaded=loaded)
    folder = out or default_out(spec)
    chosen = seed_list(seeds)
    report = run_benchmark(systems, [spec], chosen, folder, f"Fine-tuning on {spec.key}", data_dir,
                           report_settings(config, location), progress, missing_ok=False)
    return report, cell_path(folder, systems[0], spec, chosen[0]).with_suffix("")


def finetune(checkpoint: str | Path, task: str | Path | TaskSpec | None = None, *, data: str | Path | None = None,
             target: str | Sequence[str] | None = None, input_column: str | None = None, kind: TableKind | None = None,
             split: OwnDataSplit | None = None, split_column: str | None = None, invariant_to: str | Sequence[str] = (),
             seeds: int | Sequence[int] = (0,), out: str | Path | None = None, data_dir: str | Path | None = None,
             progress: bool = False, **settings: Any) -> Path:
    """Fine-tune ``checkpoint`` (a run or checkpoint folder, or a built-in model's name) on a built-in ``task``
    (``moleculenet/bbbp``, or a task YAML) or on the ``target`` column(s) of your own table ``data`` (.csv, .tsv,
    .jsonl, .parquet; kind inferred from the targets unless given, split 80/10/10: scaffold for SMILES, random
    otherwise, or by the train/valid/test words of ``split_column``; ``invariant_to``: what its labels do not change
    under, e.g. ``["reverse_complement", "shift"]`` for strand-free DNA windows), as ``polymask finetune`` does;
    ``seeds``: a count or the seeds. Returns the saved model of the first seed, which ``polymask.load_model`` opens;
    the report is ``<out>/results.md``. (A Hugging Face folder keeps no fine-tuned model: benchmark it with
    ``polymask.benchmark``.)"""
    if settings.get("save_model") is False:
        raise ConfigError("polymask.finetune returns the saved model; save_model must stay true")
    path = checkpoint_path(str(checkpoint))
    if is_hf_folder(path):
        raise ConfigError(f"{path} is a Hugging Face folder, which keeps no fine-tuned model for polymask.finetune to "
                          f"return; compare it with polymask.benchmark (or polymask finetune for the report)")
    table = own_table(data, {"target": target, "input_column": input_column, "kind": kind, "split": split,
                             "split_column": split_column, "invariant_to": invariant_to})
    _, model = run_finetune(path, str(task) if isinstance(task, Path) else task, table, settings, seeds,
                            Path(out) if out is not None else None, Path(data_dir) if data_dir else None, progress)
    return model


def default_benchmark_out(name: str) -> Path:
    """Where a benchmark writes when no folder is given: ``runs/benchmark-<name>``."""
    return Path("runs") / f"benchmark-{name}"


def _tasks_family(specs: Sequence[TaskSpec]) -> str | None:
    """The benchmark whose recipe and reference rows serve tasks of no benchmark named: that of the tasks'
    modality (``Modality.finetune_recipe``), or none for tasks of several modalities."""
    modalities = {spec.modality for spec in specs}
    return MODALITIES.get(modalities.pop()).finetune_recipe if len(modalities) == 1 else None


def run_benchmark_verb(name: str | None, checkpoints: Sequence[Path], tasks: Sequence[str] | None,
                       seeds: int | Sequence[int], references: bool, out: Path | None, data_dir: Path | None,
                       progress: bool, given: dict[str, Any], finished_only: bool = False,
                       table: OwnTable | None = None) -> Path:
    """The results folder of ``polymask benchmark``'s run: benchmark ``name``'s tasks (``tasks``: its task names,
    built-in keys, task YAML files or folders of them), ``given`` settings over its recipe; or, without a name,
    the user's ``table`` or the ``tasks`` alone, with the recipe and reference rows of their modality's benchmark
    and the constant row (``finished_only``: its report from the cells already finished, running none)."""
    if not checkpoints:
        raise ConfigError("no checkpoint to benchmark: give at least one")
    if table is not None:
        if name or tasks:
            raise ConfigError(f"--data {table.path} is benchmarked on its own: leave out the benchmark name and "
                              f"--tasks (run a benchmark's tasks separately)")
        loaded = read_polymask_checkpoints(checkpoints)
        modality, spec, config, location = _own_data(table, checkpoints, loaded, given, progress)
        specs, family, label = [spec], modality.finetune_recipe, spec.key
    else:
        loaded = None  # pretrained_systems reads them
        specs = [as_task_spec(key) for key in chosen_tasks(name, list(tasks) if tasks else None)]
        family = name or _tasks_family(specs)
        config = recipe_settings(name, given) if name else own_table_settings(family, given)
        if not name:
            _settings_name_tasks_run(config, specs)
        location, label = _data_location(data_dir), name or "-".join(dict.fromkeys(spec.benchmark for spec in specs))
    systems = pretrained_systems(list(checkpoints), config, specs, untrained=references, loaded=loaded)
    if references:
        systems += reference_systems(family, systems[0].modality, config, [] if name else [MEAN_ROW], specs)
    folder = out or default_benchmark_out(slug(label))
    run_benchmark(systems, specs, seed_list(seeds), folder, f"{label} benchmark", data_dir,
                  report_settings(config, location), progress, finished_only=finished_only)
    return folder


def benchmark(name: str | None = None, checkpoints: str | Path | Sequence[str | Path] = (), *,
              tasks: Sequence[str | Path] | None = None, data: str | Path | None = None,
              target: str | Sequence[str] | None = None, input_column: str | None = None,
              kind: TableKind | None = None, split: OwnDataSplit | None = None, split_column: str | None = None,
              invariant_to: str | Sequence[str] = (), seeds: int | Sequence[int] = 3, references: bool = True,
              out: str | Path | None = None, data_dir: str | Path | None = None, progress: bool = False,
              finished_only: bool = False, **settings: Any) -> "pd.DataFrame":
    """Fine-tune every checkpoint (one, or a list) on benchmark ``name``'s ``tasks`` (default: its default set;
    ``["all"]``: every task; task YAML files and folders of them too), or without a name on ``tasks`` alone or on
    the ``target`` column(s) of your own table ``data`` (read as ``polymask.finetune`` reads it), with ``seeds``
    (a count or the seeds), beside the untrained twin and the reference rows (the benchmark's; for a table or tasks
    of no benchmark, their modality's classical baseline and the majority class / mean) unless ``references`` is
    off, as ``polymask benchmark`` does. Returns the results table (``<out>/results.csv``: one row per system and
    task, mean, std and per-seed values of the task's metric on its evaluation split).
    ``finished_only``: run no cell, report the finished ones and list the rest under ``unfinished`` in results.json
    (the table's ``seeds`` then counts each row's finished seeds)."""
    import pandas as pd

    table = own_table(data, {"target": target, "input_column": input_column, "kind": kind, "split": split,
                             "split_column": split_column, "invariant_to": invariant_to})
    paths = [checkpoint_path(str(c)) for c in ([checkpoints] if isinstance(checkpoints, (str, Path)) else checkpoints)]
    folder = run_benchmark_verb(name, paths, [str(task) for task in tasks] if tasks else None, seeds, references,
                                Path(out) if out is not None else None, Path(data_dir) if data_dir else None,
                                progress, settings, finished_only, table)
    return pd.read_csv(folder / "results.csv")


def load_task(task: str | Path | TaskSpec, modality: "str | Modality | None" = None, data_dir: str | Path | None = None,
              tables: Mapping[str, TableSource] | None = None) -> TaskData:
    """A task's examples, read, validated and split as fine-tuning reads them: ``task`` by key (``glue/rte``), YAML
    path or spec; ``modality`` by name or object (default: the spec's, with its default settings); ``tables``
    supplies parts (``train``, ``valid``, ``test``, ``all``) as ``datasets.Dataset`` objects or paths in place of
    the spec's files."""
    spec = as_task_spec(str(task) if isinstance(task, Path) else task)
    reader = MODALITIES.get(modality or spec.modality)() if modality is None or isinstance(modality, str) else modality
    return load_task_data(spec, reader, Path(data_dir) if data_dir else None, tables)
