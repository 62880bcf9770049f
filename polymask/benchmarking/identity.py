"""What a benchmark cell was computed from (its identity): the row's identity for the task (the encoder's weights,
the fine-tuning settings; ``System.identity``) and the task's data (the spec and each split's content). A finished
cell is reused only when it would be computed the same way; otherwise one error names what changed."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from polymask.errors import ConfigError
from polymask.finetune_config import FinetuneConfig
from polymask.tasks.data.loading import TaskSplit

#: Task-spec fields that say where the data lies or how it is described, not what it is (the splits are hashed).
WHERE_NOT_WHAT = {"files", "extra_test_files", "source", "evaluated_on", "in_default_benchmark"}


def _split_identity(split: Any) -> dict[str, Any]:
    digest = hashlib.sha256()
    if isinstance(split, TaskSplit):
        digest.update(json.dumps(split.inputs).encode())
        digest.update(np.ascontiguousarray(split.labels, dtype=np.float64).tobytes())
    else:  # a span task's examples (dataclasses, whose repr is complete)
        digest.update(repr(split).encode())
    return {"examples": len(split), "sha256": digest.hexdigest()[:16]}


#: How a sentence-pair task's over-long inputs are cut (``cut_encoding``): its cells from before, cut at the end
#: (which could drop the second sentence), are not reused.
PAIR_CUT = "longest_first"


def data_identity(task: Any) -> dict[str, Any]:
    """What a task's cells were computed on: its spec (where the files lie left out), each split's size and
    content hash, and for a sentence-pair table how its inputs are cut; a cell is reused only on the same data."""
    exclude: dict[str, Any] = {field: True for field in WHERE_NOT_WHAT}
    if task.spec.split.column is None:  # added with split columns: a spec without one hashes as its cells recorded
        exclude["split"] = {"column"}
    spec = task.spec.model_dump_json(exclude=exclude)
    splits = {"train": task.train, "valid": task.valid, "test": task.test, **getattr(task, "extra_tests", {})}
    identity = {"spec": hashlib.sha256(spec.encode()).hexdigest()[:16],
                **{name: _split_identity(split) for name, split in splits.items()}}
    if isinstance(task.train, TaskSplit) and len(task.spec.input_columns) == 2:
        identity["pair_cut"] = PAIR_CUT
    return identity


def _difference(then: Any, now: Any, where: str = "") -> str:
    """The first setting that differs between two identities, as 'name: then X, now Y'."""
    if isinstance(then, dict) and isinstance(now, dict):
        for key in sorted(set(then) | set(now)):
            if then.get(key) != now.get(key):
                return _difference(then.get(key), now.get(key), f"{where}.{key}" if where else key)
    return f"{where or 'identity'}: then {then!r}, now {now!r}"


def _added_since(kept: dict[str, Any], identity: dict[str, Any]) -> dict[str, Any]:
    """``kept`` with what polymask records of a cell since it was written, taken as it is now: fine-tuning fields
    at their default (the value they had, in effect, then), and the newer keys of the encoder's ``weights`` (a
    tokenizer's or a folder's file hashes, the modality settings a Hugging Face row borrows; trusted as a cell from
    before identities were kept is)."""
    system, now = kept.get("system"), identity.get("system", {})
    if not isinstance(system, dict):
        return kept
    system = dict(system)
    then_tuned, now_tuned = system.get("finetune"), now.get("finetune")
    if isinstance(then_tuned, dict) and isinstance(now_tuned, dict):
        defaults = FinetuneConfig().model_dump(mode="json")
        system["finetune"] = {**then_tuned, **{key: now_tuned[key] for key in now_tuned.keys() - then_tuned.keys()
                                               if key in defaults and now_tuned[key] == defaults[key]}}
    then_weights, now_weights = system.get("weights"), now.get("weights")
    if isinstance(then_weights, dict) and isinstance(now_weights, dict):
        added = {key: now_weights[key] for key in now_weights.keys() - then_weights.keys()}
        system["weights"] = {**then_weights, **added}
    return {**kept, "system": system}


#: What every cell holds, whoever wrote it.
CELL_FIELDS = {"task": str, "metric": str, "valid": dict, "test": dict}


def _read_cell(path: Path) -> dict[str, Any]:
    """The cell at ``path``; one line naming it when it is not a cell polymask wrote (damaged, or edited)."""
    try:
        cell = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        cell, why = None, f"unreadable: {exc}"
    else:
        wrong = [name for name, kind in CELL_FIELDS.items() if not isinstance(cell, dict)
                 or not isinstance(cell.get(name), kind)]
        why = f"no valid {', '.join(wrong)}" if wrong else None
        if why is None and not isinstance(cell.get("identity", {}), dict):
            why = "its identity is not an object"
    if why is not None:
        raise ConfigError(f"{path} is not a benchmark cell ({why}); delete it, and the folder {path.stem}/ beside "
                          f"it if there is one, to run the cell again")
    return cell


def reused_cell(path: Path, identity: dict[str, Any]) -> dict[str, Any]:
    """A finished cell, if it was run as this one would be (a cell from before identities were kept is trusted)."""
    cell = _read_cell(path)
    kept = cell.get("identity")
    if kept is not None:
        kept = _added_since(kept, identity)
    if kept is not None and kept != identity:
        raise ConfigError(f"{path} was run otherwise ({_difference(kept, identity)}); give another --out, or delete "
                          f"{path.name} and the folder {path.stem}/ beside it to run the cell again")
    return cell
