"""Shared fixtures: an isolated tokenised-data cache and tiny run configs."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch

torch.set_num_threads(2)


@pytest.fixture(scope="session", autouse=True)
def isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every test shares one cache folder of its own, never the user's ~/.cache."""
    cache = tmp_path_factory.mktemp("polymask-cache")
    os.environ["POLYMASK_CACHE"] = str(cache)
    return cache


def tiny_config(modality: str, out: Path, **train: Any) -> dict[str, Any]:
    """A run config for a 2x64 encoder that trains in seconds."""
    return {
        "modality": {"name": modality},
        "objective": {"name": "mlm"},
        "model": {"preset": "tiny"},
        "data": {"max_len": 64, "max_val_records": 64},
        "train": {"batch_size": 16, "max_steps": 20, "warmup_steps": 2, "lr": 3e-3, "eval_every": 1000,
                  "save_every": 1000, "log_every": 1, "progress": False, "precision": "fp32", **train},
        "out": str(out),
    }


@pytest.fixture
def make_config():
    return tiny_config


@pytest.fixture(scope="session")
def tiny_text_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2x64 text encoder briefly pretrained with MLM on the built-in corpus (GLUE and SQuAD tests)."""
    from polymask.training.trainer import train

    run = tmp_path_factory.mktemp("pretrained") / "tiny-text"
    train(tiny_config("text", run, max_steps=30))
    return run


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread for a module of tiny models: on a busy shared CPU a second thread mostly waits."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
