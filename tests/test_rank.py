"""The representation-rank analysis: the rank functions on matrices of known rank, and the command end to end."""
import csv
import json

import pytest
import torch

from polymask.cli import main
from polymask.effective_rank import entropy_rank, singular_values, variance_rank
from polymask.resources import builtin_dir
from polymask.training.trainer import train

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end


def test_ranks_of_matrices_of_known_rank():
    torch.manual_seed(0)
    for rank in (1, 3, 10):
        low_rank = torch.randn(500, rank, dtype=torch.float64) @ torch.randn(rank, 32, dtype=torch.float64)
        values = singular_values(low_rank)
        assert variance_rank(values, tau=1.0) == rank
        assert variance_rank(values, tau=0.9) <= rank
        assert rank - 1 < entropy_rank(values) <= rank + 1e-6
    isotropic = torch.linalg.qr(torch.randn(64, 64)).Q * 10  # equal singular values after centring, nearly
    assert abs(entropy_rank(torch.ones(16)) - 16) < 1e-9
    assert variance_rank(torch.ones(16), tau=0.5) == 8
    assert variance_rank(singular_values(isotropic), tau=0.9) > 50
    assert variance_rank(torch.zeros(4)) == 0 and entropy_rank(torch.zeros(4)) == 0.0


def test_analyze_rank_compares_mlm_and_maelm(tmp_path, make_config, capsys):
    runs = []
    for objective in ("mlm", "maelm"):
        config = make_config("smiles", tmp_path / objective, max_steps=3)
        config["objective"] = {"name": objective}
        train(config)
        runs.append(tmp_path / objective)
    out = tmp_path / "rank"
    data = builtin_dir("corpora") / "smiles" / "wehi_mols.smi.gz"
    args = ["analyze", "rank", "--checkpoint", str(runs[0]), "--checkpoint", str(runs[1]),
            "--data", str(data), "--max-sequences", "64", "--out", str(out)]
    assert main(args) == 0
    report = json.loads((out / "rank.json").read_text())
    kinds = [sorted({row["kind"] for row in result["layers"]}) for result in report["results"]]
    assert kinds == [["mask_tokens", "masked_real", "unmasked"], ["unmasked", "visible_only"]]
    layers = {row["layer"] for row in report["results"][0]["layers"]}
    assert layers == {0, 1, 2}  # embeddings + two blocks of the tiny encoder
    for result in report["results"]:
        counts = {row["kind"]: row["tokens"] for row in result["layers"] if row["layer"] == 0}
        assert counts["unmasked"] == counts.get("masked_real", counts.get("visible_only"))
        for row in result["layers"]:
            identical = row["kind"] == "mask_tokens" and row["layer"] == 0  # one shared [MASK] embedding
            assert row["variance_rank"] == 0 if identical else 0 < row["variance_rank"] <= 64
    rows = list(csv.DictReader((out / "rank.csv").open()))
    assert len(rows) == 3 * 3 + 2 * 3
    assert (out / "rank.png").stat().st_size > 0 and "visible_only" in (out / "rank.md").read_text()
    assert "| layer 0 |" in capsys.readouterr().out
