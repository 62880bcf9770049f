"""The converted rxnfp folder's tokenizer against rxnfp's own, on every molecule of eight MoleculeNet tasks.

rxnfp's own tokenizer is its ``SmilesTokenizer`` (a ``BertTokenizer`` whose ``_tokenize`` is the regex), run from
the wheel's ``rxnfp/tokenization.py``: ``pkg_resources`` (imported there for a default vocabulary path only) is
stubbed, and on transformers 5 ``BertTokenizer`` is the Python ``BertTokenizerLegacy``, since transformers 5's
``BertTokenizer`` is Rust-backed and never calls ``_tokenize``. The molecules are those polymask fine-tunes on:
each task file's RDKit-valid SMILES, normalised by the SMILES modality, each once. Run through
``python benchmarks/rxnfp_folder.py WHEEL --out FOLDER --check-molecules`` (``write_check``).
"""
from __future__ import annotations

import importlib
import re
import sys
import tempfile
import types
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from unittest import mock

import transformers
from rxnfp_folder import MODEL_DIR, TOKENIZATION, read_member, smiles_regex

from polymask.jsonio import make_dir, write_text
from polymask.modalities.smiles import Smiles
from polymask.tasks.data.loading import find_task_file, read_table
from polymask.tasks.data.spec import load_task_spec
from polymask.transformers_quiet import quiet_transformers

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

#: The tasks of the committed MoleculeNet table (docs/results/moleculenet-scale/).
TASKS = ("esol", "freesolv", "lipophilicity", "bbbp", "bace", "clintox", "tox21", "sider")


@dataclass
class TaskCheck:
    """One task's molecules; those rxnfp and the folder tokenise to different ids, apart from ``dropped``: those
    holding characters rxnfp's regex does not match, which rxnfp drops and the folder gives [UNK] (their ids
    agree once each such run of characters is [UNK] for rxnfp too); and the pieces that fall back to [UNK]."""

    task: str
    file: str
    molecules: int
    refused: int
    mismatches: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    with_unknown: int = 0
    unknown_pieces: Counter = field(default_factory=Counter)


def rxnfp_tokenizer(wheel: Path) -> "PreTrainedTokenizerBase":
    """rxnfp's ``SmilesTokenizer`` over its pretrained model's vocab.txt, its module run from the wheel."""
    # The module that rxnfp's ``from transformers import BertTokenizer`` reads: transformers' ``from_pretrained``
    # can put a new lazy ``transformers`` module into sys.modules, so the one imported above may be stale.
    current = importlib.import_module("transformers")
    bert = current.models.bert
    python_bert = getattr(bert, "BertTokenizerLegacy", bert.BertTokenizer)
    module = types.ModuleType("rxnfp_tokenization")
    with mock.patch.dict(sys.modules, {"pkg_resources": types.ModuleType("pkg_resources")}), \
            mock.patch.object(current, "BertTokenizer", python_bert):
        exec(compile(read_member(wheel, TOKENIZATION).decode(), f"{wheel}/{TOKENIZATION}", "exec"), module.__dict__)
    with tempfile.TemporaryDirectory() as folder:
        vocab = Path(folder) / "vocab.txt"
        vocab.write_bytes(read_member(wheel, f"{MODEL_DIR}/vocab.txt"))
        return module.SmilesTokenizer(str(vocab), do_lower_case=False)


def task_molecules(task: str, data_dir: Path | None) -> tuple[Path, list[str], int]:
    """A MoleculeNet task's file, its valid molecules normalised (each once), and how many records it skipped
    (in these files: those RDKit refuses)."""
    spec = load_task_spec(f"moleculenet/{task}")
    path = find_task_file(spec.files["all"], spec.benchmark, data_dir)
    skipped: list[dict] = []
    _, examples = read_table(path, spec, Smiles(), skipped)
    return path, list(dict.fromkeys(inputs[0] for inputs in examples.inputs)), len(skipped)


def unmatched_as_unknown(smiles: str, regex: re.Pattern) -> str:
    """``smiles`` with each run of characters that ``regex`` does not match written as ``[UNK]``."""
    pieces, end = [], 0
    for match in regex.finditer(smiles):
        pieces += ["[UNK]"] * (match.start() > end) + [match.group()]
        end = match.end()
    return "".join(pieces + ["[UNK]"] * (end < len(smiles)))


