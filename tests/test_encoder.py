"""The shared encoder: explicit positions, padding invariance, presets, 2D rotary positions."""
import pytest
import torch
from conftest import attention_outputs, differ

from polymask.model import PRESETS, Encoder, EncoderConfig


def encoder(**overrides):
    torch.manual_seed(0)
    return Encoder(EncoderConfig(preset="tiny", **overrides), vocab_size=50).eval()


def test_default_positions_equal_explicit_positions():
    model = encoder()
    ids = torch.randint(5, 50, (2, 12))
    positions = torch.arange(12).expand(2, -1)
    assert torch.allclose(model(ids), model(ids, position_ids=positions), atol=1e-6)


def test_padding_does_not_change_real_token_outputs():
    model = encoder()
    ids = torch.randint(5, 50, (1, 9))
    padded = torch.cat([ids, torch.zeros(1, 5, dtype=torch.long)], dim=1)
    mask = torch.cat([torch.ones(1, 9, dtype=torch.bool), torch.zeros(1, 5, dtype=torch.bool)], dim=1)
    assert torch.allclose(model(ids), model(padded, attention_mask=mask)[:, :9], atol=1e-5)


def test_outputs_depend_on_relative_positions_only():
    model = encoder()
    ids = torch.randint(5, 50, (1, 8))
    shifted = torch.arange(8).unsqueeze(0) + 100
    assert torch.allclose(model(ids), model(ids, position_ids=shifted), atol=1e-4)


def test_bf16_path_matches_fp32_on_cpu():
    model = encoder()
    ids = torch.randint(5, 50, (3, 10))
    mask = torch.ones(3, 10, dtype=torch.bool)
    mask[0, 7:] = False
    reference = model(ids, attention_mask=mask)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = model(ids, attention_mask=mask)
    assert (low.float() - reference)[mask].abs().max() < 0.1


def test_two_d_positions_with_zero_second_coordinate_leave_that_half_unrotated():
    model = encoder(rope_2d=True)
    ids = torch.randint(5, 50, (1, 6))
    one_d = torch.arange(6).unsqueeze(0)
    two_d = torch.stack([one_d, torch.zeros_like(one_d)], dim=-1)
    assert torch.allclose(model(ids, position_ids=one_d), model(ids, position_ids=two_d), atol=1e-6)
    other = torch.stack([one_d, torch.tensor([[0, 1, 2, 0, 0, 0]])], dim=-1)
    assert differ(attention_outputs(model, ids, position_ids=two_d), attention_outputs(model, ids, position_ids=other))


def test_embedding_norm_is_on_by_default_and_normalises_the_token_embeddings():
    model = encoder()
    assert EncoderConfig().embed_norm and isinstance(model.embed_norm, torch.nn.LayerNorm)
    states = model(torch.randint(5, 50, (2, 7)), output_hidden_states=True)
    assert torch.allclose(states[0].pow(2).mean(dim=-1), torch.ones(2, 7), atol=0.05)
    assert isinstance(encoder(embed_norm=False).embed_norm, torch.nn.Identity)


def test_hidden_states_per_layer():
    states = encoder()(torch.randint(5, 50, (1, 4)), output_hidden_states=True)
    assert len(states) == PRESETS["tiny"]["n_layers"] + 1


@pytest.mark.parametrize("preset, parameters", [("tiny", 0.1e6), ("mini", 3.2e6), ("base", 85e6)])
def test_presets_have_the_expected_size(preset, parameters):
    config = EncoderConfig(preset=preset)
    blocks = Encoder(config, vocab_size=8).blocks
    count = sum(p.numel() for p in blocks.parameters())
    assert abs(count - parameters) / parameters < 0.1


def test_preset_can_be_overridden_and_bad_heads_rejected():
    assert EncoderConfig(preset="mini", n_layers=2).n_layers == 2
    with pytest.raises(ValueError, match="head dimension"):
        EncoderConfig(preset="tiny", n_heads=3)
