"""The ``polymask`` command line: ``polymask <verb> ...``."""
from __future__ import annotations

import argparse
import atexit
import difflib
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Callable, NoReturn

from polymask.builtin_models import checkpoint_path
from polymask.cli_options import add_model_options, add_plugin_option, settings_from
from polymask.config import DataConfig, TrainConfig
from polymask.encoder_config import EncoderConfig
from polymask.errors import ConfigError, PolymaskError, RankLost
from polymask.jsonio import dumps
from polymask.plugins import load_plugins
from polymask.registry import UnknownNameError, did_you_mean


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Appends "(default: X)" to every option that has a default and does not already say it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if default is None or default is False or default is argparse.SUPPRESS or "default" in text \
                or not action.option_strings:
            return text
        shown = " ".join(map(str, default)) if isinstance(default, (list, tuple)) else "%(default)s"
        return f"{text} (default: {shown})"


class Parser(argparse.ArgumentParser):
    """The top-level parser: help shows defaults, a mistyped choice gets the closest ones suggested."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)

    def add_subparsers(self, **kwargs: Any) -> argparse._SubParsersAction:
        kwargs.setdefault("parser_class", VerbParser)
        return super().add_subparsers(**kwargs)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """argparse's check of a value against ``choices`` (verbs included), with "did you mean"."""
        if action.choices is not None and value not in action.choices:
            choices = [str(choice) for choice in action.choices]
            hint = did_you_mean(str(value), choices)
            raise argparse.ArgumentError(action, f"invalid choice: {value!r};{hint} choose from: {', '.join(choices)}")


class VerbParser(Parser):
    """The parser of a verb: an unknown option is refused here, with this verb's usage and the closest
    options suggested (argparse would hand it up to the top-level parser, whose usage says nothing of it)."""

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> tuple[argparse.Namespace, list[str]]:
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}{self._option_hint(extras)}")
        return namespace, extras

    def _option_hint(self, extras: list[str]) -> str:
        """A "did you mean '--x'?" for each unknown option close to one of this verb's (compared without the
        dashes, which every option shares)."""
        options = {option.lstrip("-"): option for action in self._actions for option in action.option_strings}
        hints = []
        for word in (extra.split("=", 1)[0] for extra in extras if extra.startswith("-")):
            close = difflib.get_close_matches(word.lstrip("-"), list(options), n=3, cutoff=0.6)
            hints.append(did_you_mean(word, [options[name] for name in close]))
        return "".join(f";{hint}" for hint in hints if hint)


def _run_config_dict(args: argparse.Namespace) -> dict[str, Any]:
    from polymask.config import apply_override, load_yaml, merge

    raw: dict[str, Any] = load_yaml(args.config) if args.config else {}
    cli: dict[str, Any] = {}
    if args.modality:
        cli["modality"] = {"name": args.modality}
    if args.objective:
        cli["objective"] = {"name": args.objective}
    for key in ("modality", "objective"):
        if isinstance(raw.get(key), str):
            raw[key] = {"name": raw[key]}
    raw = merge(raw, cli)
    if args.data:
        raw.setdefault("data", {})["paths"] = [str(p) for p in args.data]
    if args.column:
        raw.setdefault("data", {})["column"] = args.column
    if args.strict:
        raw.setdefault("data", {})["strict"] = True
    if args.out:
        raw["out"] = str(args.out)
    for assignment in args.set or []:
        apply_override(raw, assignment)
    return raw


def cmd_train(args: argparse.Namespace) -> int:
    from polymask.config import build_run_config

    auto = args.resume == "auto"
    if args.resume and args.overwrite:
        raise ConfigError("--resume and --overwrite contradict each other: choose one")
    if args.resume and not auto and not (args.config or args.modality or args.objective or args.set):
        from polymask.training.trainer import train

        train(resume=args.resume)
        return 0
    raw = _run_config_dict(args)
    resume: Any = args.resume
    if args.resume and not auto:
        from polymask.checkpoints.pretrained import read_checkpoint
        from polymask.config import merge

        resume = read_checkpoint(args.resume)  # read and checked once; the trainer continues from this object
        raw = merge(resume.run_config.model_dump(mode="json"), raw)
    config = build_run_config(raw)  # first, so that a wrong field fails before torch is imported
    from polymask.training.trainer import train

    train(config, resume=resume, overwrite=args.overwrite)
    return 0


