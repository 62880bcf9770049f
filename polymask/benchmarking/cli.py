"""``polymask finetune`` and ``polymask benchmark``: argument parsing and wiring."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from polymask.builtin_models import checkpoint_path
from polymask.cli_options import add_model_options, add_plugin_option, given_fields
from polymask.finetune_config import FinetuneConfig
from polymask.tasks.data.spec import OWN_DATA_SPLITS, TABLE_KINDS, benchmark_tasks

if TYPE_CHECKING:
    from polymask.tasks.data.own_table import OwnTable

# the FinetuneConfig fields with an option of their own (every other one through --set); where an option is left
# out, a benchmark's recipe stands in before the field's default
FINETUNE_OPTIONS = ("lr", "epochs", "patience", "batch_size", "pooling", "freeze_encoder", "augment",
                    "test_time_average", "max_train_examples", "max_valid_examples", "max_test_examples", "max_len",
                    "save_model")
RECIPE_STANDS_IN = " or the benchmark's recipe (tasks/<benchmark>/recipe.yaml)"


def add_data_dir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", type=Path,
                        help="folder with task files (default $POLYMASK_DATA_DIR, then built-in)")


def add_finetune_options(parser: argparse.ArgumentParser, out_default: str) -> None:
    add_data_dir_option(parser)
    parser.add_argument("--out", type=Path, help=f"output folder (default: {out_default})")
    add_model_options(parser, FinetuneConfig, FINETUNE_OPTIONS, stand_in=RECIPE_STANDS_IN,
                      flags={"freeze_encoder": "freeze", "save_model": "save-models"})
    parser.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="any other FinetuneConfig field, e.g. dropout=0.2 (repeatable; default: none)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def given_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The fine-tuning fields the command line sets (``recipe_settings`` puts them over the recipe and defaults)."""
    from polymask.config import apply_override

    raw = given_fields(args, FinetuneConfig)
    for assignment in args.set or []:
        apply_override(raw, assignment)
    return raw


def add_table_options(parser: argparse.ArgumentParser, data_into: Any, alternatives: str) -> None:
    """``--data FILE`` (added to ``data_into``: the parser or a group of it) and the options that say how the table
    is read, as finetune and benchmark take them."""
    data_into.add_argument("--data", type=Path, metavar="FILE",
                           help=f"your own table: .csv, .tsv, .jsonl or .parquet (optionally .gz), an input column and "
                                f"the --target columns (default: none; give {alternatives})")
    # extend: --target a --target b predicts both (argparse's default would keep only the last)
    parser.add_argument("--target", nargs="+", action="extend", metavar="COLUMN",
                        help="with --data: the column(s) to predict (repeatable; default: none; required with --data)")
    parser.add_argument("--input-column", metavar="COLUMN",
                        help="with --data: the column of inputs (default: the checkpoint modality's usual names, "
                             "e.g. smiles, SMILES, sequence, text)")
    parser.add_argument("--kind", choices=TABLE_KINDS,
                        help="with --data: the task (default: inferred from the targets: 0/1 or two values in all: "
                             "binary, one task per column, the class that reads as 'no' negative; more numbers: "
                             "regression; more text classes: multiclass)")
    parser.add_argument("--split", choices=OWN_DATA_SPLITS,
                        help="with --data: 80/10/10 by scaffold (Bemis-Murcko, DeepChem's) or at random (default: "
                             "scaffold for SMILES, random otherwise)")
    parser.add_argument("--split-column", metavar="COLUMN",
                        help="with --data: the column that names each row's split, train, valid or test (also "
                             "training, validation, val, dev; default: none, --split splits)")
    parser.add_argument("--invariant-to", nargs="+", action="extend", metavar="TRANSFORMATION",
                        help="with --data: what the labels do not change under, which augmentation and test-time "
                             "averaging may vary (DNA: reverse_complement, shift; default: none, a label with a "
                             "strand and a position)")


def table_of(args: argparse.Namespace) -> "OwnTable | None":
    """The user's table the command line gives (``--data`` and its options), or None."""
    from polymask.benchmarking.api import TABLE_OPTIONS, own_table

    return own_table(args.data, {name: getattr(args, name) for name in TABLE_OPTIONS})


def cmd_finetune(args: argparse.Namespace) -> int:
    from polymask.benchmarking.api import run_finetune

    report, _ = run_finetune(args.checkpoint, args.task, table_of(args), given_settings(args), args.seeds, args.out,
                             args.data_dir, not args.quiet)
    print(report.read_text())
    return 0


def cmd_benchmark(args: argparse.Namespace) -> int:
    from polymask.benchmarking.api import run_benchmark_verb

    folder = run_benchmark_verb(args.benchmark, args.checkpoint, args.tasks, args.seeds, not args.no_references,
                                args.out, args.data_dir, not args.quiet, given_settings(args), args.finished_only,
                                table_of(args))
    print((folder / "results.md").read_text())
    return 0


def cmd_heldout(args: argparse.Namespace) -> int:
    from polymask.tasks.data.heldout import write_heldout

    tasks = benchmark_tasks(args.benchmark, args.tasks)
    summary = write_heldout(tasks, args.splits, args.out, args.data_dir)
    total = sum(summary["records"].values())
    print(f"wrote {len(summary['records'])} files ({total:,} records) to {args.out}; keep them out of a pretraining "
          f"corpus with --set 'data.exclude=[{args.out}]'")
    return 0


