"""Objectives side by side (``polymask bench --objectives mlm,exlm``): relative step time.

Step time: one trainer per objective (same encoder size, data, batch size and seed, so step i of
every trainer draws the same batch), stepped in turn in one process — round r runs step r of each
objective, in an order rotated every round — so that load from other processes on the machine
hits them alike. Reported: median step time of each, and the median over rounds of the per-step
ratio to the first objective. For an objective that expands its input (``expand``, i.e. ExLM) the
encoder-length ratio L'/L of the timed batches is reported too: the floor of its relative cost.

Peak memory, FLOPs and encoder time of each objective are in the main ``polymask bench`` rows.
"""
from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from polymask.bench.contenders import BenchSetup, polymask_trainer, train_step
from polymask.jsonio import make_dir, write_json, write_text
from polymask.runtime import step_generator


def expansion_ratio(trainer: Any, rounds: int) -> dict[str, float] | None:
    """Encoder positions over input positions (L'/L) on the first ``rounds`` training batches."""
    model = trainer.objective
    if not hasattr(model, "expand"):
        return None
    expanded_real = real = expanded_padded = padded = 0
    store = trainer.batches.store
    for step, indices in enumerate(trainer.batches.sampler.epoch(0)[:rounds]):
        batch = trainer.device_batch([store[int(i)] for i in indices])
        expansion = model.expand(batch, model.corrupt(batch, step_generator(trainer.config.train.seed, step, 0)))
        expanded_real += int(expansion.input_ids.ne(trainer.specials.pad).sum())
        real += batch.real_tokens
        expanded_padded += expansion.input_ids.numel()
        padded += batch.padded_tokens
    return {"real": expanded_real / real, "padded": expanded_padded / padded}


def compare_objectives(objectives: tuple[str, ...], setup: BenchSetup, warmup: int, steps: int) -> dict[str, Any]:
    """Interleaved step times and L'/L ratios of each objective (precision ``auto``)."""
    with tempfile.TemporaryDirectory() as workdir:
        trainers = {name: polymask_trainer(name, setup, "auto", Path(workdir) / name) for name in objectives}
        durations: dict[str, list[float]] = {name: [] for name in objectives}
        for round_index in range(warmup + steps):
            shift = round_index % len(objectives)
            for name in objectives[shift:] + objectives[:shift]:
                start = time.perf_counter()
                train_step(trainers[name])
                if round_index >= warmup:
                    durations[name].append(time.perf_counter() - start)
        ratios = {name: expansion_ratio(trainer, warmup + steps) for name, trainer in trainers.items()}
    first = durations[objectives[0]]
    rows = []
    for name in objectives:
        relative = [d / f for d, f in zip(durations[name], first)]
        rows.append({"objective": name, "step_ms": 1000 * statistics.median(durations[name]),
                     "relative_step_time": statistics.median(relative),
                     "expansion_ratio": ratios[name]})
    return {"setup": {**setup.describe(), "warmup": warmup, "timed_rounds": steps, "precision": "auto"}, "rows": rows}


def write_comparison(comparison: dict[str, Any], setup: BenchSetup, out: Path, machine: dict[str, Any]) -> Path:
    """``<out>/<modality>-<preset>-b<batch>-l<len>-objectives.{json,md}``."""
    stem = out / "-".join([setup.stem, *(row["objective"] for row in comparison["rows"])])
    make_dir(out)
    write_json(stem.with_suffix(".json"), {**comparison, "machine": machine})
    first = comparison["rows"][0]["objective"]
    lines = [f"# polymask objectives side by side: {setup.modality}, preset {setup.preset}, "
             f"batch {setup.batch_size}, max length {setup.max_len}", "",
             ", ".join(f"{k}: {v}" for k, v in {**comparison["setup"], **machine}.items()), "",
             f"| objective | step (ms, median) | step time vs {first} (median of per-step ratios) "
             "| L'/L real (padded) |",
             "|---|---:|---:|---:|"]
    for row in comparison["rows"]:
        ratio = row["expansion_ratio"]
        floor = "-" if ratio is None else f"{ratio['real']:.2f} ({ratio['padded']:.2f})"
        lines.append(f"| {row['objective']} | {row['step_ms']:.1f} | {row['relative_step_time']:.2f}x | {floor} |")
    write_text(stem.with_suffix(".md"), "\n".join(lines) + "\n")
    print("\n".join(lines))
    return stem.with_suffix(".md")
