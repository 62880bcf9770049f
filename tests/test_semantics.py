"""``polymask analyze semantics`` end to end on tiny MLM and ExLM checkpoints."""
import gzip
import json
import math

from polymask.checkpoints.pretrained import read_checkpoint
from polymask.cli import main
from polymask.resources import builtin_dir
from polymask.training.trainer import train


def held_out_smiles(path, count=48):
    with gzip.open(builtin_dir("corpora") / "smiles" / "wehi_mols.smi.gz", "rt") as handle:
        path.write_text("".join(handle.readlines()[-count:]))
    return path


def test_semantics_compares_mlm_and_exlm_on_the_same_masks(tmp_path, make_config, capsys):
    runs = {}
    for objective in ("mlm", "exlm"):
        config = make_config("smiles", tmp_path / objective, max_steps=3)
        config["objective"] = {"name": objective}
        train(config)
        runs[objective] = tmp_path / objective
    data = held_out_smiles(tmp_path / "held_out.smi")
    out = tmp_path / "semantics"
    assert main(["analyze", "semantics", "--checkpoint", str(runs["mlm"]), "--checkpoint", str(runs["exlm"]),
                 "--data", str(data), "--out", str(out), "--top-k", "1,5,3"]) == 0
    report = json.loads((out / "semantics.json").read_text())
    assert (out / "semantics.png").stat().st_size > 10_000
    assert report["same_masked_positions"]
    vocab_size = read_checkpoint(runs["mlm"]).vocab_size
    mlm, exlm = report["results"]
    assert [mlm["objective"]["name"], exlm["objective"]["name"]] == ["mlm", "exlm"]
    assert mlm["masked_tokens"] == exlm["masked_tokens"] > 48
    for result in (mlm, exlm):
        accuracy = result["top_k_accuracy"]
        assert list(accuracy) == ["1", "3", "5"]
        assert 0 <= accuracy["1"] <= accuracy["3"] <= accuracy["5"] <= 1
        assert 0 < result["mean_entropy_nats"] <= math.log(vocab_size)
    assert "entropy" in capsys.readouterr().out