def cmd_task_corpus(args: argparse.Namespace) -> int:
    from polymask.tasks.data.task_corpus import CORPUS_FILE, write_task_corpus

    tasks = benchmark_tasks(args.benchmark, args.tasks)
    summary = write_task_corpus(args.benchmark, tasks, args.out, args.data_dir)
    print(f"wrote {summary['records']:,} unique training inputs ({summary['characters']:,} characters) of "
          f"{len(tasks)} tasks to {args.out / CORPUS_FILE}, none of them a validation or test input of "
          f"{len(summary['held_out_from'])} {args.benchmark} tasks ({summary['held_out_inputs']:,} held out); "
          f"counts in {args.out / 'corpus.json'}")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    finetune = sub.add_parser("finetune", help="fine-tune a pretrained encoder on one task or on your own table")
    source = finetune.add_mutually_exclusive_group(required=True)
    source.add_argument("--task", help="task key, e.g. moleculenet/bbbp (see tasks/), or a task YAML file "
                                       "(default: none; give --task or --data)")
    add_table_options(finetune, source, "--task or --data")
    finetune.add_argument("--checkpoint", type=checkpoint_path, required=True,
                          help="run or checkpoint folder, a built-in model's name (polymask models), or a local "
                               "Hugging Face model folder (docs/export.md)")
    finetune.add_argument("--seeds", type=int, nargs="+", default=[0], help="fine-tuning seeds (e.g. 0 1 2)")
    add_finetune_options(finetune, "runs/finetune-<task>")
    add_plugin_option(finetune, "custom modalities and task kinds")
    finetune.set_defaults(handler=cmd_finetune)

    benchmark = sub.add_parser("benchmark", help="fine-tune checkpoints on a benchmark's tasks, with references")
    benchmark.add_argument("benchmark", nargs="?",
                           help="benchmark name: a folder of tasks/ (moleculenet, ...); leave it out for --data, or "
                                "for --tasks of YAML files or built-in keys")
    benchmark.add_argument("--checkpoint", type=checkpoint_path, action="append", required=True,
                           help="run or checkpoint folder, a built-in model's name, or a local Hugging Face model "
                                "folder (repeat; docs/export.md)")
    benchmark.add_argument("--tasks", nargs="+",
                           help="task names of the benchmark, or 'all'; task YAML files or folders of them; without a "
                                "benchmark name, built-in keys such as glue/rte (default: the benchmark's default set)")
    add_table_options(benchmark, benchmark, "a benchmark name, --tasks or --data")
    benchmark.add_argument("--seeds", type=int, default=3, help="number of fine-tuning seeds (0..N-1)")
    benchmark.add_argument("--no-references", action="store_true",
                           help="skip the untrained row (the first polymask checkpoint's architecture, else the first "
                                "Hugging Face folder's, randomly initialised) and the reference rows (the benchmark's; "
                                "for --data or tasks of no benchmark: their modality's classical baseline and the "
                                "majority class / mean)")
    benchmark.add_argument("--finished-only", action="store_true",
                           help="run no cell: write the report from the cells already finished in --out and list the "
                                "rest (where a benchmark that spans sessions, or runs in another process, stands); "
                                "the tasks' data is read, to check each cell was run the same way")
    add_finetune_options(benchmark, "runs/benchmark-<benchmark>, with --data runs/benchmark-own-data-<file>-<target>")
    add_plugin_option(benchmark, "custom modalities and task kinds")
    benchmark.set_defaults(handler=cmd_benchmark)

    heldout = sub.add_parser(
        "benchmark-heldout", help="write a benchmark's validation and test inputs, to keep out of a pretraining corpus",
        description="Write the normalised inputs of a benchmark's validation and test splits (the split the benchmark "
                    "uses), one file per task and split, for data.exclude of a pretraining run.")
    heldout.add_argument("benchmark", help="benchmark name: a folder of tasks/ (moleculenet, ...)")
    heldout.add_argument("--tasks", nargs="+", help="task names (default: the benchmark's default set)")
    heldout.add_argument("--splits", nargs="+", choices=["train", "valid", "test"], default=["valid", "test"],
                         help="splits to write")
    add_data_dir_option(heldout)
    heldout.add_argument("--out", type=Path, required=True, help="folder for the files")
    heldout.set_defaults(handler=cmd_heldout)

    corpus = sub.add_parser(
        "benchmark-corpus", help="write a benchmark's unlabeled training inputs as a pretraining corpus",
        description="Write the training inputs of a benchmark's tasks, deduplicated, as one pretraining corpus file "
                    "(corpus.txt), leaving out every validation and test input of the benchmark's tasks on hand; "
                    "counts per task in corpus.json.")
    corpus.add_argument("benchmark", help="benchmark name: a folder of tasks/ (dna, ...)")
    corpus.add_argument("--tasks", nargs="+", help="task names, or 'all' (default: the benchmark's default set)")
    add_data_dir_option(corpus)
    corpus.add_argument("--out", type=Path, required=True, help="folder for corpus.txt and corpus.json")
    corpus.set_defaults(handler=cmd_task_corpus)
