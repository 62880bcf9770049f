"""``polymask bench`` on a tiny preset: every row measured in its own process, and the report written."""
import json
import sys
import time

import pytest
import torch

from polymask.bench.measure import matmul_peak
from polymask.cli import main
from polymask.modalities import MODALITIES
from polymask.runtime import native_bf16

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end


def test_matmul_peak_is_a_plausible_rate():
    assert 1e8 < matmul_peak(torch.device("cpu"), torch.float32, max_size=256, seconds=0.05) < 1e14


def test_matmul_peak_stays_quick_where_bf16_is_emulated():
    start = time.perf_counter()
    matmul_peak(torch.device("cpu"), torch.bfloat16, seconds=0.05)
    assert time.perf_counter() - start < 30  # a full 2048 product alone takes ~90 s on an emulating CPU


def test_bench_reports_every_objective_mask_ratio_and_hf(tmp_path, capsys):
    args = ["bench", "--preset", "tiny", "--batch-size", "8", "--max-len", "64", "--objectives", "maelm",
            "--mask-ratios", "0.15,0.4", "--warmup", "1", "--steps", "3", "--flop-steps", "1", "--out", str(tmp_path)]
    assert main(args) == 0
    rows = json.loads((tmp_path / "smiles-tiny-b8-l64.json").read_text())["rows"]
    assert [(r["system"], r["mask_ratio"], r["precision"]) for r in rows] == [
        ("polymask maelm", 0.15, rows[0]["precision"]), ("polymask maelm", 0.4, rows[0]["precision"]),
        ("polymask maelm", 0.15, "fp32"), ("HF BertForMaskedLM", 0.15, "fp32"), ("HF BertForMaskedLM", 0.15, "bf16")]
    for row in rows:
        assert row["real_tokens_per_s"] > 0 and 0 <= row["padding_fraction"] < 1
        assert row["flops_per_real_token"] > 0 and row["peak_memory_mib"] > 0
        assert 0 < row["mfu"] < 1 if row["precision"] == "fp32" or native_bf16(torch.device("cpu")) else row["mfu"] is None
    seen = [r["encoder_positions_per_step"] / r["input_positions_per_step"] for r in rows]
    assert seen[1] < seen[0] < 0.95 and seen[1] < 0.75  # MAE-LM's encoder sees only the visible tokens
    assert seen[3] == 1.0  # HF's encoder runs on the whole (corrupted) batch
    table = (tmp_path / "smiles-tiny-b8-l64.md").read_text()
    assert "| MFU |" in table and "HF BertForMaskedLM" in table
    assert "real tokens/s" in capsys.readouterr().out


def test_bench_runs_a_plugin_modality_on_the_given_corpus(tmp_path):
    """A custom modality has no built-in corpus: bench imports the plugin in every row's process and trains on --data."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    args = ["bench", "--plugin", str(repo / "docs/examples/protein.py"), "--modality", "protein",
            "--data", str(repo / "tests/data/proteins.fasta"), "--preset", "tiny", "--batch-size", "4", "--max-len",
            "64", "--objectives", "mlm", "--warmup", "1", "--steps", "2", "--flop-steps", "1", "--out", str(tmp_path)]
    try:
        assert main(args) == 0
    finally:  # the plugin registered 'protein' in this process too: leave the registry as other tests expect it
        MODALITIES.unregister("protein")
        sys.modules.pop("protein", None)
    report = json.loads((tmp_path / "protein-tiny-b4-l64.json").read_text())
    assert report["setup"]["data"] == [str(repo / "tests/data/proteins.fasta")]
    assert [row["system"] for row in report["rows"]][:2] == ["polymask mlm", "polymask mlm"]
    assert all(row["real_tokens_per_s"] > 0 for row in report["rows"])


def test_bench_refuses_data_with_corpus_and_names_a_missing_file(tmp_path, capsys):
    assert main(["bench", "--corpus", str(tmp_path / "a.smi"), "--data", str(tmp_path / "b.smi")]) == 2
    assert "--corpus times the preparation of one file" in capsys.readouterr().err
    assert main(["bench", "--preset", "tiny", "--data", str(tmp_path / "missing.smi"), "--steps", "1",
                 "--out", str(tmp_path)]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "missing.smi" in error[0], error
