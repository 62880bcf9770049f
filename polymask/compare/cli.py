"""``polymask compare``: argument parsing and wiring."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from polymask.benchmarking.cli import RECIPE_STANDS_IN, add_data_dir_option
from polymask.cli_options import add_model_options, add_plugin_option, given_fields
from polymask.finetune_config import FinetuneConfig


def cmd_compare(args: argparse.Namespace) -> int:
    from polymask.compare.budget import parse_budget
    from polymask.config import apply_override, check_run_fields, load_yaml

    from polymask.compare.variants import parse_variants

    variants = parse_variants(args.objectives)
    check_counts(args.seeds, args.benchmark_seeds)
    base: dict[str, Any] = load_yaml(args.config) if args.config else {}
    for assignment in args.set or []:
        apply_override(base, assignment)
    if args.data:
        check_sections({"data": base.get("data", {})})
        base.setdefault("data", {})["paths"] = [str(p) for p in args.data]
    if isinstance(base.get("modality"), str):
        base["modality"] = {"name": base["modality"]}
    check_sections(base)
    base.setdefault("modality", {})["name"] = args.modality
    check_run_fields(base)  # before torch is imported: a wrong field fails at once
    finetune = given_fields(args, FinetuneConfig)
    for assignment in args.finetune_set or []:
        apply_override(finetune, assignment)
    budget = parse_budget(args.budget)
    from polymask.compare.run import run_compare
    from polymask.objectives import OBJECTIVES

    for variant in variants:
        OBJECTIVES.get(variant.objective)
    report = run_compare(args.modality, variants, budget, args.out, base, args.seeds,
                         args.benchmark_seeds, args.tasks, finetune, args.data_dir, not args.no_references)
    print(f"report: {report}")
    return 0


def check_counts(seeds: list[int], benchmark_seeds: int) -> None:
    """One line, before anything is pretrained, for seeds that leave nothing to compare (``parse_variants`` checks
    the objectives)."""
    from polymask.errors import ConfigError

    if len(set(seeds)) < len(seeds):
        raise ConfigError(f"--seeds repeats a value ({' '.join(map(str, seeds))}): each run is pretrained once")
    if benchmark_seeds < 1:
        raise ConfigError(f"--benchmark-seeds must be at least 1 (2 or more for a verdict), got {benchmark_seeds}")


def check_sections(base: dict[str, Any]) -> None:
    """One line for a section compare edits before the config is validated (``check_run_fields`` checks the others)
    that is not a mapping (``--set objective=null``); the modality and the objective may also be given by name."""
    from polymask.errors import ConfigError

    for key in ("modality", "objective", "data"):
        value = base.get(key, {})
        if not (isinstance(value, dict) or key != "data" and isinstance(value, str)):
            raise ConfigError(f"{key}: expected a mapping of settings{'' if key == 'data' else ' or a name'}, "
                              f"got {value!r}")


def add_commands(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("compare", help="equal-budget objective comparison: pretrain, benchmark, analyse, report")
    parser.add_argument("--modality", required=True, help="smiles, dna, text or a registered modality")
    parser.add_argument("--objectives", nargs="+", default=["mlm,maelm,exlm"],
                        help="objectives (mlm,maelm,exlm) or variants of one, each [LABEL=]OBJECTIVE:KEY=VALUE,... "
                             "(mlm100=mlm:mask_prob=1.0,random_prob=0); the first, or mlm, is the baseline")
    parser.add_argument("--budget", required=True, help="per run: a time (30m, 1.5h), N-steps, or N-tokens (5M-tokens)")
    parser.add_argument("--out", type=Path, required=True, help="report folder (reruns reuse what is finished there)")
    parser.add_argument("--config", help="base pretraining recipe (path or built-in name; default: none)")
    parser.add_argument("--data", nargs="+", type=Path, help="pretraining corpus (default: the built-in one)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="pretraining config override (repeatable; default: none)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="pretraining seeds")
    parser.add_argument("--benchmark-seeds", type=int, default=3, help="fine-tuning seeds per task")
    parser.add_argument("--tasks", nargs="+", help="tasks, as dna/tf_0 or tf_0, or all (default: each benchmark's "
                                                   "default set)")
    parser.add_argument("--no-references", action="store_true",
                        help="leave out the untrained encoder and the classical baselines (the verdicts compare "
                             "objectives only; polymask benchmark gives those rows)")
    add_data_dir_option(parser)
    finetune = parser.add_argument_group("fine-tuning, the same for every pretrained run")
    add_model_options(finetune, FinetuneConfig, ["epochs", "lr", "patience", "max_train_examples"],
                      stand_in=RECIPE_STANDS_IN)
    finetune.add_argument("--finetune-set", action="append", metavar="KEY=VALUE",
                          help="any other FinetuneConfig field (repeatable; default: none)")
    add_plugin_option(parser, "custom modalities and objectives")
    parser.set_defaults(handler=cmd_compare)
