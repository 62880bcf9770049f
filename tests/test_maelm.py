"""MAE-LM: the encoder sees only visible tokens at their original positions; a shallow decoder reconstructs."""
import pytest
import torch

from polymask.checkpoints.pretrained import read_checkpoint
from polymask.config import build_run_config
from polymask.data.batching import collate
from polymask.model import Encoder, EncoderConfig
from polymask.objectives.base import Corruption
from polymask.objectives.maelm import MAELM, MAELMConfig
from polymask.objectives.visible import compact_visible, scatter_back
from polymask.tokenization import SpecialIds
from polymask.training.trainer import Trainer, train

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end

SPECIALS = SpecialIds(0, 1, 2, 3, 4)


def tiny_maelm(**options) -> MAELM:
    torch.manual_seed(0)
    return MAELM(MAELMConfig(**options), Encoder(EncoderConfig(preset="tiny", n_layers=3), 40), SPECIALS).eval()


def ragged_batch():
    return collate([[2, *range(5, 25), 3], [2, *range(30, 38), 3]], pad_id=0)


def test_compaction_keeps_visible_tokens_in_order_at_their_original_positions():
    ids = torch.tensor([[2, 10, 11, 12, 13, 3], [2, 20, 21, 3, 0, 0]])
    visible = torch.tensor([[1, 0, 1, 1, 0, 1], [1, 1, 0, 1, 0, 0]], dtype=torch.bool)
    packed = compact_visible(ids, visible, pad_id=0)
    assert packed.input_ids.tolist() == [[2, 11, 12, 3], [2, 20, 3, 0]]
    assert packed.position_ids.tolist() == [[0, 2, 3, 5], [0, 1, 3, 0]]
    assert packed.attention_mask.tolist() == [[True] * 4, [True, True, True, False]]
    hidden = packed.input_ids[..., None].float()
    full = scatter_back(hidden, packed, torch.tensor([-1.0]), 6)[..., 0]
    assert full.tolist() == [[2, -1, 11, 12, -1, 3], [2, 20, -1, 3, -1, -1]]


def test_encoder_on_the_compacted_input_equals_it_with_explicit_positions():
    model = tiny_maelm()
    batch = ragged_batch()
    selected = model.select(batch, torch.Generator().manual_seed(3))
    packed = compact_visible(batch.input_ids, batch.attention_mask & ~selected, SPECIALS.pad)
    compacted = model.encoder(packed.input_ids, attention_mask=packed.attention_mask, position_ids=packed.position_ids)
    for row in range(2):
        keep = (batch.attention_mask & ~selected)[row]
        ids = batch.input_ids[row][keep][None]
        alone = model.encoder(ids, position_ids=keep.nonzero()[:, 0][None])
        assert torch.allclose(compacted[row, :ids.shape[1]], alone[0], atol=1e-5)


def test_removed_positions_receive_no_encoder_computation():
    model = tiny_maelm(mask_ratio=0.4)
    batch = ragged_batch()
    selected = model.select(batch, torch.Generator().manual_seed(5))
    seen = []
    model.encoder.register_forward_hook(lambda module, args, kwargs, out: seen.append(kwargs.get("input_ids", args[0] if args else None)), with_kwargs=True)
    logits = model.predict(batch, Corruption.all_masked(batch.input_ids, selected, SPECIALS.mask))
    (encoder_ids,) = seen
    assert encoder_ids.shape[1] == int((batch.attention_mask & ~selected).sum(dim=1).max()) < batch.input_ids.shape[1]
    assert not (encoder_ids == SPECIALS.mask).any()
    changed = batch.input_ids.masked_fill(selected, 7)  # other tokens at removed positions change nothing
    corruption = Corruption.all_masked(changed, selected, SPECIALS.mask)
    assert torch.equal(model.predict(type(batch)(changed, batch.attention_mask), corruption), logits)


def test_loss_covers_removed_positions_only():
    model = tiny_maelm()
    batch = ragged_batch()
    output = model(batch, torch.Generator().manual_seed(1))
    selected = model.select(batch, torch.Generator().manual_seed(1))
    assert output.predictions == int(selected.sum())
    output.loss.backward()
    assert model.encoder.embed.weight.grad[SPECIALS.mask].abs().sum() > 0  # the shared [MASK] embedding learns


def test_decoder_depth_width_and_tied_head():
    model = tiny_maelm()
    assert len(model.decoder.blocks) == 1  # a third of 3 encoder layers
    assert model.head.embedding[0] is model.encoder.embed
    narrow = tiny_maelm(decoder_width=32, decoder_layers=2)
    assert len(narrow.decoder.blocks) == 2 and narrow.decoder.project_in.out_features == 32
    batch = ragged_batch()
    corruption = Corruption.all_masked(batch.input_ids, batch.input_ids > 10, SPECIALS.mask)
    assert narrow.predict(batch, corruption).shape[-1] == 40


@pytest.mark.parametrize("modality", ["smiles", "dna", "text"])
def test_validation_loss_falls_on_builtin_data(modality, tmp_path, make_config):
    config = make_config(modality, tmp_path / "run", max_steps=25, eval_batches=4)
    config["objective"] = {"name": "maelm", "mask_ratio": 0.3}
    trainer = Trainer(build_run_config(config))
    before = trainer.evaluate()
    summary = trainer.fit()
    assert summary["final_val_loss"] < before["val_loss"] - 0.3, (before, summary["final_val_loss"])


def test_checkpoint_fine_tunes_without_decoder_weights(tmp_path, make_config):
    config = make_config("smiles", tmp_path / "run", max_steps=3)
    config["objective"] = {"name": "maelm"}
    train(config)
    checkpoint = read_checkpoint(tmp_path / "run")
    assert any(name.startswith("decoder.") for name in checkpoint.weights)
    encoder = checkpoint.build_encoder()
    assert not any("decoder" in name or "head" in name for name in encoder.state_dict())
    assert torch.equal(encoder.embed.weight, checkpoint.weights["encoder.embed.weight"])


def test_reference_like_decoder_adds_absolute_positions_and_normalises_its_input():
    """H3 of the objectives experiment: the reference's decoder has its own absolute positions and an input
    LayerNorm. Identical states at every position stay identical through a rotary decoder (attention over equal
    values returns that value), and differ through an absolute one."""
    width = tiny_maelm().encoder.config.d_model
    same = torch.randn(1, 1, width).expand(1, 6, width)
    rotary = tiny_maelm(decoder_layers=2).decoder(same, None)
    assert torch.allclose(rotary[0, 0], rotary[0, 5], atol=1e-5)
    model = tiny_maelm(decoder_layers=2, decoder_positions="absolute", decoder_input_norm=True,
                       decoder_max_positions=16)
    assert isinstance(model.decoder.input_norm, torch.nn.LayerNorm)
    absolute = model.decoder(same, None)
    assert not torch.allclose(absolute[0, 0], absolute[0, 5], atol=1e-3)
    with pytest.raises(ValueError, match="raise objective.decoder_max_positions"):
        model.decoder(torch.zeros(1, 17, width), None)
    assert model.lm_export is None and tiny_maelm().lm_export == "decoder"  # the exported decoder is the rotary one
