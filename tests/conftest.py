"""Shared fixtures: an isolated tokenised-data cache and tiny run configs."""
from __future__ import annotations

import argparse
import csv
import gzip
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


def attention_outputs(encoder: Any, input_ids: torch.Tensor, **kwargs: Any) -> torch.Tensor:
    """What the first block's attention adds to the residual stream (positions enter only there),
    computed with query/key/value weights scaled up so that attention is far from uniform.

    Comparing these, relative to their own size, tests position handling whatever the scale of the
    residual stream and of the attention logits at initialisation (an embedding LayerNorm makes the
    stream ~50x larger than the blocks' first outputs, and BERT's init leaves attention near uniform,
    so at random init the encoder's final states hardly move when positions change)."""
    qkv = encoder.blocks[0].attn.qkv.weight
    saved = qkv.detach().clone()
    captured = []
    handle = encoder.blocks[0].attn.register_forward_hook(lambda module, inputs, output: captured.append(output))
    try:
        with torch.no_grad():
            qkv.mul_(6)  # attention logits of order 1: neither uniform nor saturated
            encoder(input_ids, **kwargs)
    finally:
        handle.remove()
        with torch.no_grad():
            qkv.copy_(saved)
    return captured[0]


def differ(a: torch.Tensor, b: torch.Tensor, rel: float = 1e-2) -> bool:
    """True when ``a`` and ``b`` differ by more than ``rel`` of their size."""
    return bool((a - b).norm() > rel * max(a.norm(), b.norm()))


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


@pytest.fixture(scope="session")
def small_smiles_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 300 molecules of the built-in SMILES corpus (quick to prepare)."""
    import gzip

    from polymask.resources import builtin_dir

    source = builtin_dir("corpora") / "smiles" / "wehi_mols.smi.gz"
    lines = [line for line in gzip.open(source, "rt") if line.strip()][:300]
    path = tmp_path_factory.mktemp("small-smiles") / "molecules.smi"
    path.write_text("".join(lines))
    return path


@pytest.fixture(scope="session")
def tiny_smiles_run(tmp_path_factory: pytest.TempPathFactory, small_smiles_file: Path) -> Path:
    """A 2x64 SMILES MLM run of 3 steps on ``small_smiles_file`` (copy it before damaging it)."""
    from polymask.training.trainer import train

    run = tmp_path_factory.mktemp("tiny-smiles") / "run"
    config = tiny_config("smiles", run, max_steps=3)
    config["data"]["paths"] = [str(small_smiles_file)]
    train(config)
    return run


@pytest.fixture(scope="session")
def tiny_smiles_model(tmp_path_factory: pytest.TempPathFactory, tiny_smiles_run: Path) -> Path:
    """A model fine-tuned from ``tiny_smiles_run`` on a few ESOL molecules (one epoch): what ``predict`` reads."""
    import json

    from polymask.cli import main

    out = tmp_path_factory.mktemp("tiny-smiles-model")
    assert main(["finetune", "--task", "moleculenet/esol", "--checkpoint", str(tiny_smiles_run), "--epochs", "1",
                 "--max-train-examples", "64", "--max-valid-examples", "32", "--max-test-examples", "32",
                 "--max-len", "64", "--out", str(out), "--quiet"]) == 0
    return out / json.loads((out / "results.json").read_text())["cells"][0]["model_dir"]


#: ESOL's target column in the shipped MoleculeNet file.
ESOL_TARGET = "measured log solubility in mols per litre"


def moleculenet_rows(file: str, columns: list[str], count: int, skip: int = 0) -> list[list[str]]:
    """``count`` rows (after the first ``skip``) of a shipped MoleculeNet file, with ``columns`` in that order: the
    real molecules of a user's own table."""
    from polymask.resources import builtin_dir

    with gzip.open(builtin_dir("tasks") / "moleculenet" / "data" / f"{file}.csv.gz", "rt", newline="") as handle:
        rows = list(csv.DictReader(handle))[skip:skip + count]
    return [[row[name].strip() for name in columns] for row in rows]


def write_csv(path: Path, header: list[str], rows: list[list[str]], delimiter: str = ",") -> Path:
    """``rows`` under ``header`` as a CSV (or another ``delimiter``) file at ``path``."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle, delimiter=delimiter)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def one_line_error(capsys: pytest.CaptureFixture, code: int, *names: str) -> str:
    """Assert a CLI call ended as a user fault must: non-zero ``code``, exactly one line on stderr
    naming each of ``names``, no traceback; returns the line."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code != 0, err
    assert "Traceback" not in err, err
    assert len(lines) == 1, err
    for name in names:
        assert name in lines[0], (name, lines[0])
    return lines[0]


def sub_parsers(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()):
    """Every (verb path, parser) of a command line, the top level first."""
    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from sub_parsers(child, (*prefix, name))