def cmd_tokenizer_train(args: argparse.Namespace) -> int:
    from polymask.config import apply_override
    from polymask.data.readers import read_records
    from polymask.data.records import normalize_record
    from polymask.errors import InvalidRecord
    from polymask.modalities import MODALITIES
    from polymask.schema import validated
    from polymask.tokenization import save_tokenizer

    modality_cls = MODALITIES.get(args.modality)
    raw: dict[str, Any] = {"name": args.modality}
    for assignment in args.option or []:
        apply_override(raw, assignment)
    if args.vocab_size is not None and "vocab_size" in modality_cls.Config.model_fields:
        raw["vocab_size"] = args.vocab_size  # checked as the option is (text: at least 300)
    elif args.vocab_size is not None and args.vocab_size < 1:
        raise ConfigError(f"--vocab-size {args.vocab_size}: give a positive number")
    modality = modality_cls(validated(modality_cls.Config, raw, f"{args.modality} option"))
    paths = args.input or modality.corpus_paths()
    texts, skipped = [], 0
    records = (record for path in paths for record in read_records(path, args.column, modality.default_columns))
    for record in records:
        try:
            texts.append(modality.tokenizer_input(normalize_record(modality, record.text)))
        except InvalidRecord:
            skipped += 1
    tokenizer = modality.new_tokenizer(texts, args.vocab_size)
    save_tokenizer(tokenizer, args.out)
    print(dumps({"out": str(args.out), "records": len(texts), "skipped": skipped,
                 "vocab_size": tokenizer.get_vocab_size()}))
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    encoder, train, data = (settings_from(args, model) for model in (EncoderConfig, TrainConfig, DataConfig))
    from polymask.bench.contenders import BenchSetup
    from polymask.bench.run import run_bench

    if args.corpus:
        from polymask.bench.corpus import bench_corpus

        if args.data:
            raise ConfigError("--corpus times the preparation of one file; --data is the corpus of the training rows")
        bench_corpus(args.corpus, args.modality, args.num_proc, data.max_len, args.out)
        return 0
    from polymask.objectives import MASK_RATIO

    ratios = tuple(float(r) for r in args.mask_ratios.split(",")) if args.mask_ratios else (MASK_RATIO,)
    setup = BenchSetup(args.modality, encoder.preset, train.batch_size, data.max_len, tuple(args.data or ()),
                       args.column)
    run_bench(setup, tuple(args.objectives.split(",")), args.warmup, args.steps, args.out, ratios, args.flop_steps,
              train.device, tuple(args.plugin or ()))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from polymask.checkpoints.finetuned import is_finetuned
    from polymask.export.hf import export_checkpoint, export_summary

    if is_finetuned(args.checkpoint):
        from polymask.export.finetuned import export_finetuned

        print(export_summary(export_finetuned(args.checkpoint, args.out, args.overwrite)))
    else:
        print(export_summary(export_checkpoint(args.checkpoint, args.out, args.overwrite)))
    return 0


