"""Resuming from a checkpoint reproduces the uninterrupted run exactly; bad checkpoints fail clearly."""
import json

import pytest
import torch
from safetensors.torch import load_file

from polymask.checkpoints.pretrained import read_checkpoint
from polymask.errors import CheckpointError, OutputError
from polymask.training.trainer import train


def losses(run):
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["loss"] for line in lines if "loss" in json.loads(line)]


def test_resume_equals_uninterrupted(tmp_path, make_config, capsys):
    settings = dict(max_steps=10)
    full = make_config("smiles", tmp_path / "full", **settings)
    full["model"]["dropout"] = 0.1  # dropout RNG must be restored too
    train(full)

    split = make_config("smiles", tmp_path / "split", stop_after_steps=4, **settings)
    split["model"]["dropout"] = 0.1
    first = train(split)
    assert first["steps"] == 4
    capsys.readouterr()
    resumed = train(resume=tmp_path / "split")
    assert resumed["steps"] == 10
    printed = capsys.readouterr().out  # the two clocks say what they cover: every invocation, or this one
    assert "every invocation" in resumed["time_note"] and "this invocation only" in resumed["time_note"]
    assert "| train_time_s (training steps, every invocation of the run) |" in printed
    assert "| wall_time_s (this invocation, evaluation and checkpoints included) |" in printed
    assert losses(tmp_path / "split") == losses(tmp_path / "full")
    final = lambda run: load_file(str(run / "checkpoints" / "step-000010" / "model.safetensors"))
    a, b = final(tmp_path / "full"), final(tmp_path / "split")
    assert all(torch.equal(a[name], b[name]) for name in a)


def test_missing_and_corrupt_checkpoints_fail_clearly(tmp_path, make_config):
    with pytest.raises(CheckpointError, match="checkpoint not found"):
        read_checkpoint(tmp_path / "nowhere")
    train(make_config("smiles", tmp_path / "run", max_steps=2))
    folder = tmp_path / "run" / "checkpoints" / "step-000002"
    with open(folder / "model.safetensors", "r+b") as handle:
        handle.seek(200)
        handle.write(b"\x00\x01\x02\x03")
    with pytest.raises(CheckpointError, match="model.safetensors is corrupt"):
        read_checkpoint(tmp_path / "run")
    (folder / "manifest.json").unlink()
    with pytest.raises(CheckpointError, match="incomplete checkpoint"):
        read_checkpoint(folder)


def test_a_checkpoint_kept_without_optimizer_state_reads_but_cannot_resume(tmp_path, make_config):
    """Results folders keep a run's final weights without its optimizer moments: fine-tuning and analyses read it
    (its manifest still lists the file), resuming says why it cannot."""
    train(make_config("smiles", tmp_path / "run", max_steps=2))
    folder = tmp_path / "run" / "checkpoints" / "step-000002"
    (folder / "optimizer.safetensors").unlink()
    checkpoint = read_checkpoint(tmp_path / "run")
    assert checkpoint.step == 2 and checkpoint.pretraining_tokens() > 0
    checkpoint.build_encoder()
    with pytest.raises(CheckpointError, match="optimizer state .* was removed, so the run cannot resume") as error:
        train(resume=tmp_path / "run")
    assert f"remove {tmp_path / 'run'} to pretrain the run again" in str(error.value)


def test_a_crash_while_saving_keeps_the_previous_checkpoint(tmp_path, make_config, monkeypatch):
    import polymask.checkpoints.pretrained as checkpoint_module

    train(make_config("smiles", tmp_path / "run", max_steps=3))
    real_save = checkpoint_module.save_weights

    def crash(tensors, path, metadata=None):
        if path.name == "optimizer.safetensors":
            raise OSError("disk full")
        real_save(tensors, path, metadata)

    monkeypatch.setattr(checkpoint_module, "save_weights", crash)
    with pytest.raises(OutputError, match="cannot write .*step-000006: disk full"):
        train(make_config("smiles", tmp_path / "run", max_steps=6), resume=tmp_path / "run")
    loaded = read_checkpoint(tmp_path / "run")
    assert loaded.folder.name == "step-000003"
    assert not list((tmp_path / "run" / "checkpoints").glob(".tmp-*"))  # the half-written folder is gone


def test_keyboard_interrupt_saves_the_last_finished_step(tmp_path, make_config, monkeypatch):
    from polymask.training.trainer import Trainer

    calls = {"n": 0}
    original = Trainer.step

    def interrupt_on_fourth(self, *args):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt
        return original(self, *args)

    monkeypatch.setattr(Trainer, "step", interrupt_on_fourth)
    with pytest.raises(KeyboardInterrupt, match="SIGINT: stopped at step 3") as stopped:
        train(make_config("smiles", tmp_path / "run", max_steps=10))
    assert stopped.value.exit_code == 130
    assert read_checkpoint(tmp_path / "run").folder.name == "step-000003"
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["checkpoint_step"] == 3


def test_resuming_with_overrides_reads_and_checks_the_checkpoint_once(tmp_path, make_config, monkeypatch):
    import polymask.checkpoints.pretrained as pretrained
    from polymask.cli import main

    run = tmp_path / "run"
    train(make_config("smiles", run, max_steps=4, stop_after_steps=2))
    verified = []
    verify = pretrained.verify_checkpoint
    monkeypatch.setattr(pretrained, "verify_checkpoint", lambda folder: verified.append(folder) or verify(folder))
    assert main(["train", "--resume", str(run), "--set", "train.stop_after_steps=null"]) == 0
    assert verified == [run / "checkpoints" / "step-000002"]  # the command line's load is the trainer's
    assert read_checkpoint(run).step == 4
