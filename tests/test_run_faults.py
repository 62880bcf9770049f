"""Faults during a run: NaN, a second run in the same folder, damaged or foreign checkpoints, signals.
None may lose a finished checkpoint, write a bad one, or touch another run."""
from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import one_line_error
from faults import latest_checkpoint, rehash
from safetensors.torch import load_file, save_file

from polymask.checkpoints.pretrained import read_checkpoint
from polymask.cli import main
from polymask.config import build_run_config
from polymask.errors import CheckpointError, TrainingDiverged
from polymask.training.trainer import Trainer, train

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def small_run(make_config, out: Path, data: Path, **train_options) -> dict:
    config = make_config("smiles", out, **train_options)
    config["data"]["paths"] = [str(data)]
    return config


def all_finite(folder: Path) -> bool:
    tensors = {**load_file(str(folder / "model.safetensors")), **load_file(str(folder / "optimizer.safetensors"))}
    return all(bool(torch.isfinite(t).all()) for t in tensors.values() if t.is_floating_point())


def test_a_diverging_run_skips_nonfinite_steps_then_stops_keeping_finite_checkpoints(tmp_path, small_smiles_file,
                                                                                   capsys):
    run = tmp_path / "run"
    code = main(["train", "--modality", "smiles", "--objective", "mlm", "--data", str(small_smiles_file),
                 "--out", str(run), "--set", "model.preset=tiny", "--set", "train.lr=1e4", "--set", "train.grad_clip=null",
                 "--set", "train.warmup_steps=0", "--set", "train.save_every=2", "--set", "train.log_every=1",
                 "--set", "train.max_steps=40", "--set", "train.progress=false", "--set", "train.precision=fp32",
                 "--set", "data.max_len=64", "--set", "train.batch_size=16"])
    line = one_line_error(capsys, code, "non-finite loss or gradient at steps", "in a row")
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "diverged" and summary["skipped_steps"] == 5 and summary["steps"] < 40
    skipped = [m for m in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "skipped" in m]
    assert len(skipped) == 5 and all(m["loss"] is None for m in skipped)
    folders = sorted((run / "checkpoints").glob("step-*"))
    assert folders and all(all_finite(folder) for folder in folders)
    assert latest_checkpoint(run) == folders[-1] and str(folders[-1]) in line


def test_one_nonfinite_step_is_skipped_counted_and_makes_no_update(tmp_path, make_config, small_smiles_file):
    trainer = Trainer(build_run_config(small_run(make_config, tmp_path / "run", small_smiles_file, max_steps=6)))
    calls, before = {"n": 0}, {}

    def poison_third_step(module, inputs, output):
        calls["n"] += 1
        if calls["n"] == 3:
            before.update({k: v.clone() for k, v in trainer.objective.state_dict().items()})
            return output * math.nan
        return output

    handle = trainer.encoder.register_forward_hook(poison_third_step)
    original_step = trainer.step

    def step_and_compare(*args):
        result = original_step(*args)
        if calls["n"] == 3:  # the poisoned step changed no weight
            assert all(torch.equal(before[k], v) for k, v in trainer.objective.state_dict().items())
        return result

    trainer.step = step_and_compare
    summary = trainer.fit()
    handle.remove()
    assert summary["status"] == "completed" and summary["steps"] == 6 and summary["skipped_steps"] == 1
    assert all_finite(latest_checkpoint(tmp_path / "run"))


def test_a_checkpoint_with_nonfinite_tensors_is_never_written(tmp_path, make_config, small_smiles_file):
    run = tmp_path / "run"
    trainer = Trainer(build_run_config(small_run(make_config, run, small_smiles_file, max_steps=2)))
    trainer.fit()
    finite = latest_checkpoint(run)
    with torch.no_grad():
        next(trainer.objective.parameters()).fill_(math.inf)
    trainer.state.step = 3
    with pytest.raises(TrainingDiverged, match="step 3: non-finite values in .*checkpoint not written"):
        trainer.save()
    assert latest_checkpoint(run) == finite and not (run / "checkpoints" / "step-000003").exists()


def hold_lock(run: Path) -> subprocess.Popen:
    """Another process that holds ``run``'s lock until killed."""
    code = ("import sys, time; from pathlib import Path; from polymask.locks import lock_run_folder; "
            "Path(sys.argv[1]).mkdir(parents=True, exist_ok=True); lock = lock_run_folder(Path(sys.argv[1])); "
            "print('locked', flush=True); time.sleep(600)")
    holder = subprocess.Popen([sys.executable, "-c", code, str(run)], stdout=subprocess.PIPE, text=True, env=ENV)
    assert holder.stdout.readline().strip() == "locked"
    return holder


