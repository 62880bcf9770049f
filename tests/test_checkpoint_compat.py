"""Checkpoints written by earlier versions of polymask still load, and load the way they were trained."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import polymask
from polymask.checkpoints.pretrained import read_checkpoint
from polymask.config import build_run_config
from polymask.training.trainer import train

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end

LEGACY_RUN = Path(__file__).parent / "data" / "legacy_run"  # SMILES MLM, tiny, 2 steps, written by polymask 0.1.0


def test_a_checkpoint_from_before_the_embedding_norm_loads_without_it():
    checkpoint = read_checkpoint(LEGACY_RUN)
    assert checkpoint.encoder_config.embed_norm is False
    assert checkpoint.run_config.model.embed_norm is False  # validated once, with the legacy upgrade
    assert checkpoint.step == 2 and checkpoint.run_config.data.max_len == 64
    encoder = checkpoint.build_encoder().eval()
    assert isinstance(encoder.embed_norm, torch.nn.Identity)
    ids = checkpoint.tokenizer.encode("CCO").ids
    assert torch.isfinite(encoder(torch.tensor([ids]))).all()
    assert checkpoint.build_objective() is not None


def test_a_checkpoint_from_before_polymask_json_loads_its_config_json_and_embeds():
    folder = LEGACY_RUN / "checkpoints" / "step-000002"
    assert (folder / "config.json").is_file() and not (folder / "polymask.json").exists()
    checkpoint = polymask.load_checkpoint(LEGACY_RUN)  # the public loader embeds
    assert checkpoint.run_config.objective.name == "mlm"
    vectors = checkpoint.embed(["CCO", "C1CC", "c1ccccc1"])
    assert vectors.shape == (3, 64) and np.isnan(vectors[1]).all() and np.isfinite(vectors[[0, 2]]).all()


def test_a_legacy_run_resumes(tmp_path):
    run = tmp_path / "legacy"
    shutil.copytree(LEGACY_RUN, run)
    config = read_checkpoint(run).run_config.model_dump(mode="json")
    config["train"].update(max_steps=4, progress=False, threads=1)
    config["out"] = str(run)
    summary = train(build_run_config(config), resume=run)
    assert summary["steps"] == 4
    resumed = read_checkpoint(run)
    assert resumed.encoder_config.embed_norm is False
    # the new checkpoint names its run config polymask.json, so transformers no longer takes it for its own
    assert (resumed.folder / "polymask.json").is_file() and not (resumed.folder / "config.json").exists()


def test_an_exlm_checkpoint_whose_run_config_predates_the_objectives_rope_2d_loads(tmp_path):
    """Checkpoints written before the run config took ``model.rope_2d`` from the objective say false there (the
    encoder, encoder.json, was built 2D all the same): the loader gives the run config the encoder's value."""
    from conftest import tiny_config

    from polymask.checkpoints.pretrained import write_manifest

    config = tiny_config("smiles", tmp_path / "run", max_steps=2, threads=1)
    config["objective"] = {"name": "exlm"}
    train(config)
    folder = tmp_path / "run" / "checkpoints" / "step-000002"
    saved = json.loads((folder / "polymask.json").read_text())
    saved["model"]["rope_2d"] = False
    (folder / "polymask.json").write_text(json.dumps(saved))
    (folder / "manifest.json").unlink()
    write_manifest(folder, {"step": 2})
    checkpoint = read_checkpoint(tmp_path / "run")
    assert checkpoint.run_config.model.rope_2d and checkpoint.encoder_config.rope_2d
    assert checkpoint.build_objective().encoder.config.rope_2d
