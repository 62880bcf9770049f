"""Issue 38 on one GPU machine, inside a deadline: pretrain the corpus text encoders, then fine-tune them.

1. Pretraining: four runs of ``configs/text-mlm-corpus.yaml`` share the GPU for the same training time (MLM at
   15% and 30% masking, MAE-LM and ExLM at 15%), beside the Austen recipe (``text-mlm-small``).
2. Each run's final checkpoint, and MLM-15%'s checkpoints nearest 10% and 30% of its steps, become slim bf16
   folders (``polymask models add``): the benchmarks fine-tune those, the folders that ship.
3. Benchmarks, by priority, through ``polymask benchmark`` processes that share each benchmark folder's cells
   (several processes on one folder run different cells): GLUE with MLM-15% and the untrained twin at two
   learning rates; SQuAD v1.1 likewise; then every other row at the learning rate that MLM-15% chose per task
   on the validation split. What the deadline leaves unfinished is resumed by rerunning the same command
   anywhere (``commands.txt``).

    python3 benchmarks/text_gpu.py --data .gpu --work /tmp/text-gpu --out $OUT --budget 540 --pretrain 200

``--data`` holds ``corpus.txt.xz`` (benchmarks/text_corpus.py's output) and ``glue/`` (GLUE's files, gzipped).
Writes to ``--out`` one ``results.tar.gz`` (benchmark folders, run logs, metrics, summaries) and one
``model-<name>.tar`` per slim model (at most ``--return-models``; the rest stay in ``--work``).
"""
from __future__ import annotations

import argparse
import json
import lzma
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from polymask.benchmarking.runner import aggregate

PM = [sys.executable, "-m", "polymask"]
RECIPE = "text-mlm-corpus"
MAIN = "text-corpus-mlm15 (mlm)"  # the row whose validation scores choose each task's learning rate
PRETRAIN_RUNS = {"mlm15": [], "mlm30": ["objective.mask_ratio=0.3"],
                 "maelm": ["objective.name=maelm"], "exlm": ["objective.name=exlm"]}
GLUE_TASKS = ["sst2", "cola", "stsb", "mrpc", "rte", "wnli"]
LEARNING_RATES = ["1e-4", "3e-4"]
FINETUNE = ["--epochs", "5", "--patience", "2", "--batch-size", "32", "--seeds", "3", "--no-save-models", "--quiet"]
START = time.time()


def log(message: str) -> None:
    print(f"[{time.time() - START:6.0f} s] {message}", flush=True)


def launch(command: list[str], log_file: Path, threads: int = 1) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1"}
    log_file.parent.mkdir(parents=True, exist_ok=True)
    handle = open(log_file, "a")
    handle.write(" ".join(command) + "\n")
    handle.flush()
    return subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def stop(process: subprocess.Popen, sig: int = signal.SIGINT, grace: float = 60) -> None:
    """Ctrl-C a run (it checkpoints and exits), then kill it if it is still there after ``grace`` seconds."""
    if process.poll() is None:
        os.killpg(process.pid, sig)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


def start_mps() -> bool:
    """The CUDA multi-process service, so that the many small fine-tuning processes share the GPU at once;
    left off when it does not start or a client cannot reach the GPU through it."""
    os.environ.update(CUDA_MPS_PIPE_DIRECTORY="/tmp/mps-pipe", CUDA_MPS_LOG_DIRECTORY="/tmp/mps-log")
    for folder in ("/tmp/mps-pipe", "/tmp/mps-log"):
        os.makedirs(folder, exist_ok=True)
    try:
        subprocess.run(["nvidia-cuda-mps-control", "-d"], check=True, timeout=20)
        subprocess.run([sys.executable, "-c", "import torch; print(torch.ones(2, device='cuda').sum().item())"],
                       check=True, timeout=90)
        return True
    except (OSError, subprocess.SubprocessError) as exc:
        log(f"MPS not used: {exc}")
        if shutil.which("nvidia-cuda-mps-control"):
            subprocess.run(["nvidia-cuda-mps-control"], input=b"quit\n", timeout=20, check=False)
        for name in ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"):
            os.environ.pop(name)
        return False


def pretrain(work: Path, seconds: int, deadline: float, extra: list[str]) -> dict[str, Path]:
    """The four corpus runs and the Austen run side by side; returns run name -> run folder."""
    processes = {}
    for name, overrides in PRETRAIN_RUNS.items():
        sets = [arg for item in [f"train.max_time={seconds}", "train.progress=false", "train.threads=2", *overrides,
                                 *extra] for arg in ("--set", item)]
        processes[name] = launch([*PM, "train", "--config", RECIPE, "--out", str(work / "runs" / name),
                                  "--resume", "auto", *sets], work / "logs" / f"train-{name}.log", threads=2)
        time.sleep(5 if name == "mlm15" else 0)  # the first run builds the shared corpus cache
    processes["austen"] = launch([*PM, "train", "--config", "text-mlm-small", "--out", str(work / "runs" / "austen"),
                                  "--resume", "auto", "--set", "train.progress=false", "--set", "train.threads=2",
                                  *[arg for item in extra for arg in ("--set", item)]],
                                 work / "logs" / "train-austen.log", threads=2)
    while any(p.poll() is None for p in processes.values()) and time.time() < deadline:
        time.sleep(5)
    for name, process in processes.items():
        if process.poll() is None:
            log(f"pretraining {name} still running at its deadline: stopped (Ctrl-C checkpoints it)")
        stop(process)
        log(f"pretraining {name} exit code {process.returncode}")
    return {name: work / "runs" / name for name in processes}


