"""``polymask bench``: training throughput of polymask objectives next to HF ``BertForMaskedLM``.

Every row runs in a fresh process (spawned, so peak memory is its own) on the same data (a
modality's built-in corpus, or the files given), the same encoder dimensions and batch size. polymask uses its own
pipeline (length-bucketed batches, sparse prediction); HF uses ``DataCollatorForLanguageModeling``
with dynamic padding over shuffled batches, as its Trainer does by default. Reported per row: real
(non-padding) tokens/s, step time, padding fraction, encoder time and input positions per step,
FLOPs per real token and model FLOPs utilisation against the matmul peak measured in this run, and
peak memory; written as Markdown and JSON.
"""
from __future__ import annotations

import multiprocessing
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from polymask.bench.contenders import BenchSetup, hf_bert_contender, polymask_contender
from polymask.bench.measure import matmul_peak, measure
from polymask.jsonio import make_dir, write_json, write_text
from polymask.plugins import load_plugins
from polymask.runtime import machine, native_bf16, precision_used, resolve_device


@dataclass(frozen=True)
class RowSpec:
    """One bench row: ``contender`` is "polymask" or "hf"."""

    contender: str
    objective: str
    precision: str
    mask_ratio: float

    @property
    def label(self) -> str:
        return f"polymask {self.objective}" if self.contender == "polymask" else "HF BertForMaskedLM"


def row_specs(objectives: tuple[str, ...], mask_ratios: tuple[float, ...], auto_precision: str) -> list[RowSpec]:
    """Each objective at each mask ratio (at ``auto_precision``, what ``auto`` resolved to once for the whole
    bench), the first objective and HF in fp32, HF in bf16."""
    specs = [RowSpec("polymask", objective, auto_precision, ratio)
             for objective in objectives for ratio in mask_ratios]
    specs.append(RowSpec("polymask", objectives[0], "fp32", mask_ratios[0]))
    specs += [RowSpec("hf", "mlm", precision, mask_ratios[0]) for precision in ("fp32", "bf16")]
    return specs


def measure_row(spec: RowSpec, setup: BenchSetup, warmup: int, steps: int, flop_steps: int) -> dict[str, Any]:
    """Build and measure one row (run in a fresh process)."""
    with tempfile.TemporaryDirectory() as workdir:
        if spec.contender == "hf":
            contender = hf_bert_contender(setup, spec.precision, Path(workdir), spec.mask_ratio)
        else:
            contender = polymask_contender(spec.objective, setup, spec.precision, Path(workdir), spec.mask_ratio)
        # "system": the contender's label, under the column name that results files have always used
        row = {"system": spec.label, "objective": spec.objective, "precision": spec.precision,
               "mask_ratio": spec.mask_ratio}
        return {**row, **measure(contender, warmup, steps, flop_steps)}


def run_bench(setup: BenchSetup, objectives: tuple[str, ...], warmup: int, steps: int, out: Path | None,
              mask_ratios: tuple[float, ...], flop_steps: int, device: str,
              plugins: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Measure every row; write ``<out>/<modality>-<preset>-b<batch>-l<len>.{md,json}``. The settings' defaults are
    ``polymask bench``'s (``cli.py``: a run config's where the setting is one); ``plugins`` are imported in each
    row's process too (a custom modality or objective)."""
    target = resolve_device(device)
    peaks = {"fp32": matmul_peak(target, torch.float32), "bf16": matmul_peak(target, torch.bfloat16)}
    native = {"fp32": True, "bf16": native_bf16(target)}
    pool = multiprocessing.get_context("spawn").Pool(1, maxtasksperchild=1, initializer=load_plugins,
                                                     initargs=(list(plugins),))
    try:
        rows = [pool.apply(measure_row, (spec, setup, warmup, steps, flop_steps))
                for spec in row_specs(objectives, mask_ratios, precision_used(target, "auto"))]
    finally:  # let the worker end on its own: terminating it mid-way leaks its semaphores (a warning at exit)
        pool.close()
        pool.join()
    baseline = next(r for r in rows if r["system"].startswith("HF") and r["precision"] == "fp32")
    for row in rows:
        row["vs_hf_fp32"] = row["real_tokens_per_s"] / baseline["real_tokens_per_s"]
        # MFU only against a hardware peak: where bf16 is emulated (no AVX512-BF16/AMX), small products beat the
        # square-product "peak" and the ratio means nothing
        row["mfu"] = (row["flops_per_real_token"] * row["real_tokens_per_s"] / peaks[row["precision"]]
                      if native[row["precision"]] else None)
    if out is not None:
        write_bench(rows, out, setup, steps, peaks)
    if len(objectives) > 1:
        from polymask.bench.objectives import compare_objectives, write_comparison

        comparison = compare_objectives(objectives, setup, warmup, steps)
        if out is not None:
            write_comparison(comparison, setup, out, machine())
    return rows


def write_bench(rows: list[dict[str, Any]], out: Path, setup: BenchSetup, steps: int,
                peaks: dict[str, float]) -> Path:
    make_dir(out)
    stem = out / setup.stem
    info = {**setup.describe(), "timed_steps": steps, **machine(),
            "matmul_peak_gflops": {name: round(value / 1e9, 1) for name, value in peaks.items()}}
    write_json(stem.with_suffix(".json"), {"setup": info, "rows": rows})
    lines = [f"# polymask bench: {setup.modality}, preset {setup.preset}, batch {setup.batch_size}, max length "
             f"{setup.max_len}", "",
             ", ".join(f"{k}: {v}" for k, v in info.items()), "",
             "| system | mask ratio | precision | real tokens/s | step (ms, median) | padding | encoder ms/step "
             "| encoder/input positions | GFLOPs/step | MFU | peak memory (MiB) | vs HF fp32 |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        flops_per_step = row["flops_per_real_token"] * row["real_tokens_per_s"] * row["step_ms"] / 1000
        lines.append(
            f"| {row['system']} | {row['mask_ratio']:g} | {row['precision']} | {row['real_tokens_per_s']:,.0f} "
            f"| {row['step_ms']:.1f} | {row['padding_fraction']:.1%} | {row['encoder_ms_per_step']:.1f} "
            f"| {row['encoder_positions_per_step'] / row['input_positions_per_step']:.2f} | {flops_per_step / 1e9:.1f} "
            f"| {'n/a' if row['mfu'] is None else format(row['mfu'], '.1%')} | {row['peak_memory_mib']:,.0f} | {row['vs_hf_fp32']:.2f}x |")
    lines += ["", "Encoder time is the encoder module's forward pass (MAE-LM: the compacted visible tokens; ExLM: the "
              "expanded sequence); encoder/input positions compares the encoder's input size with the batch's. "
              f"MFU divides counted FLOPs/s by the matmul peak measured in this run (n/a for a precision this device "
              f"emulates); peak memory is the "
              f"{rows[0]['memory_kind']} of the row's own process during the timed steps."]
    write_text(stem.with_suffix(".md"), "\n".join(lines) + "\n")
    print("\n".join(lines))
    return stem.with_suffix(".md")
