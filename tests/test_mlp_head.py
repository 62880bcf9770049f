"""``head: mlp``: a hidden layer before the output layer of a sequence-level model (chemprop's feed-forward head),
saved and restored with its model, and refused where it cannot be reproduced (export; span tasks: in
test_extra_features)."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import polymask
from polymask.cli import main
from polymask.encoder_config import EncoderConfig
from polymask.model.encoder import Encoder
from polymask.model.heads import SequencePredictor
from tests.conftest import one_line_error


def test_an_mlp_head_has_a_hidden_layer_as_wide_as_the_encoder_over_the_pooled_vector_and_features():
    encoder = Encoder(EncoderConfig(d_model=32, n_layers=1, n_heads=2, d_ff=64), vocab_size=20)
    linear = SequencePredictor(encoder, 3, n_features=5)
    mlp = SequencePredictor(encoder, 3, n_features=5, head="mlp")
    assert isinstance(linear.head, nn.Linear) and linear.head.in_features == 37
    first, _, _, output = mlp.head
    assert (first.in_features, first.out_features, output.in_features, output.out_features) == (37, 32, 32, 3)
    assert torch.count_nonzero(output.bias) == 0
    ids = torch.randint(5, 20, (4, 7))
    assert mlp.eval()(ids, None, torch.randn(4, 5)).shape == (4, 3)


@pytest.mark.integration
@pytest.mark.usefixtures("one_torch_thread")
def test_a_model_with_an_mlp_head_predicts_after_loading_and_refuses_export(tiny_smiles_run, tmp_path, capsys):
    out = tmp_path / "esol"
    assert main(["finetune", "--task", "moleculenet/esol", "--checkpoint", str(tiny_smiles_run), "--epochs", "2",
                 "--lr", "3e-3", "--max-train-examples", "120", "--max-valid-examples", "40",
                 "--max-test-examples", "40", "--max-len", "64", "--set", "head=mlp", "--out", str(out), "--quiet"]) == 0
    report = json.loads((out / "results.json").read_text())
    model_dir = out / report["cells"][0]["model_dir"]
    model = polymask.load_model(model_dir)
    assert isinstance(model.network.head, nn.Sequential)
    predicted = model.predict(["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1"])
    assert np.isfinite(predicted.iloc[:, 0]).all() and predicted.iloc[:, 0].nunique() == 3
    capsys.readouterr()
    code = main(["export", "--checkpoint", str(model_dir), "--out", str(tmp_path / "hf")])
    one_line_error(capsys, code, "an mlp head", "polymask predict")


def test_settings_saved_by_an_earlier_release_load_and_wrong_ones_name_the_file():
    from polymask.checkpoints.finetuned_meta import read_finetuned_meta
    from polymask.errors import CheckpointError

    path = Path(__file__).parent / "data" / "finetuned" / "esol.json"
    saved = json.loads(path.read_text())
    earlier = {**saved["finetune"], "task_lr": {}}
    earlier.pop("task_settings"), earlier.pop("head")
    assert read_finetuned_meta({**saved, "finetune": earlier}, path).finetune.head == "linear"
    with pytest.raises(CheckpointError, match=f"^{path}: finetune.epochs: Input should be greater than or equal to 1"):
        read_finetuned_meta({**saved, "finetune": {**earlier, "epochs": 0}}, path)


def test_compare_refuses_an_mlp_head_for_span_tasks_before_it_pretrains(tmp_path):
    from polymask.compare.budget import parse_budget
    from polymask.compare.run import run_compare
    from polymask.errors import ConfigError

    with pytest.raises(ConfigError, match="head mlp: .* squad/v1 predicts spans"):
        run_compare("text", ["mlm"], parse_budget("10steps"), tmp_path / "out", {}, [0], 1, ["squad/v1"],
                    {"head": "mlp"})
    assert not (tmp_path / "out").exists()
