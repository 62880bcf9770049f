"""Checkpoints written by earlier versions of polymask still load, and load the way they were trained."""
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import polymask
from polymask.checkpoints.pretrained import load_checkpoint
from polymask.config import build_run_config
from polymask.training.trainer import train

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end

LEGACY_RUN = Path(__file__).parent / "data" / "legacy_run"  # SMILES MLM, tiny, 2 steps, written by polymask 0.1.0


def test_a_checkpoint_from_before_the_embedding_norm_loads_without_it():
    checkpoint = load_checkpoint(LEGACY_RUN)
    assert checkpoint.encoder_config.embed_norm is False
    assert checkpoint.config["model"]["embed_norm"] is False
    encoder = checkpoint.build_encoder().eval()
    assert isinstance(encoder.embed_norm, torch.nn.Identity)
    ids = checkpoint.tokenizer.encode("CCO").ids
    assert torch.isfinite(encoder(torch.tensor([ids]))).all()
    assert checkpoint.build_objective() is not None


def test_a_checkpoint_from_before_polymask_json_loads_its_config_json_and_embeds():
    folder = LEGACY_RUN / "checkpoints" / "step-000002"
    assert (folder / "config.json").is_file() and not (folder / "polymask.json").exists()
    checkpoint = polymask.load_checkpoint(LEGACY_RUN)  # the public loader embeds
    assert checkpoint.config["objective"]["name"] == "mlm"
    vectors = checkpoint.embed(["CCO", "C1CC", "c1ccccc1"])
    assert vectors.shape == (3, 64) and np.isnan(vectors[1]).all() and np.isfinite(vectors[[0, 2]]).all()


def test_a_legacy_run_resumes(tmp_path):
    run = tmp_path / "legacy"
    shutil.copytree(LEGACY_RUN, run)
    config = load_checkpoint(run).config
    config["train"].update(max_steps=4, progress=False, threads=1)
    config["out"] = str(run)
    summary = train(build_run_config(config), resume=run)
    assert summary["steps"] == 4
    resumed = load_checkpoint(run)
    assert resumed.encoder_config.embed_norm is False
    # the new checkpoint names its run config polymask.json, so transformers no longer takes it for its own
    assert (resumed.folder / "polymask.json").is_file() and not (resumed.folder / "config.json").exists()