def check_task(task: str, data_dir: Path | None, reference: "PreTrainedTokenizerBase",
               converted: "PreTrainedTokenizerBase", regex: re.Pattern) -> TaskCheck:
    """Token ids of every molecule of ``task`` under rxnfp's tokenizer and the converted one."""
    path, molecules, refused = task_molecules(task, data_dir)
    check = TaskCheck(task, path.name, len(molecules), refused)
    with quiet_transformers():  # molecules over 512 tokens are compared too, without a warning
        theirs, ours = reference(molecules)["input_ids"], converted(molecules)["input_ids"]
    vocab, split = converted.get_vocab(), converted.backend_tokenizer.pre_tokenizer.pre_tokenize_str
    for smiles, their_ids, our_ids in zip(molecules, theirs, ours):
        if their_ids != our_ids:
            with quiet_transformers():
                explained = reference(unmatched_as_unknown(smiles, regex))["input_ids"] == our_ids
            (check.dropped if explained else check.mismatches).append(smiles)
        if converted.unk_token_id in our_ids:
            check.with_unknown += 1
            check.unknown_pieces.update(piece for piece, _ in split(smiles) if piece not in vocab)
    return check


def report(checks: list[TaskCheck], wheel: Path, folder: Path) -> str:
    """The check as a Markdown page."""
    lines = ["# rxnfp's SMILES tokenizer, converted: token ids against rxnfp's own", "",
             f"Wheel `{wheel.name}`, converted folder `{folder.name}` "
             f"(`benchmarks/rxnfp_folder.py --check-molecules`).",
             "Molecules: each task file's RDKit-valid SMILES, normalised by polymask's SMILES modality (what",
             "fine-tuning hands the folder's tokenizer), each once. rxnfp's own tokenizer is its `SmilesTokenizer`,",
             "run from the wheel (`benchmarks/rxnfp_tokenizer_check.py`).", "",
             "| task | file | molecules | records skipped (invalid) | id mismatches | characters rxnfp drops (folder: [UNK]) "
             "| molecules with [UNK] | [UNK] pieces |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for check in checks:
        lines.append(f"| {check.task} | {check.file} | {check.molecules:,} | {check.refused} "
                     f"| {len(check.mismatches)} | {len(check.dropped)} | {check.with_unknown} "
                     f"| {sum(check.unknown_pieces.values())} |")
    total = sum(check.molecules for check in checks)
    mismatches = [smiles for check in checks for smiles in check.mismatches]
    dropped = [smiles for check in checks for smiles in check.dropped]
    unknown = sum((check.unknown_pieces for check in checks), Counter())
    lines += ["", f"In all: {total:,} molecules; {len(mismatches)} with different ids; {len(dropped)} holding "
                  f"characters that rxnfp's regex does not match, which rxnfp drops silently and the folder gives "
                  f"[UNK] (their ids are equal once rxnfp sees [UNK] there too); "
                  f"{sum(c.with_unknown for c in checks)} holding a piece outside rxnfp's vocabulary, hence [UNK]."]
    if unknown:
        lines += ["", "Pieces that fall back to [UNK] (occurrences over all tasks; a molecule in several tasks counts "
                      "in each): " + ", ".join(f"`{piece}` {count}" for piece, count in unknown.most_common()) + "."]
    for name, examples in (("with different ids", mismatches), ("whose characters rxnfp drops", dropped)):
        if examples:
            lines += ["", f"First molecule {name}: `{examples[0]}`."]
    return "\n".join(lines) + "\n"


def write_check(wheel: Path, folder: Path, data_dir: Path | None, out: Path) -> list[TaskCheck]:
    """Check every task of ``TASKS``, print one line each, and write the Markdown report ``out``."""
    reference, regex = rxnfp_tokenizer(wheel), re.compile(smiles_regex(read_member(wheel, TOKENIZATION).decode()))
    converted = transformers.AutoTokenizer.from_pretrained(str(folder))
    checks = []
    for task in TASKS:
        check = check_task(task, data_dir, reference, converted, regex)
        print(f"tokenizer check {task}: {check.molecules} molecules, {len(check.mismatches)} id mismatches, "
              f"{len(check.dropped)} with characters rxnfp drops, {check.with_unknown} with [UNK]")
        checks.append(check)
    make_dir(out.parent)
    write_text(out, report(checks, wheel, folder))
    print(f"wrote {out}")
    return checks
