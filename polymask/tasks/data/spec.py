"""Task specs: one YAML file per downstream task under ``tasks/<benchmark>/<name>.yaml``.

A spec declares the data (files, columns), what is predicted (kind, labels), how it is scored
(metric) and split. Code never hard-codes a task; it reads its spec.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

from pydantic import Field, ValidationError, field_validator, model_validator

from polymask.errors import ConfigError
from polymask.registry import did_you_mean
from polymask.resources import builtin_dir
from polymask.schema import StrictModel
from polymask.tasks.data.task_kind import TASK_KINDS, TaskKind
from polymask.yamlio import read_yaml

#: A benchmark's fine-tuning recipe, beside its task specs.
RECIPE_FILE = "recipe.yaml"

#: The kinds a user's own table is read as (``finetune --data FILE --kind``, ``own_task_spec``), from its target
#: values: binary (0/1, or two classes, per column), multiclass (one column of classes), regression (numbers).
#: Every other use of a kind asks the kind object (``TaskSpec.task_kind``; ``task_kind.table_kinds()``).
TableKind = Literal["binary", "multiclass", "regression"]
TABLE_KINDS: tuple[str, ...] = get_args(TableKind)
#: The benchmark name of a task built from a user's own table (``polymask finetune --data``).
OWN_DATA = "own-data"
#: How a user's own table is split (80/10/10): by Bemis-Murcko scaffold (molecules) or at random.
OwnDataSplit = Literal["scaffold", "random"]
OWN_DATA_SPLITS: tuple[str, ...] = get_args(OwnDataSplit)


class SplitSpec(StrictModel):
    """How examples are divided into train / valid / test."""

    method: Literal["scaffold", "random_scaffold", "random", "stratified", "predefined", "column"] = Field(
        description="scaffold (DeepChem Bemis-Murcko, deterministic), random_scaffold (scaffold groups in random "
                    "order), random, stratified (by label), predefined (one file per split), column (each row's "
                    "split named in the column `column`)")
    column: str | None = Field(None, description="with method column: the column that names each row's split "
                                                 "(train, valid or test; also training, validation, val, dev, testing)")
    fractions: tuple[float, float, float] = Field((0.8, 0.1, 0.1), description="train/valid/test fractions")
    seed: int = Field(0, description="seed of random splits (fixed: the same split for every checkpoint)")
    valid_from_train: float | None = Field(
        None, gt=0, lt=1, description="predefined split without a valid file: hold out this fraction of the train "
                                      "file (seeded by seed) as the validation split")

    @field_validator("fractions")
    @classmethod
    def _fractions_of_one(cls, fractions: tuple[float, float, float]) -> tuple[float, float, float]:
        if min(fractions) < 0 or abs(sum(fractions) - 1) > 1e-7:
            raise ValueError(f"the train/valid/test fractions must be at least 0 and add up to 1, not "
                             f"{list(fractions)}")
        return fractions


class TaskSpec(StrictModel):
    """A downstream task."""

    name: str = Field(description="task name, unique within its benchmark")
    benchmark: str = Field(description="benchmark group (moleculenet, glue, dna, ...)")
    modality: str = Field(description="modality the inputs belong to")
    kind: str = Field(description="a registered task kind (polymask.tasks.finetune.kinds): binary (one or more binary "
                                  "tasks), multiclass, regression, span (extractive question answering, SQuAD JSON)")
    files: dict[str, str] = Field(
        description="file per split (train/valid/test) for predefined splits, else {all: file}; looked up in the "
                    "data directory, then in the built-in tasks/<benchmark>/data/ (a .gz twin is accepted)")
    extra_test_files: dict[str, str] = Field(
        default_factory=dict, description="further evaluation sets (name -> file), scored like test at the best "
                                          "validation epoch and reported as <name>_<metric>")
    delimiter: str = Field(",", min_length=1, max_length=1, description="field delimiter of the table files (one "
                                                                        "character)")
    column_names: list[str] | None = Field(
        None, description="names of the columns of header-less files (the first line is then data)")
    quoting: bool = Field(True, description="fields may be quoted as in CSV; false: quote characters are plain text")
    input_columns: list[str] = Field(min_length=1, max_length=2, description="one column, or two for sentence "
                                                                              "pairs")
    label_columns: list[str] | Literal["rest"] = Field(
        description="label columns; 'rest' = every column that is not an input or ignored column")
    ignore_columns: list[str] = Field(default_factory=list, description="columns that are neither input nor label")
    label_values: list[str] | None = Field(
        None, description="string labels in index order (multiclass classes; binary: [negative, positive])")
    other_label: str | None = Field(
        None, description="class (one of label_values) given to every label not listed there: rare classes merged")
    metric: str = Field(description="headline metric (see polymask.tasks.metrics.scoring.METRICS)")
    extra_metrics: list[str] = Field(default_factory=list, description="further metrics reported")
    split: SplitSpec
    evaluated_on: str = Field("test split", description="what the test split is, as stated in reports")
    invariant_to: list[str] = Field(
        default_factory=list, description="input transformations that never change a label, which fine-tuning's "
                                          "augment may then draw (DNA: reverse_complement for a strand-free label, shift for "
                                          "one that does not depend on where in the window a site lies)")
    deduplicate: bool = Field(False, description="drop repeated inputs (and inputs seen with conflicting labels)")
    source: str = Field("", description="where the data comes from")
    in_default_benchmark: bool = Field(True, description="run by `polymask benchmark <benchmark>` without --tasks")

    @property
    def key(self) -> str:
        return f"{self.benchmark}/{self.name}"

    @property
    def task_kind(self) -> type[TaskKind]:
        """The registered kind the spec names."""
        return TASK_KINDS.get(self.kind)

    @field_validator("kind")
    @classmethod
    def _registered_kind(cls, kind: str) -> str:
        TASK_KINDS.get(kind)  # an unknown name lists the registered kinds
        return kind

    @field_validator("metric", "extra_metrics")
    @classmethod
    def _known_metrics(cls, names: str | list[str]) -> str | list[str]:
        from polymask.tasks.metrics.scoring import METRICS  # scipy and sklearn: only once a spec is read

        unknown = next((name for name in ([names] if isinstance(names, str) else names) if name not in METRICS), None)
        if unknown is not None:
            raise ValueError(f"unknown metric '{unknown}';{did_you_mean(unknown, list(METRICS))} choose from: "
                             f"{', '.join(METRICS)}")
        return names

    @model_validator(mode="after")
    def _check(self) -> "TaskSpec":
        if self.split.method == "predefined" and not {"train", "test"} <= set(self.files):
            raise ValueError("a predefined split needs files for train and test (valid optional)")
        if (self.split.method == "column") != (self.split.column is not None):
            raise ValueError("split method column and split.column go together: name the column that says each "
                             "row's split")
        if self.split.method == "column" and self.deduplicate:
            raise ValueError("deduplicate chooses which copy to keep before a split is computed; with split method "
                             "column, remove the duplicates from the file")
        if self.split.column is not None and self.split.column in [*self.input_columns, *self.label_columns]:
            raise ValueError(f"split.column '{self.split.column}' is an input or label column; the split needs a "
                             f"column of its own")
        if self.split.method != "predefined" and set(self.files) != {"all"}:
            raise ValueError(f"split '{self.split.method}' needs exactly one file, given as files: {{all: FILE}}")
        if set(self.extra_test_files) & {"train", "valid", "test", "all"}:
            raise ValueError("extra_test_files need names other than train, valid, test and all")
        if self.other_label is not None and self.other_label not in (self.label_values or []):
            raise ValueError(f"other_label '{self.other_label}' must be one of label_values")
        self._check_invariances()
        return self

    def _check_invariances(self) -> None:
        """Refuse an ``invariant_to`` name the modality does not know (a misspelt one would turn augmentation and
        test-time averaging silently off)."""
        from polymask.modalities import MODALITIES

        if self.modality not in MODALITIES:
            return
        modality = MODALITIES.get(self.modality)
        known = [*modality.task_invariances, *modality.label_free_invariances]
        unknown = [name for name in self.invariant_to if name not in known]
        if unknown:
            raise ValueError(f"invariant_to: {', '.join(map(repr, unknown))} is not a transformation the "
                             f"{self.modality} modality knows ({', '.join(known) or 'none'});"
                             f"{did_you_mean(unknown[0], known)}")


def task_spec_path(key: str) -> Path:
    """``benchmark/name`` -> its YAML file (built-in) or a path to a YAML file."""
    path = Path(key)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return path
    candidate = builtin_dir("tasks") / f"{key}.yaml"
    if not candidate.is_file():
        known = task_names()
        same_name = [k for k in known if k.rsplit("/", 1)[-1] == key.rsplit("/", 1)[-1]]
        hint = f" did you mean {' or '.join(map(repr, same_name))}?" if same_name else did_you_mean(key, known)
        raise ConfigError(f"unknown task '{key}';{hint} built-in tasks: {', '.join(known)}")
    return candidate


def as_task_spec(task: str | TaskSpec) -> TaskSpec:
    """A task given by key or path (loaded), or an in-memory spec (as it is)."""
    return task if isinstance(task, TaskSpec) else load_task_spec(task)


def load_task_spec(key: str) -> TaskSpec:
    """Load and validate a task spec by key (``moleculenet/bbbp``) or path."""
    path = task_spec_path(key)
    try:
        return TaskSpec.model_validate(read_yaml(path, "a task spec"))
    except ValidationError as exc:
        raise ConfigError(f"{path}: invalid task spec:\n  " + "\n  ".join(spec_errors(exc))) from None


def spec_errors(error: ValidationError) -> list[str]:
    """One line per problem of a task spec: where it is and what is wrong, without pydantic's wording."""
    return [": ".join(filter(None, (".".join(map(str, e["loc"])), e["msg"].removeprefix("Value error, "))))
            for e in error.errors()]