def _add_train(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("train", help="pretrain an encoder", description="Pretrain an encoder with one objective.")
    parser.add_argument("--modality", help="registered modality (smiles, dna, text, ...); no default: give it "
                        "here or in --config (or --resume)")
    parser.add_argument("--objective", help="registered objective (mlm, maelm, exlm, ...); no default: give it "
                        "here or in --config (or --resume)")
    parser.add_argument("--config", help="YAML recipe: a path or a built-in name (see configs/); default: none, "
                        "every field at its documented default")
    parser.add_argument("--data", nargs="+", type=Path, help="corpus files (default: the modality's built-in corpus)")
    parser.add_argument("--column", help="column/field holding sequences in csv/tsv/jsonl/parquet files "
                        "(default: the modality's usual names, e.g. smiles, sequence, text)")
    parser.add_argument("--out", type=Path, help="run folder (default runs/<modality>-<objective>)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="override a config field, e.g. train.lr=3e-4 (repeatable; default: none)")
    parser.add_argument("--strict", action="store_true", help="fail on the first invalid record")
    parser.add_argument("--resume", help="continue from a run or checkpoint folder; 'auto': continue --out from its "
                        "latest checkpoint if it has one, leave it if finished, else start it (for job scripts that "
                        "are rerun) (default: start a new run; a folder that holds one is refused)")
    parser.add_argument("--overwrite", action="store_true",
                        help="start a new run in an --out that holds one, removing the old run's files first")
    add_plugin_option(parser, "custom modalities and objectives")
    parser.set_defaults(handler=cmd_train)


def _add_tokenizer(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("tokenizer", help="build tokenizers")
    verbs = parser.add_subparsers(dest="tokenizer_verb", required=True)
    build = verbs.add_parser("train", help="build a modality's tokenizer from a corpus")
    build.add_argument("--modality", required=True, help="registered modality (smiles, dna, text, ...)")
    build.add_argument("--input", nargs="+", type=Path, help="corpus files (default: the built-in corpus)")
    build.add_argument("--out", type=Path, required=True, help="folder for tokenizer.json")
    build.add_argument("--vocab-size", type=int,
                       help="vocabulary size (BPE) or cap (SMILES) (default: the modality's vocab_size option)")
    build.add_argument("--column", help="column/field holding sequences (default: the modality's usual names)")
    build.add_argument("--option", action="append", metavar="KEY=VALUE",
                       help="modality option, e.g. k=4 (repeatable; default: the modality's defaults)")
    add_plugin_option(build, "custom modalities")
    build.set_defaults(handler=cmd_tokenizer_train)


def _add_bench(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("bench", help="training throughput next to HF BertForMaskedLM")
    run = parser.add_argument_group("as in a run config (model.preset, train.batch_size, data.max_len, train.device)")
    add_model_options(run, EncoderConfig, ["preset"])
    add_model_options(run, TrainConfig, ["batch_size"])
    add_model_options(run, DataConfig, ["max_len"])
    add_model_options(run, TrainConfig, ["device"])
    parser.add_argument("--modality", default="smiles", help="registered modality (smiles, dna, text, ...)")
    parser.add_argument("--data", nargs="+", type=Path,
                        help="corpus files the rows train on (default: the modality's built-in corpus)")
    parser.add_argument("--column", help="column/field holding sequences in csv/tsv/jsonl/parquet files "
                        "(default: the modality's usual names)")
    parser.add_argument("--objectives", default="mlm", help="comma-separated objectives")
    parser.add_argument("--mask-ratios", help="comma-separated mask ratios, a row per objective each (default: the "
                        "objectives' default objective.mask_ratio)")
    parser.add_argument("--flop-steps", type=int, default=3, help="steps whose FLOPs are counted after the timed ones")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    parser.add_argument("--steps", type=int, default=40, help="timed steps")
    parser.add_argument("--out", type=Path, default=Path("docs/results/bench"), help="folder for the .md/.json results")
    parser.add_argument("--corpus", type=Path,
                        help="instead: time the preparation (tokenisation) of this corpus file (default: time training)")
    parser.add_argument("--num-proc", type=int, default=2, help="tokenisation processes with --corpus")
    add_plugin_option(parser, "custom modalities and objectives, imported in every row's process")
    parser.set_defaults(handler=cmd_bench)


def _add_export(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "export", help="write a checkpoint as a Hugging Face folder (transformers alone loads it)",
        description="Write a checkpoint as a Hugging Face folder: config, safetensors weights, tokenizer and model "
                    "card. Where transformers has the architecture (an encoder that maps exactly onto ESM), the "
                    "folder is native and loads with plain AutoModel; otherwise it carries its model code (torch + "
                    "transformers only) and loads with trust_remote_code=True; the model card says which. The "
                    "export is checked against polymask's encoder before it is written.")
    parser.add_argument("--checkpoint", type=checkpoint_path, required=True,
                        help="run or checkpoint folder, a built-in model's name (polymask models), or a fine-tuned "
                             "model folder (its task head loads with AutoModelForSequenceClassification)")
    parser.add_argument("--out", type=Path, required=True, help="folder to write (ready for push_to_hub)")
    parser.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    add_plugin_option(parser, "the run's custom modality or objective")
    parser.set_defaults(handler=cmd_export)


def _add_analyze(sub: argparse._SubParsersAction) -> None:
    from polymask.analysis import rank, semantics  # noqa: F401  (they register `polymask analyze rank|semantics`)
    from polymask.analysis.registry import ANALYSES

    parser = sub.add_parser("analyze", help="analyses of pretrained checkpoints")
    analyses = parser.add_subparsers(dest="analysis", required=True)
    for name in ANALYSES.names():
        ANALYSES.get(name)(analyses)


def _add_tasks(sub: argparse._SubParsersAction) -> None:
    from polymask.benchmarking.cli import add_commands
    from polymask.compare.cli import add_commands as add_compare

    add_commands(sub)
    add_compare(sub)


def _add_models(sub: argparse._SubParsersAction) -> None:
    from polymask.export.models_cli import add_commands

    add_commands(sub)


def _add_inference(sub: argparse._SubParsersAction) -> None:
    from polymask.inference.cli import add_commands

    add_commands(sub)


COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [
    _add_train, _add_tokenizer, _add_tasks, _add_inference, _add_export, _add_models, _add_bench, _add_analyze]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="polymask", description="Masked pretraining for text, SMILES and DNA.")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one verb; a fault a user can cause ends in one line on stderr and a non-zero exit status.

    A process that joined a torchrun process group ends here (``end_worker``), whatever the verb raised, rather
    than in interpreter teardown; call ``polymask.train`` and the other Python functions to keep the process."""
    try:
        code = _run_verb(argv)
    except SystemExit as exc:  # argparse's usage errors and --help
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
        if not joined_process_group():
            raise
    except BaseException:
        if not joined_process_group():
            raise
        traceback.print_exc()
        code = 1
    if joined_process_group():
        end_worker(code)
    return code


def joined_process_group() -> bool:
    """Whether a verb of this process joined a torchrun process group (torch is not imported to find out)."""
    distributed = sys.modules.get("polymask.training.distributed")
    return distributed is not None and distributed.joined_process_group()


def _run_verb(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        load_plugins(getattr(args, "plugin", None))
        return args.handler(args)
    except (PolymaskError, UnknownNameError) as exc:
        print(f"polymask: error: {exc}", file=sys.stderr, flush=True)
        if isinstance(exc, RankLost) and joined_process_group():
            end_worker(2, exit_handlers=False)  # they could wait on the group whose peer is gone
        return 2
    except OSError as exc:  # a file or folder the verb could not use, when nothing more specific caught it
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"polymask: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print(f"polymask: {getattr(exc, 'message', 'interrupted')}", file=sys.stderr)
        return getattr(exc, "exit_code", 130)


def end_worker(code: int, exit_handlers: bool = True) -> NoReturn:
    """Exit a torchrun worker with ``code`` (after its ``atexit`` handlers), skipping interpreter teardown.

    FSDP2's sharded tensors leave the process group referenced from torch's sharding caches after
    ``destroy_process_group``, so its gloo threads outlive the run, and a worker torn down around them can abort
    ("terminate called without an active exception", SIGABRT) after a finished run. Teardown of a group whose
    peer is gone (``RankLost``, which skips the handlers too) can wait out every queued collective. Every file
    polymask writes is closed before this point."""
    streams = (sys.stdout, sys.stderr)
    for stream in streams:
        stream.flush()
    if exit_handlers:
        atexit._run_exitfuncs()
        for stream in streams:  # what the handlers printed
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