def steps(run: Path) -> list[int]:
    return sorted(int(folder.name.split("-")[1]) for folder in (run / "checkpoints").glob("step-*") if folder.is_dir())


def slim_models(runs: dict[str, Path], work: Path) -> dict[str, Path]:
    """Model name -> slim bf16 folder: each run's last checkpoint, and MLM-15%'s nearest 10% and 30% of its steps."""
    chosen = {f"text-corpus-{name}": run for name, run in runs.items() if name != "austen"}
    chosen["text-austen-mlm"] = runs["austen"]
    mlm_steps = steps(runs["mlm15"])
    for percent in (10, 30):
        if mlm_steps:
            step = min(mlm_steps, key=lambda s: abs(s - mlm_steps[-1] * percent / 100))
            chosen[f"text-corpus-mlm15-{percent}pct"] = runs["mlm15"] / "checkpoints" / f"step-{step:06d}"
    models = {}
    for name, source in chosen.items():
        result = subprocess.run([*PM, "models", "add", str(source), "--name", name, "--dtype", "bfloat16",
                                 "--out", str(work / "models"), "--overwrite"], capture_output=True, text=True)
        if result.returncode == 0:
            models[name] = work / "models" / name
        else:
            log(f"models add {name} failed: {result.stdout[-400:]} {result.stderr[-400:]}")
    return models


@dataclass
class Unit:
    """One benchmark folder and the command every worker on it runs (units that depend on others are added by
    ``run_units``' ``on_done`` once those finish)."""

    name: str
    command: list[str]
    workers: int
    running: list[subprocess.Popen] = field(default_factory=list)
    done: bool = False


def benchmark_command(benchmark: str, models: list[Path], tasks: list[str], lr: str, out: Path, data: Path,
                      references: bool, max_len: str, extra: list[str]) -> list[str]:
    checkpoints = [arg for model in models for arg in ("--checkpoint", str(model))]
    return [*PM, "benchmark", benchmark, *checkpoints, "--tasks", *tasks, "--lr", lr, "--max-len", max_len,
            "--data-dir", str(data / "glue"), "--out", str(out), *FINETUNE, *extra,
            *([] if references else ["--no-references"])]


def best_rate(valid: dict[str, list[dict[str, Any]]], system: str, task: str) -> str | None:
    """Of ``{rate: aggregate(results, "valid")}``, the rate where ``system``'s mean validation score on ``task`` is
    best (None: no score)."""
    means = {lr: (r[f"{r['metric']}_mean"], r["higher_is_better"]) for lr, rows in valid.items() for r in rows
             if r["system"] == system and r["task"] == task and not math.isnan(r[f"{r['metric']}_mean"])}
    return max(means, key=lambda lr: means[lr][0] if means[lr][1] else -means[lr][0]) if means else None


def chosen_rates(bench: Path, system: str) -> dict[str, str]:
    """GLUE task -> the learning rate of the ``glue-lr<rate>`` folders under which ``system`` is best on validation."""
    valid = {lr: aggregate({"cells": [json.loads(path.read_text())
                                      for path in (bench / f"glue-lr{lr}").glob("cells/*/*/seed-*.json")]}, "valid")
             for lr in LEARNING_RATES}
    return {task: lr for task in GLUE_TASKS if (lr := best_rate(valid, system, f"glue/{task}"))}


