"""A benchmark's fine-tuning recipe: the settings ``tasks/<benchmark>/recipe.yaml`` declares, beside its task specs."""
from __future__ import annotations

from typing import Any

from polymask.config import merge
from polymask.errors import ConfigError
from polymask.finetune_config import FinetuneConfig, finetune_settings
from polymask.resources import builtin_dir
from polymask.tasks.data.spec import RECIPE_FILE, task_names
from polymask.yamlio import read_yaml


def benchmark_recipe(benchmark: str) -> dict[str, Any]:
    """The fine-tuning settings ``tasks/<benchmark>/recipe.yaml`` declares (chosen on validation for that
    benchmark), to stand where the command line is silent; {} when the benchmark has none."""
    path = builtin_dir("tasks") / benchmark / RECIPE_FILE
    if not path.is_file():
        return {}
    recipe = read_yaml(path, "a benchmark recipe").get("finetune", {})
    unknown = sorted(set(recipe) - set(FinetuneConfig.model_fields))
    if unknown:
        raise ConfigError(f"{path}: unknown fine-tuning settings {unknown}")
    return dict(recipe)


def recipe_settings(benchmark: str | None, given: dict[str, Any]) -> FinetuneConfig:
    """The fine-tuning settings of a run: ``given`` fields over ``benchmark``'s recipe over the defaults. A given
    field holds for every task (it clears the recipe's per-task values of that field, leaf by leaf), unless
    ``given`` sets it per task too; a given per-task setting must name a task of ``benchmark``."""
    raw = benchmark_recipe(benchmark) if benchmark else {}
    if benchmark:
        unknown = sorted(set(given.get("task_settings") or {}) - {key.split("/")[-1] for key in task_names(benchmark)})
        if unknown:
            raise ConfigError(f"task_settings names no task of {benchmark}: {', '.join(unknown)} (its tasks: "
                              f"{', '.join(key.split('/')[-1] for key in task_names(benchmark))})")
    global_fields = {key: value for key, value in given.items() if key != "task_settings"}
    per_task = raw.get("task_settings", {})
    for name in list(per_task):
        _clear(per_task[name], global_fields)
        if not per_task[name]:  # the given fields replaced all of it (a report should not list it as a setting)
            del per_task[name]
    return finetune_settings(merge(raw, given))  # nested fields (task_settings, span) merge key by key


def own_table_settings(benchmark: str | None, given: dict[str, Any]) -> FinetuneConfig:
    """The fine-tuning settings of a user's own table: ``given`` over ``benchmark``'s recipe without its per-task
    settings (they name that benchmark's tasks) over the defaults."""
    recipe = {key: value for key, value in (benchmark_recipe(benchmark) if benchmark else {}).items()
              if key != "task_settings"}
    return finetune_settings(merge(recipe, given))


def _clear(settings: dict[str, Any], given: dict[str, Any]) -> None:
    """Remove from ``settings`` each leaf that ``given`` sets (a nested dict keeps its other keys)."""
    for key, value in given.items():
        if isinstance(value, dict) and isinstance(settings.get(key), dict):
            _clear(settings[key], value)
            if not settings[key]:
                del settings[key]
        else:
            settings.pop(key, None)
