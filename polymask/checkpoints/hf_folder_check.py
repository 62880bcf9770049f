"""What a local Hugging Face folder must hold before polymask hands it to transformers, checked from its files.

transformers guesses where a folder is silent: a bare ``vocab.txt`` becomes the model type's default tokenizer
(for BERT a WordPiece that lower-cases: rxnfp's SMILES vocabulary then reads ``C[C@H](Cl)N`` as ``c [UNK] c
[UNK] [UNK] [UNK] ( [UNK] ) n``), and transformers 4 matches a config.json without ``model_type`` on the folder's
name (transformers 5 refuses it with a long list). polymask refuses such a folder, and one without weights, in
one line that says what is missing and how to fix it, before any verb (finetune, benchmark, embed) loads it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from polymask.errors import CheckpointError, one_line

#: The weight files ``AutoModel.from_pretrained`` reads from a local folder (PyTorch, whole or sharded).
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
CONVERTER = "benchmarks/rxnfp_folder.py"


def _tokenizer_class(folder: Path) -> str | None:
    """The ``tokenizer_class`` the folder's tokenizer_config.json names (None when none or unreadable)."""
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text())
    except (OSError, ValueError):
        return None
    return config.get("tokenizer_class") if isinstance(config, dict) else None


def check_hf_folder(folder: Path) -> dict[str, Any]:
    """``folder``'s config.json, once it is known to name a ``model_type`` and the folder to hold a weight file and
    a tokenizer it states outright (``tokenizer.json``, or a ``tokenizer_config.json`` naming its
    ``tokenizer_class``); else one ``CheckpointError`` line."""
    folder = Path(folder)
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{folder}/config.json: unreadable ({one_line(exc)})") from None
    if not isinstance(config, dict):
        raise CheckpointError(f"{folder}/config.json: expected a JSON object")
    if not config.get("model_type"):
        raise CheckpointError(f"{folder}/config.json has no model_type; add \"model_type\" naming its architecture "
                              f"(\"bert\" for a BERT), or convert an rxnfp folder with {CONVERTER}")
    if not any((folder / name).is_file() for name in WEIGHT_FILES):
        raise CheckpointError(f"{folder}: no weights ({' or '.join(WEIGHT_FILES)}); save the model into the folder "
                              f"(model.save_pretrained)")
    if not (folder / "tokenizer.json").is_file() and not _tokenizer_class(folder):
        found = sorted(path.name for path in folder.glob("vocab*"))
        guess = f" (transformers would build its model type's default tokenizer from {found[0]}, which may " \
                f"lower-case or split records otherwise than the model was trained on)" if found else ""
        raise CheckpointError(f"{folder}: no tokenizer (tokenizer.json, or a tokenizer_config.json naming its "
                              f"tokenizer_class){guess}; save the model's "
                              f"tokenizer into the folder (tokenizer.save_pretrained), or convert an rxnfp folder "
                              f"with {CONVERTER}")
    return config
