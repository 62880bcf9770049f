"""ExLM end to end: it trains on real SMILES, and its checkpoint fine-tunes as a plain encoder."""
import math

import pytest
import torch

from polymask.checkpoints.pretrained import read_checkpoint
from polymask.config import build_run_config
from polymask.data.batching import collate
from polymask.model import Encoder, EncoderConfig
from polymask.objectives.exlm import ExLM, ExLMConfig
from polymask.tokenization import SpecialIds
from polymask.training.trainer import Trainer, train


def exlm_config(make_config, out, max_steps=25, **options):
    config = make_config("smiles", out, max_steps=max_steps, eval_batches=4)
    config["objective"] = {"name": "exlm", **options}
    return config


@pytest.mark.integration
@pytest.mark.parametrize("options", [{}, {"transitions": "sparse", "rope_2d": False, "k": 2}])
def test_validation_loss_falls_on_builtin_smiles(options, tmp_path, make_config):
    trainer = Trainer(build_run_config(exlm_config(make_config, tmp_path / "run", **options)))
    assert trainer.encoder.config.rope_2d == options.get("rope_2d", True)
    before = trainer.evaluate()
    summary = trainer.fit()
    assert summary["final_val_loss"] < before["val_loss"] - 0.5, (before, summary["final_val_loss"])
    assert 0 <= summary["final_val_accuracy"] <= 1


def test_checkpoint_fine_tunes_as_a_plain_encoder(tmp_path, make_config):
    train(exlm_config(make_config, tmp_path / "run", max_steps=3))
    checkpoint = read_checkpoint(tmp_path / "run")
    assert any(name.startswith("transitions.") for name in checkpoint.weights)
    encoder = checkpoint.build_encoder().eval()
    assert encoder.config.rope_2d  # same rotary frequencies as in pretraining
    assert not any("transitions" in name or "head" in name for name in encoder.state_dict())
    ids = torch.tensor([[2, 10, 11, 12, 13, 3]])
    no_second_coordinate = torch.stack((torch.arange(6), torch.zeros(6, dtype=torch.long)), dim=-1)[None]
    plain = encoder(ids)
    assert torch.allclose(plain, encoder(ids, position_ids=no_second_coordinate), atol=1e-6)
    objective = checkpoint.build_objective()
    assert torch.equal(objective.encoder.embed.weight, encoder.embed.weight)
    assert torch.equal(objective.transitions.query.weight, checkpoint.weights["transitions.query.weight"])


def test_accuracy_counts_masked_tokens_along_the_viterbi_path():
    torch.manual_seed(0)
    model = ExLM(ExLMConfig(), Encoder(EncoderConfig(preset="tiny", rope_2d=True), 40), SpecialIds(0, 1, 2, 3, 4))
    batch = collate([[2, *range(5, 25), 3], [2, *range(30, 38), 3]], pad_id=0)
    selected = model.select(batch, torch.Generator().manual_seed(1))
    output = model(batch, torch.Generator().manual_seed(1))
    assert output.predictions == int(selected.sum())
    aligned = model.aligned_log_probs(model.score(batch, selected))
    assert aligned.shape == (output.predictions, 40)
    assert int(output.correct) == int((aligned.argmax(dim=-1) == batch.input_ids[selected]).sum())


def test_encoder_must_match_the_rope_setting():
    with pytest.raises(ValueError, match="rope_2d"):
        ExLM(ExLMConfig(), Encoder(EncoderConfig(preset="tiny"), 40), SpecialIds(0, 1, 2, 3, 4))


def test_one_token_group_attention_gives_k_identical_keys_the_weight_of_one():
    from polymask.model.layers import attention, key_mask

    torch.manual_seed(0)
    q, a, b, c = torch.randn(4, 1, 1, 1, 8).unbind(0)
    values = torch.randn(3, 8)
    expanded_keys = torch.cat([a, b, c.expand(1, 1, 4, 8)], dim=2)
    expanded_values = torch.cat([values[:2], values[2:].expand(4, 8)])[None, None]
    bias = torch.tensor([[0.0, 0.0, *[-math.log(4)] * 4]])
    one_token = attention(q, torch.cat([a, b, c], dim=2), values[None, None], None, 0.0)
    corrected = attention(q, expanded_keys, expanded_values, key_mask(None, bias), 0.0)
    assert torch.allclose(corrected, one_token, atol=1e-6)
    assert not torch.allclose(attention(q, expanded_keys, expanded_values, None, 0.0), one_token, atol=1e-3)


def test_next_group_bias_makes_the_initial_alignment_follow_the_groups():
    torch.manual_seed(0)
    batch = collate([[2, *range(5, 30), 3], [2, *range(30, 45), 3]], pad_id=0)
    for bias, follows in ((5.0, True), (0.0, False)):
        model = ExLM(ExLMConfig(next_group_bias=bias), Encoder(EncoderConfig(preset="tiny", rope_2d=True), 60),
                     SpecialIds(0, 1, 2, 3, 4))
        selected = model.select(batch, torch.Generator().manual_seed(2))
        scores = model.score(batch, selected)
        k, states = model.config.k, scores.links.shape[1]
        group = torch.arange(states) // k
        into_next_group = scores.links.exp() * (group[None, :] == group[:, None] + 1)
        real = scores.expansion.state_mask & (group < (scores.expansion.target_lengths[:, None] - 1))
        share = into_next_group.sum(dim=-1)[real].mean()
        path, _ = model.aligned_states(scores)
        on_groups = bool(((path // k) == torch.arange(path.shape[1]))[scores.expansion.target_mask].all())
        assert (share > 0.8) == follows and on_groups == follows, (bias, float(share))