def test_a_second_run_on_a_busy_folder_fails_at_once_naming_the_first(tmp_path, small_smiles_file, capsys):
    run = tmp_path / "run"
    holder = hold_lock(run)
    try:
        code = main(["train", "--modality", "smiles", "--objective", "mlm", "--data", str(small_smiles_file),
                     "--out", str(run), "--set", "model.preset=tiny", "--set", "train.progress=false"])
        one_line_error(capsys, code, f"run folder {run} is in use by process {holder.pid}")
        assert not (run / "metrics.jsonl").exists()
    finally:
        holder.kill()
        holder.wait()
    assert main(["train", "--modality", "smiles", "--objective", "mlm", "--data", str(small_smiles_file), "--out",
                 str(run), "--set", "model.preset=tiny", "--set", "train.max_steps=1", "--set", "train.progress=false",
                 "--set", "data.max_len=64"]) == 0  # a lock left by a killed process blocks nothing


def test_two_processes_preparing_one_corpus_both_succeed(tmp_path, small_smiles_file):
    code = ("import sys; from pathlib import Path; from polymask.data.corpus import prepare_corpus; "
            "from polymask.modalities import MODALITIES; m = MODALITIES.get('smiles')(); "
            "c = prepare_corpus(m, m.load_tokenizer(), [Path(sys.argv[1])], column=None, max_len=64, val_fraction=0.1, "
            "max_val_records=100, seed=0, cache_dir=Path(sys.argv[2]), strict=False); "
            "print(c.report.cache, c.report.train_sequences)")
    cache = tmp_path / "cache"
    workers = [subprocess.Popen([sys.executable, "-c", code, str(small_smiles_file), str(cache)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=ENV) for _ in range(2)]
    outputs = [worker.communicate() for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0], [err[-1500:] for _, err in outputs]
    assert outputs[0][0] == outputs[1][0] and int(outputs[0][0].split()[1]) > 200
    assert [p.name for p in cache.iterdir() if ".tmp-" in p.name] == []


def test_resume_refuses_a_checkpoint_with_missing_tensors(tmp_path, tiny_smiles_run):
    run = tmp_path / "run"
    shutil.copytree(tiny_smiles_run, run)
    folder = latest_checkpoint(run)
    weights = load_file(str(folder / "model.safetensors"))
    del weights["encoder.blocks.1.mlp.proj.weight"]
    save_file(weights, str(folder / "model.safetensors"))
    rehash(folder)
    with pytest.raises(CheckpointError, match=r"weights do not match the model: missing encoder\.blocks\.1\.mlp\.proj\.weight"):
        train(resume=run)


def snapshot(folder: Path) -> dict[str, float]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")}


def test_a_pointer_out_of_its_run_folder_is_refused_and_the_other_run_untouched(tmp_path, tiny_smiles_run, capsys):
    mine, other = tmp_path / "mine", tmp_path / "other-run"
    shutil.copytree(tiny_smiles_run, mine)
    shutil.copytree(tiny_smiles_run, other)
    before = snapshot(other)
    (mine / "checkpoints" / "latest.json").write_text('{"checkpoint": "../../other-run/checkpoints/step-000003"}')
    one_line_error(capsys, main(["train", "--resume", str(mine), "--set", "train.max_steps=20"]), "latest.json",
                   "refusing to follow it")
    assert snapshot(other) == before


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_saves_writes_an_interrupted_summary_and_exits_128_plus_signal(stop, tmp_path, small_smiles_file):
    run = tmp_path / "run"
    command = [sys.executable, "-m", "polymask", "train", "--modality", "smiles", "--objective", "mlm", "--data",
               str(small_smiles_file), "--out", str(run), "--set", "model.preset=tiny", "--set", "train.max_steps=100000",
               "--set", "train.progress=false", "--set", "train.log_every=1", "--set", "data.max_len=64",
               "--set", "train.batch_size=8", "--set", "train.save_every=100000"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
    metrics = run / "metrics.jsonl"
    while process.poll() is None and not (metrics.is_file() and metrics.read_text().count("\n") >= 2):
        time.sleep(0.2)
    process.send_signal(stop)
    _, err = process.communicate()
    assert process.returncode == 128 + stop, err
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["steps"] >= 2
    assert summary["checkpoint_step"] == summary["steps"]
    assert read_checkpoint(run).folder.name == f"step-{summary['steps']:06d}"
    last = err.strip().splitlines()[-1]
    assert "Traceback" not in err and f"{signal.Signals(stop).name}: stopped at step" in last
    assert f"polymask train --resume {run}" in last