def task_names(benchmark: str | None = None, default_only: bool = False) -> list[str]:
    """Keys of the built-in tasks, optionally of one benchmark (and only those it runs by default)."""
    root = builtin_dir("tasks")
    keys = sorted(f"{p.parent.name}/{p.stem}" for p in root.glob("*/*.yaml")
                  if p.name != RECIPE_FILE and (benchmark is None or p.parent.name == benchmark))
    return [key for key in keys if not default_only or load_task_spec(key).in_default_benchmark]


def task_files(name: str) -> list[str] | None:
    """The task YAML files ``name`` points to: itself (a .yaml or .yml path), or those in a folder (a recipe.yaml
    aside); None when it names neither. A missing file, or a folder without one, is a ``ConfigError``."""
    path = Path(name)
    if path.is_dir():
        files = sorted(str(p) for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.name != RECIPE_FILE)
        if not files:
            raise ConfigError(f"{path}: a folder without task YAML files")
        return files
    if path.suffix not in (".yaml", ".yml"):
        return None
    if not path.is_file():
        raise ConfigError(f"task file {path} not found")
    return [name]


def benchmark_tasks(benchmark: str, names: list[str] | None) -> list[str]:
    """Task keys of ``benchmark``: ``names`` (with or without the benchmark prefix) or its default set."""
    available = task_names(benchmark)
    if not available:
        benchmarks = sorted({key.split("/")[0] for key in task_names()})
        raise ConfigError(f"unknown benchmark '{benchmark}';{did_you_mean(benchmark, benchmarks)} "
                          f"benchmarks: {', '.join(benchmarks)}")
    if not names:
        return task_names(benchmark, default_only=True)
    if names == ["all"]:
        return available
    tasks = [t if "/" in t else f"{benchmark}/{t}" for t in names]
    unknown = [t for t in tasks if t not in available]
    if unknown:
        hints = "".join(did_you_mean(t, available) for t in unknown)
        raise ConfigError(f"unknown tasks {unknown};{hints} {benchmark} has: {', '.join(available)}")
    return tasks


def chosen_tasks(benchmark: str | None, names: list[str] | None) -> list[str]:
    """The tasks ``polymask benchmark`` runs, as keys and YAML paths: those of ``benchmark`` (``benchmark_tasks``),
    among which task YAML files and folders of them may stand; without a benchmark, built-in keys (``glue/rte``)
    and task YAML files."""
    if not names:
        if benchmark is None:
            raise ConfigError("name a benchmark (moleculenet, glue, dna, ...), or give --tasks (task YAML files, "
                              "folders of them, built-in keys such as glue/rte) or --data FILE --target COLUMN")
        return benchmark_tasks(benchmark, None)
    known = task_names(benchmark)
    tasks: list[str] = []
    for name in names:
        key = f"{benchmark}/{name}" if benchmark is not None and "/" not in name else name
        files = None if key in known else task_files(name)
        if files is not None:
            tasks += files
        elif benchmark is not None:
            tasks += benchmark_tasks(benchmark, [name])
        else:
            task_spec_path(name)  # an unknown key is one line naming the built-in tasks
            tasks.append(name)
    return tasks
