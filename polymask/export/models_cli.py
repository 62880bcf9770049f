"""``polymask models`` (list the built-in models; no torch) and ``polymask models add`` (write one: an export)."""
from __future__ import annotations

import argparse
from pathlib import Path

from polymask.builtin_models import PRETRAINED_ENV, STORAGE_DTYPES, BuiltinModel, checkpoint_path, listing, search_path


def cmd_models(args: argparse.Namespace) -> int:
    print(listing())
    return 0


def cmd_models_add(args: argparse.Namespace) -> int:
    from polymask.export.builtin import make_builtin

    folder = make_builtin(args.checkpoint, args.out or search_path()[0], args.name, args.dtype, args.corpus,
                          args.card, args.overwrite)
    found = folder.parent.resolve() in {root.resolve() for root in search_path()}
    print("  ".join(BuiltinModel.read(args.name, folder).columns()) + f"  -> {folder}"
          + ("" if found else f" (not on the search path: add {folder.parent} to ${PRETRAINED_ENV})"))
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    models = sub.add_parser(
        "models", help="list the built-in pretrained models (their names work wherever --checkpoint is asked)",
        description=f"List the built-in pretrained models: name, modality, objective, corpus, encoder parameters, "
                    f"size on disk. They are found in the folders ${PRETRAINED_ENV} lists, then in the package's "
                    f"polymask/pretrained/.")
    models.set_defaults(handler=cmd_models)
    verbs = models.add_subparsers(dest="models_verb")
    add = verbs.add_parser(
        "add", help="make a built-in model from a pretraining run or checkpoint",
        description="Make a built-in model from a pretraining run or checkpoint: its weights without optimizer "
                    "state, stored in --dtype (loaded as float32), its configs and tokenizer, builtin.json, "
                    "MODEL_CARD.md and a manifest.")
    add.add_argument("checkpoint", type=checkpoint_path, help="run or checkpoint folder, or a built-in model's name")
    add.add_argument("--name", required=True, help="the model's name (lower case, digits, '.', '_', '-')")
    add.add_argument("--dtype", choices=STORAGE_DTYPES, default="float16",
                     help="storage precision of the weights")
    add.add_argument("--corpus", help="description of the pretraining data (default: the run's corpus file names)")
    add.add_argument("--card", type=Path, help="MODEL_CARD.md to ship (default: one generated from the checkpoint)")
    add.add_argument("--out", type=Path,
                     help=f"folder to add it to (default: the first folder of ${PRETRAINED_ENV}, else "
                          f"polymask/pretrained/)")
    add.add_argument("--overwrite", action="store_true", help="replace a model of that name in --out")
    add.set_defaults(handler=cmd_models_add)
