"""The ``polymask compare`` pipeline: pretrain every objective under one budget, benchmark every
checkpoint on the modality's benchmarks, run the rank and semantics analyses, write one report.
Every piece is reused on a rerun (finished runs, benchmark cells, analysis outputs)."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from polymask.benchmarking.runner import run_benchmark
from polymask.benchmarking.systems import checkpoint_system, reference_systems, untrained_system
from polymask.checkpoints.pretrained import read_checkpoint, resolve_checkpoint
from polymask.compare.budget import Budget
from polymask.compare.pretrain import pretrain, run_config
from polymask.compare.report import write_compare_report
from polymask.compare.variants import Variant, as_variant, check_labels
from polymask.data.corpus import prepare_corpus
from polymask.config import RunConfig
from polymask.errors import ConfigError, RunBusy, one_line
from polymask.finetune_config import FinetuneConfig
from polymask.jsonio import make_dir, write_text
from polymask.modalities import build_modality
from polymask.tasks.data.spec import benchmark_tasks, load_task_spec, task_names
from polymask.tasks.finetune.recipe import recipe_settings


def benchmarks_for(modality: str) -> list[str]:
    """Benchmarks whose built-in tasks take inputs of ``modality``."""
    found = []
    for key in task_names():
        benchmark = key.split("/")[0]
        if benchmark not in found and load_task_spec(key).modality == modality:
            found.append(benchmark)
    return found


def export_heldout(run_dir: Path, out: Path) -> Path:
    """The first run's validation split (records never trained on), decoded to one record per line."""
    path = out / "heldout.txt"
    if path.is_file():
        return path
    checkpoint = read_checkpoint(run_dir)
    config = checkpoint.run_config
    modality = build_modality(config.modality)
    data = config.data
    corpus = prepare_corpus(modality, checkpoint.tokenizer, data.corpus_paths() or modality.corpus_paths(), column=data.column,
                            max_len=data.max_len, val_fraction=data.val_fraction, max_val_records=data.max_val_records,
                            seed=config.train.seed, cache_dir=data.resolved_cache_dir(), strict=False,
                            exclude=data.exclude)
    lines = [modality.decode(checkpoint.tokenizer, corpus.valid[i].tolist()).replace("\n", " ")
             for i in range(len(corpus.valid))]
    write_text(path, "".join(line + "\n" for line in lines if line.strip()))
    return path


def _analyses(run_dirs: list[Path], heldout: Path, out: Path) -> dict[str, Any]:
    from polymask.analysis.rank import run_rank_analysis
    from polymask.analysis.semantics import run_semantics

    measured = [str(resolve_checkpoint(run_dir)) for run_dir in run_dirs]
    results: dict[str, Any] = {}
    for name, analyse in (("rank", run_rank_analysis), ("semantics", run_semantics)):
        path = out / name / f"{name}.json"
        kept = json.loads(path.read_text()) if path.is_file() else {}
        if [result.get("checkpoint") for result in kept.get("results", [])] != measured:  # other runs, or new steps
            analyse(run_dirs, [heldout], out / name)
            kept = json.loads(path.read_text())
        results[name] = kept
    return results


def compare_tasks(modality: str, tasks: list[str] | None) -> dict[str, list[str]]:
    """Task keys per benchmark of ``modality``: its default sets, every task (``all``), or the ``tasks`` named,
    with their benchmark (``dna/tf_0``) or without it where one benchmark has that name (``tf_0``)."""
    benchmarks = benchmarks_for(modality)
    if tasks and not benchmarks:
        raise ConfigError(f"--tasks: no built-in benchmark takes {modality} records")
    if not tasks or tasks == ["all"]:
        return {benchmark: task_names(benchmark, default_only=not tasks) for benchmark in benchmarks}
    chosen: dict[str, list[str]] = {benchmark: [] for benchmark in benchmarks}
    for name in tasks:
        owners = [name.split("/")[0]] if "/" in name else \
            [benchmark for benchmark in benchmarks if f"{benchmark}/{name}" in task_names(benchmark)]
        if len(owners) != 1 or owners[0] not in chosen:
            where = "none of" if not owners or owners[0] not in chosen else "more than one of"
            raise ConfigError(f"task '{name}' is in {where} the {modality} benchmarks ({', '.join(benchmarks)}); "
                              f"name it as <benchmark>/<task>")
        chosen[owners[0]] += [key for key in benchmark_tasks(owners[0], [name]) if key not in chosen[owners[0]]]
    return chosen


def check_objectives(objectives: list[str]) -> None:
    """Refuse, in one line, an objective whose runs compare cannot analyse: the semantics analysis needs its
    prediction at masked positions (``Objective.masked_log_probs``)."""
    from polymask.objectives import OBJECTIVES

    unable = [name for name in objectives if not OBJECTIVES.get(name).predicts_masked_tokens()]
    if unable:
        raise ConfigError(f"polymask compare cannot analyse objective(s) {', '.join(unable)}: they do not predict "
                          "masked tokens (Objective.masked_log_probs), which the semantics analysis needs")


def compare_settings(benchmark: str, given: dict[str, Any]) -> FinetuneConfig:
    """The fine-tuning settings of ``benchmark``'s rows: the ``given`` fields over its recipe, as ``polymask
    benchmark`` has them, but without test-time averaging: compare ranks the encoders' own predictions."""
    settings = recipe_settings(benchmark, {"test_time_average": False, **given})
    if settings.extra_features or settings.test_time_average:  # each would add rows the verdicts do not read
        raise ConfigError("compare ranks objectives by their encoders alone: leave out extra_features and "
                          "test_time_average (polymask benchmark reports them as rows of their own)")
    return settings


