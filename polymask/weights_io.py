"""Writing tensors as safetensors with the permissions of every other file polymask writes.

``safetensors`` writes through a private temporary file, so its files come out 0600 whatever the umask: a model
shared through a group folder could not be read by the group. ``save_weights`` gives the file the mode a new
file gets from ``open`` (0666 less the umask), as JSON, tokenizers and reports have.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch
from safetensors.torch import save_file


def new_file_mode() -> int:
    """The permission bits ``open`` gives a new file in this process: 0o666 less the umask."""
    umask = os.umask(0o022)  # reading the umask means setting it; restored at once
    os.umask(umask)
    return 0o666 & ~umask


def save_weights(tensors: dict[str, torch.Tensor], path: Path, metadata: dict[str, str] | None = None) -> None:
    """``safetensors.torch.save_file`` to ``path``, then the mode of any other new file (umask respected)."""
    save_file(tensors, str(path), metadata=metadata)
    os.chmod(path, new_file_mode())
