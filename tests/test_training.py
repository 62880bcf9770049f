"""Short real-data runs: the loss falls for every modality; the summary and checkpoint are complete."""
import json

import pytest
import torch

from polymask.config import build_run_config
from polymask.runtime import _cpu_bf16_faster
from polymask.training.trainer import Trainer, train

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end


@pytest.mark.parametrize("modality", ["smiles", "dna", "text"])
def test_validation_loss_falls_on_builtin_corpus(modality, tmp_path, make_config):
    config = build_run_config(make_config(modality, tmp_path / modality, max_steps=40, eval_batches=4,
                                          shape_multiple=1))  # length bucketing alone keeps padding small
    trainer = Trainer(config)
    before = trainer.evaluate()["val_loss"]
    summary = trainer.fit()
    assert summary["final_val_loss"] < before - 0.3, (before, summary["final_val_loss"])
    assert summary["steps"] == 40 and summary["tokens"] > 0
    assert summary["padding_fraction"] < 0.1


def test_seeded_weights_do_not_depend_on_the_precision_probe(tmp_path, make_config):
    """precision auto measures bf16 against fp32 on random matrices before the model is built: that probe must not
    draw from the global RNG, or the same seed gives other initial weights (as it did, silently changing every
    CPU run's initialisation when the probe moved before model construction)."""
    weights = {}
    for precision in ("fp32", "auto"):
        _cpu_bf16_faster.cache_clear()  # the probe runs in this construction, as in a fresh process
        config = build_run_config(make_config("dna", tmp_path / precision, precision=precision))
        trainer = Trainer(config)
        weights[precision] = {name: tensor.clone() for name, tensor in trainer.objective.state_dict().items()}
        trainer.close()
    assert weights["fp32"].keys() == weights["auto"].keys()
    assert all(torch.equal(weights["fp32"][name], weights["auto"][name]) for name in weights["fp32"])


def test_summary_files_and_checkpoint(tmp_path, make_config):
    summary = train(make_config("smiles", tmp_path / "run", max_steps=6))
    run = tmp_path / "run"
    assert json.loads((run / "summary.json").read_text())["steps"] == 6
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines if "loss" in line] == [1, 2, 3, 4, 5, 6]
    assert "val_loss" in lines[-1]
    checkpoint = run / "checkpoints" / "step-000006"
    assert summary["checkpoint"] == str(checkpoint)
    assert {p.name for p in checkpoint.iterdir()} >= {
        "model.safetensors", "optimizer.safetensors", "trainer_state.json", "polymask.json", "encoder.json",
        "tokenizer.json", "manifest.json"}
    skipped = (run / "skipped_records.jsonl").read_text().splitlines()
    assert summary["skipped_records"] == len(skipped) > 9  # 9 RDKit-invalid molecules, the rest too long


def test_streaming_corpus_trains_and_resumes_exactly(tmp_path, make_config):
    def config(out, **extra):
        raw = make_config("smiles", out, max_steps=8, **extra)
        raw["data"].update(streaming=True, max_val_records=32, bucket_pool=4)
        return raw

    full = train(config(tmp_path / "full"))
    assert full["steps"] == 8 and full["valid_sequences"] == 32 and full["skipped_records"] > 0
    train(config(tmp_path / "split", stop_after_steps=3))
    train(resume=tmp_path / "split")
    losses = lambda run: [json.loads(line)["loss"] for line in (run / "metrics.jsonl").read_text().splitlines()
                          if "loss" in json.loads(line)]
    assert losses(tmp_path / "split") == losses(tmp_path / "full")
