"""torch.distributed: every record goes to exactly one rank; 2-process gloo DDP equals one process."""
import atexit
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from polymask import cli
from polymask.cli import main
from polymask.data.batching import BatchSampler
from polymask.errors import RankLost
from polymask.training import distributed
from polymask.training.distributed import DistributedContext

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end


@pytest.mark.parametrize("world_size, grad_accum", [(2, 1), (3, 2)])
def test_sharding_gives_every_record_to_exactly_one_rank_per_epoch(world_size, grad_accum):
    batches = BatchSampler(np.random.default_rng(0).integers(5, 60, size=1000), 16, seed=1).epoch(0)
    per_step = world_size * grad_accum
    steps = len(batches) // per_step
    seen = {rank: [] for rank in range(world_size)}
    for step in range(steps):
        step_batches = batches[step * per_step:(step + 1) * per_step]
        for rank in range(world_size):
            for _, indices in DistributedContext(rank, world_size).own(step_batches, grad_accum):
                seen[rank].extend(indices.tolist())
    everything = [i for rank in seen for i in seen[rank]]
    covered = np.concatenate(batches[:steps * per_step]).tolist()
    assert sorted(everything) == sorted(covered)  # each record of the consumed batches exactly once
    assert all(not set(seen[a]) & set(seen[b]) for a in seen for b in seen if a < b)


def _metrics(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _train_command(out, objective, *extra):
    return ["-m", "polymask", "train", "--modality", "smiles", "--objective", objective, "--out", str(out),
            "--set", "model.preset=tiny", "--set", "train.batch_size=8", "--set", "train.max_steps=4",
            "--set", "train.log_every=1", "--set", "train.precision=fp32", "--set", "train.progress=false",
            "--set", "data.max_val_records=64", "--set", "train.warmup_steps=1", *extra]


@pytest.mark.parametrize("strategy, objective", [("ddp", "mlm"), ("fsdp", "mlm"), ("ddp", "maelm"), ("ddp", "exlm")])
def test_two_process_gloo_run_matches_one_process_with_the_same_global_batch(tmp_path, strategy, objective):
    """The 2-process run is also interrupted after 2 steps and resumed: it must still match."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    single = subprocess.run([sys.executable, *_train_command(tmp_path / "single", objective, "--set", "train.grad_accum=2")],
                            env=env, capture_output=True, text=True, timeout=600)
    assert single.returncode == 0, single.stderr[-2000:]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    first = [*_train_command(tmp_path / "multi", objective, "--set", f"train.parallel={strategy}", "--set", "train.stop_after_steps=2")]
    for command in (first, ["-m", "polymask", "train", "--resume", str(tmp_path / "multi")]):  # interrupted, resumed
        multi = subprocess.run([*torchrun, *command], env=env, capture_output=True, text=True, timeout=600)
        assert multi.returncode == 0, multi.stderr[-3000:]
    one, two = _metrics(tmp_path / "single"), _metrics(tmp_path / "multi")
    losses = lambda rows: [row["loss"] for row in rows if "loss" in row]
    assert len(losses(two)) == 4
    assert np.allclose(losses(one), losses(two), rtol=1e-4, atol=1e-5), (losses(one), losses(two))
    assert np.isclose(one[-1]["val_loss"], two[-1]["val_loss"], rtol=1e-4)
    assert json.loads((tmp_path / "multi" / "summary.json").read_text())["tokens"] == \
        json.loads((tmp_path / "single" / "summary.json").read_text())["tokens"]


def _raise(exc: BaseException):
    def load_plugins(_names):
        raise exc
    return load_plugins


@pytest.mark.parametrize("argv, fault, code, handlers", [
    (["models"], None, 0, True),
    (["train", "--modality", "no-such-modality"], None, 2, True),
    (["no-such-verb"], None, 2, True),  # argparse's usage error
    (["models"], RuntimeError("a bug"), 1, True),  # an uncaught exception: its traceback, then the same ending
    (["models"], RankLost("rank 0: lost contact with another rank"), 2, False),  # handlers could wait on the group
])
def test_a_torchrun_worker_ends_with_os_exit_after_its_exit_handlers(monkeypatch, capsys, argv, fault, code, handlers):
    """FSDP2 leaves the gloo group's threads alive after destroy_process_group (measured: 2 pt_gloo_runloop
    threads remain, none under DDP); a worker torn down around them aborted once on CI after a finished run."""
    events = []

    def exit_now(status):
        events.append(("os._exit", status))
        raise SystemExit(status)

    monkeypatch.setattr(atexit, "_run_exitfuncs", lambda: events.append("exit handlers"))
    monkeypatch.setattr(os, "_exit", exit_now)
    if fault is not None:
        monkeypatch.setattr(cli, "load_plugins", _raise(fault))
    monkeypatch.setenv("WORLD_SIZE", "2")  # set by torchrun; a process that joined no group still returns
    if argv[0] == "no-such-verb":
        pytest.raises(SystemExit, main, argv)
    elif isinstance(fault, RuntimeError):
        pytest.raises(RuntimeError, main, argv)  # a process that joined no group raises as before
    else:
        assert main(argv) == code
    assert events == []
    monkeypatch.setattr(distributed, "_joined", True)
    with pytest.raises(SystemExit):
        main(argv)
    ending = events[:events.index(("os._exit", code)) + 1]  # the real os._exit never returns
    assert ending == ["exit handlers"] * handlers + [("os._exit", code)]
    if isinstance(fault, RuntimeError):
        assert "RuntimeError: a bug" in capsys.readouterr().err