def variant_config(base: dict[str, Any], variant: Variant, seed: int, out: Path) -> RunConfig:
    """The run config of ``variant``, checked before anything is pretrained: a wrong option is one line naming it,
    and so is one that only its model would refuse (``trial_step``)."""
    try:
        config = run_config(base, variant, seed, out / "pretrain" / f"{variant.label}-seed{seed}")
        trial_step(config)
    except (ConfigError, ValueError, RuntimeError) as exc:
        named = variant.label if variant.label == variant.describe() else f"{variant.label} = {variant.describe()}"
        raise ConfigError(f"--objectives {named}: {one_line(exc)}") from None
    return config


def trial_step(config: RunConfig, vocab_size: int = 64) -> None:
    """Build the run's objective around its encoder (on a small stand-in vocabulary) and take one loss on two
    sequences of ``data.max_len`` tokens: an option that fails only when its model is built or first run (a decoder
    position table shorter than the sequences, heads that do not divide the width) fails here, in seconds, and
    not hours into a comparison when that run's turn comes."""
    import torch

    from polymask.data.batching import collate
    from polymask.model.encoder import Encoder
    from polymask.objectives import build_objective
    from polymask.tokenization import SpecialIds

    specials = SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4)
    objective = build_objective(config.objective, Encoder(config.model, vocab_size), specials)
    generator = torch.Generator().manual_seed(0)
    body = torch.randint(5, vocab_size, (2, config.data.max_len - 2), generator=generator).tolist()
    with torch.no_grad():
        objective(collate([[specials.cls, *row, specials.sep] for row in body], specials.pad), generator)


def pretrain_all(base: dict[str, Any], plan: list[tuple[Variant, int]], budget: Budget,
                 out: Path) -> list[dict[str, Any]]:
    """Every (variant, seed) run of ``plan``, in its order. A run another ``polymask compare`` on the same --out is
    pretraining is passed over at first and waited for at the end, so that two invocations (one core each) share
    the runs between them."""
    done: dict[int, dict[str, Any]] = {}
    for wait in (False, True):
        for index, (variant, seed) in enumerate(plan):
            if index not in done:
                try:
                    done[index] = pretrain(base, variant, seed, budget, out, wait=wait)
                except RunBusy:
                    continue
    return [done[index] for index in range(len(plan))]


def run_compare(modality: str, variants: list[Variant | str], budget: Budget, out: Path, base: dict[str, Any],
                seeds: list[int], benchmark_seeds: int, tasks: list[str] | None, finetune: dict[str, Any],
                data_dir: Path | None = None, references: bool = True) -> Path:
    """Run everything; ``variants``: the objectives (or settings of one) compared, the first the baseline unless
    MLM is among them; ``finetune`` holds the fine-tuning fields given (each benchmark's recipe fills the rest);
    ``references``: also the untrained encoder and the field's classical baselines (rows the verdicts do not read).
    Returns the path of ``report.md``."""
    variants = [as_variant(variant) for variant in variants]
    check_objectives([variant.objective for variant in variants])
    check_labels(variants)
    keys_of = compare_tasks(modality, tasks)
    settings = {benchmark: compare_settings(benchmark, finetune) for benchmark, keys in keys_of.items() if keys}
    for benchmark, chosen in settings.items():  # before pretraining: what a task kind cannot do is one line now
        for key in keys_of[benchmark]:
            spec = load_task_spec(key)
            spec.task_kind.refuse_settings(chosen.for_task(spec.name), key)
    base = {**base, "modality": base.get("modality") or {"name": modality}}
    data = [variant_config(base, variant, seeds[0], out) for variant in variants][0].data
    if data.val_fraction == 0 or data.max_val_records == 0:  # the analyses and the collapse alarm read it
        raise ConfigError("compare needs a validation split of the pretraining corpus: data.val_fraction and "
                          "data.max_val_records must be above 0")
    data.corpus_paths()  # a missing corpus file is one line before any run starts
    started = time.perf_counter()
    make_dir(out)
    runs = pretrain_all(base, [(variant, seed) for variant in variants for seed in seeds], budget, out)
    run_dirs = [Path(run["run_dir"]) for run in runs]
    benchmark_reports = {}
    for benchmark, chosen in settings.items():
        keys = keys_of[benchmark]
        loaded = [read_checkpoint(path) for path in run_dirs]  # each run read once, for its row and the untrained one
        systems = [checkpoint_system(path, chosen, checkpoint) for path, checkpoint in zip(run_dirs, loaded)]
        if references:
            systems += [untrained_system(run_dirs[0], chosen, loaded[0])] + reference_systems(benchmark, systems[0].modality,
                                                                                     chosen)
        report = run_benchmark(systems, keys, list(range(benchmark_seeds)), out / f"benchmark-{benchmark}",
                               f"{benchmark} benchmark ({budget.describe()})", data_dir,
                               {"fine-tuning": chosen.model_dump(), "pretraining budget": budget.describe()},
                               progress=False)
        benchmark_reports[benchmark] = report.parent
    analyses = _analyses(run_dirs, export_heldout(run_dirs[0], out), out)
    return write_compare_report(out, modality, budget, runs, benchmark_reports, analyses,
                                time.perf_counter() - started)
