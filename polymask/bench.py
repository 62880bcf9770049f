"""``polymask bench``: training throughput of polymask objectives next to HF ``BertForMaskedLM``.

Everything runs in one process on the same data (a modality's built-in corpus), the same encoder
dimensions and batch size. polymask uses its own pipeline (length-bucketed batches, sparse
prediction); HF uses ``DataCollatorForLanguageModeling`` with dynamic padding over shuffled
batches, as its Trainer does by default. Reported: real (non-padding) tokens per second, step time
and padding fraction; written as Markdown and JSON.
"""
from __future__ import annotations

import json
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from polymask.config import build_run_config
from polymask.training.runtime import autocast
from polymask.training.trainer import Trainer


def _time_steps(step: Callable[[], tuple[int, int]], warmup: int, steps: int) -> dict[str, float]:
    for _ in range(warmup):
        step()
    durations, real, padded = [], 0, 0
    for _ in range(steps):
        start = time.perf_counter()
        step_real, step_padded = step()
        durations.append(time.perf_counter() - start)
        real += step_real
        padded += step_padded
    return {"real_tokens_per_s": real / sum(durations), "step_ms": 1000 * statistics.median(durations),
            "padding_fraction": 1 - real / padded}


def polymask_trainer(objective: str, modality: str, preset: str, batch_size: int, max_len: int, precision: str,
                     workdir: Path) -> Trainer:
    """A trainer for one objective, as ``polymask train`` would build it (its own run folder under workdir)."""
    return Trainer(build_run_config({
        "modality": modality, "objective": objective, "model": {"preset": preset},
        "data": {"max_len": max_len}, "out": str(workdir / objective),
        "train": {"batch_size": batch_size, "precision": precision, "progress": False, "max_steps": 10**6}}))


def train_step(trainer: Trainer) -> tuple[int, int]:
    """One real optimiser step; (real tokens, padded tokens) of its batch."""
    _, real, padded = trainer._train_step()
    trainer.state.step += 1
    return real, padded


def bench_polymask(objective: str, modality: str, preset: str, batch_size: int, max_len: int, precision: str,
                   warmup: int, steps: int, workdir: Path) -> dict[str, Any]:
    """Throughput of one polymask objective through the real training step."""
    trainer = polymask_trainer(objective, modality, preset, batch_size, max_len, precision, workdir)
    return {"system": f"polymask {objective}", "precision": _precision_name(trainer.device, precision),
            **_time_steps(lambda: train_step(trainer), warmup, steps)}


def bench_hf_bert(trainer_like: Trainer, batch_size: int, max_len: int, precision: str, warmup: int,
                  steps: int, seed: int = 0) -> dict[str, Any]:
    """Throughput of HF ``BertForMaskedLM`` with the same dimensions and data."""
    from transformers import BertConfig, BertForMaskedLM, DataCollatorForLanguageModeling

    from polymask.tokenization import to_hf

    encoder_config = trainer_like.encoder.config
    torch.manual_seed(seed)
    model = BertForMaskedLM(BertConfig(
        vocab_size=trainer_like.tokenizer.get_vocab_size(), hidden_size=encoder_config.d_model,
        num_hidden_layers=encoder_config.n_layers, num_attention_heads=encoder_config.n_heads,
        intermediate_size=encoder_config.d_ff, max_position_embeddings=max_len)).to(trainer_like.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    collator = DataCollatorForLanguageModeling(to_hf(trainer_like.tokenizer), mlm_probability=0.15)
    store = trainer_like.batches.store
    order = np.random.default_rng(seed).permutation(len(store))
    cursor = {"at": 0}

    def step() -> tuple[int, int]:
        start = cursor["at"] % (len(order) - batch_size)
        cursor["at"] += batch_size
        batch = collator([{"input_ids": store[int(i)].tolist()} for i in order[start:start + batch_size]])
        batch = {key: value.to(trainer_like.device) for key, value in batch.items()}
        with autocast(trainer_like.device, precision):
            loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return int(batch["attention_mask"].sum()), batch["input_ids"].numel()

    return {"system": "HF BertForMaskedLM", "precision": _precision_name(trainer_like.device, precision),
            **_time_steps(step, warmup, steps)}


def _precision_name(device: torch.device, precision: str) -> str:
    from polymask.training.runtime import native_bf16

    return "bf16" if precision == "bf16" or (precision == "auto" and native_bf16(device)) else "fp32"


def run_bench(modality: str = "smiles", preset: str = "mini", batch_size: int = 32, max_len: int = 128,
              objectives: tuple[str, ...] = ("mlm",), warmup: int = 5, steps: int = 40,
              out: Path | None = None) -> list[dict[str, Any]]:
    """Measure every system; write ``<out>/<modality>-<preset>-b<batch>-l<len>.{md,json}``."""
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for objective in objectives:
            for precision in ("auto", "fp32"):
                rows.append(bench_polymask(objective, modality, preset, batch_size, max_len, precision,
                                           warmup, steps, Path(workdir)))
        reference = Trainer(build_run_config({
            "modality": modality, "objective": "mlm", "model": {"preset": preset}, "data": {"max_len": max_len},
            "out": str(Path(workdir) / "hf"), "train": {"batch_size": batch_size, "progress": False}}))
        for precision in ("fp32", "bf16"):
            rows.append(bench_hf_bert(reference, batch_size, max_len, precision, warmup, steps))
    baseline = next(r for r in rows if r["system"].startswith("HF") and r["precision"] == "fp32")
    for row in rows:
        row["vs_hf_fp32"] = row["real_tokens_per_s"] / baseline["real_tokens_per_s"]
    if out is not None:
        write_bench(rows, out, modality, preset, batch_size, max_len, steps)
    if len(objectives) > 1:
        from polymask.bench_objectives import compare_objectives, write_comparison

        comparison = compare_objectives(objectives, modality, preset, batch_size, max_len, warmup, steps)
        if out is not None:
            write_comparison(comparison, out, machine())
    return rows


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else f"CPU: {cpu}"
    return {"device": device, "threads": torch.get_num_threads(), "torch": torch.__version__,
            "python": platform.python_version()}


def write_bench(rows: list[dict[str, Any]], out: Path, modality: str, preset: str, batch_size: int,
                max_len: int, steps: int) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"{modality}-{preset}-b{batch_size}-l{max_len}"
    info = {"modality": modality, "preset": preset, "batch_size": batch_size, "max_len": max_len,
            "timed_steps": steps, **machine()}
    stem.with_suffix(".json").write_text(json.dumps({"setup": info, "rows": rows}, indent=1))
    lines = [f"# polymask bench: {modality}, preset {preset}, batch {batch_size}, max length {max_len}", "",
             ", ".join(f"{k}: {v}" for k, v in info.items()), "",
             "| system | precision | real tokens/s | step (ms, median) | padding | vs HF fp32 |",
             "|---|---|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row['system']} | {row['precision']} | {row['real_tokens_per_s']:,.0f} | {row['step_ms']:.1f} "
                     f"| {row['padding_fraction']:.1%} | {row['vs_hf_fp32']:.2f}x |")
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return stem.with_suffix(".md")