def run_units(units: list[Unit], max_workers: int, deadline: float, on_done: Callable[[Unit], list[Unit]],
              logs: Path) -> None:
    """Start workers unit by unit (priority order) until the deadline; a unit is done when one of its workers exits
    0 (every cell of its folder is then finished), and ``on_done(unit)`` may then add units."""
    while time.time() < deadline:
        for unit in units:
            for process in list(unit.running):
                if process.poll() is not None:
                    unit.running.remove(process)
                    if process.returncode == 0 and not unit.done:
                        unit.done = True
                        log(f"unit {unit.name} done")
                        units.extend(on_done(unit))
                    elif process.returncode != 0:
                        log(f"unit {unit.name}: a worker exited {process.returncode}")
        if all(unit.done for unit in units):
            return
        active = sum(len(unit.running) for unit in units)
        for unit in units:
            while not unit.done and active < max_workers and len(unit.running) < unit.workers:
                unit.running.append(launch(unit.command, logs / f"bench-{unit.name}.log"))
                active += 1
        time.sleep(3)
    for unit in units:
        for process in unit.running:
            stop(process, signal.SIGTERM, grace=10)
        if not unit.done:
            log(f"unit {unit.name} unfinished at the deadline")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget", type=float, default=540, help="seconds for the whole script")
    parser.add_argument("--pretrain", type=int, default=200, help="training seconds of each pretraining run")
    parser.add_argument("--workers", type=int, default=14)
    parser.add_argument("--pretrain-set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="overrides for every pretraining run (a CPU dry run: model.preset=tiny ...)")
    parser.add_argument("--finetune-set", default="", metavar="OPTIONS",
                        help="extra benchmark options in one string (a CPU dry run: '--max-train-examples 50')")
    parser.add_argument("--return-models", type=int, default=4)
    parser.add_argument("--pack-only", nargs="+", metavar="MODEL",
                        help="only pack these slim models of an earlier call's --work (the ones it could not return)")
    args = parser.parse_args()
    work, data = args.work.resolve(), args.data.resolve()
    if args.pack_only:
        args.out.mkdir(parents=True, exist_ok=True)
        for name in args.pack_only:
            with tarfile.open(args.out / f"model-{name}.tar", "w") as tar:
                tar.add(work / "models" / name, arcname=name)
        return
    extra = shlex.split(args.finetune_set)
    end = START + args.budget - 40  # leave time to pack the results
    (work / "corpus").mkdir(parents=True, exist_ok=True)
    corpus = work / "corpus" / "text-corpus" / "corpus.txt"
    if not corpus.is_file():
        corpus.parent.mkdir(parents=True, exist_ok=True)
        with lzma.open(data / "corpus.txt.xz") as source, open(corpus, "wb") as target:
            shutil.copyfileobj(source, target, 2**24)
    os.environ["POLYMASK_DATA_DIR"] = str(work / "corpus")
    os.environ["POLYMASK_CACHE"] = str(work / "cache")
    log(f"corpus {corpus.stat().st_size / 1e6:.0f} MB; MPS: {start_mps()}")
    runs = pretrain(work, args.pretrain, end - 200, args.pretrain_set)
    models = slim_models(runs, work)
    log(f"slim models: {', '.join(models)}")
    main_model = models.get("text-corpus-mlm15")
    others = [models[name] for name in models if name != "text-corpus-mlm15"]
    units = [Unit(f"glue-lr{lr}", benchmark_command("glue", [main_model], GLUE_TASKS, lr, work / "bench" / f"glue-lr{lr}",
                                                     data, True, "128", extra), 5) for lr in LEARNING_RATES]
    units += [Unit(f"squad-lr{lr}", benchmark_command("squad", [main_model], ["v1"], lr, work / "bench" / f"squad-lr{lr}",
                                                      data, True, "256", extra), 2) for lr in LEARNING_RATES]

    def on_done(unit: Unit) -> list[Unit]:
        glue_units = [u for u in units if u.name.startswith("glue-lr")]
        if not unit.name.startswith("glue-lr") or not all(u.done for u in glue_units) or not others:
            return []
        rates = chosen_rates(work / "bench", MAIN)
        log(f"learning rate per task on validation: {rates}")
        (work / "bench").mkdir(exist_ok=True)
        (work / "bench" / "chosen_lr.json").write_text(json.dumps(rates, indent=1))
        added = []
        for lr in sorted(set(rates.values())):
            tasks = [task for task in GLUE_TASKS if rates.get(task) == lr]
            added.append(Unit(f"glue-rows-lr{lr}", benchmark_command("glue", others, tasks, lr, work / "bench" /
                                                                      f"glue-rows-lr{lr}", data, False, "128", extra), 8))
        return added

    if main_model is not None:
        run_units(units, args.workers, end, on_done, work / "logs")
    commands = "\n".join(" ".join(unit.command) for unit in units)
    (work / "bench").mkdir(exist_ok=True)
    (work / "bench" / "commands.txt").write_text(commands + "\n")
    pack(work, args.out, models, args.return_models)


def pack(work: Path, out: Path, models: dict[str, Path], return_models: int) -> None:
    """results.tar.gz (everything but checkpoints and caches) and the first ``return_models`` slim models."""
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out / "results.tar.gz", "w:gz") as tar:
        for path in [work / "bench", work / "logs"]:
            if path.exists():
                tar.add(path, arcname=path.name)
        for run in (work / "runs").glob("*"):
            for name in ("metrics.jsonl", "summary.json", "config.yaml", "skipped_records.jsonl"):
                if (run / name).is_file():
                    tar.add(run / name, arcname=f"runs/{run.name}/{name}")
    order = ["text-corpus-mlm15", "text-corpus-maelm", "text-corpus-exlm", "text-corpus-mlm30",
             "text-corpus-mlm15-10pct", "text-corpus-mlm15-30pct", "text-austen-mlm"]
    for name in [n for n in order if n in models][:return_models]:
        with tarfile.open(out / f"model-{name}.tar", "w") as tar:
            tar.add(models[name], arcname=name)
    log("packed: " + ", ".join(sorted(p.name for p in out.iterdir())))


if __name__ == "__main__":
    main()
