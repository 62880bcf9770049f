"""MLM: sparse prediction equals the dense computation; only encoder weights survive fine-tuning."""
import torch
import torch.nn.functional as F

from polymask.data.batching import collate
from polymask.model import Encoder, EncoderConfig
from polymask.objectives.mlm import MaskedLM, MLMConfig
from polymask.tokenization import SpecialIds

SPECIALS = SpecialIds(0, 1, 2, 3, 4)


def make_mlm():
    torch.manual_seed(0)
    return MaskedLM(MLMConfig(), Encoder(EncoderConfig(preset="tiny"), 40), SPECIALS).eval()


def sample_batch():
    rows = [[2, *torch.randint(5, 40, (n,)).tolist(), 3] for n in (10, 14, 7)]
    return collate(rows, pad_id=0)


def test_sparse_prediction_loss_equals_dense_loss():
    model = make_mlm()
    batch = sample_batch()
    sparse = model(batch, torch.Generator().manual_seed(3))
    corruption = model.corrupt(batch, torch.Generator().manual_seed(3))
    selected = corruption.selected
    hidden = model.encoder(corruption.input_ids, attention_mask=batch.attention_mask)
    dense_logits = model.head(hidden)  # every position, then the loss keeps the selected ones
    labels = batch.input_ids.masked_fill(~selected, -100)
    dense = F.cross_entropy(dense_logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
    assert torch.allclose(sparse.loss, dense, atol=1e-6)
    assert sparse.predictions == int(selected.sum())


def test_output_projection_is_tied_to_the_input_embedding():
    model = make_mlm()
    names = dict(model.named_parameters())
    assert "head.dense.weight" in names and not any(n.startswith("head.embedding") for n in names)
    model.encoder.embed.weight.data.zero_()
    hidden = torch.randn(2, model.encoder.config.d_model)
    assert torch.allclose(model.head(hidden), model.head.bias.expand(2, -1))


def test_gradients_reach_the_encoder():
    model = make_mlm().train()
    model(sample_batch(), torch.Generator().manual_seed(0)).loss.backward()
    assert model.encoder.embed.weight.grad.abs().sum() > 0
    assert model.encoder.blocks[0].attn.qkv.weight.grad.abs().sum() > 0



def test_absent_tokens_start_with_a_low_output_bias_in_every_head():
    import numpy as np

    model = make_mlm()
    counts = np.zeros(40, dtype=np.int64)
    counts[[2, 3, *range(5, 20)]] = 7
    assert model.lower_absent_tokens(counts, -10.0) == 20  # ids 20..39; the specials 0, 1 and 4 are left alone
    assert torch.equal(model.head.bias[20:], torch.full((20,), -10.0)) and not model.head.bias[:20].any()


def test_a_run_lowers_the_bias_of_the_tokens_its_corpus_never_holds(tmp_path):
    import numpy as np

    from polymask.checkpoints.pretrained import read_checkpoint
    from polymask.training.trainer import train

    train({"modality": {"name": "smiles"}, "objective": {"name": "maelm"}, "model": {"preset": "tiny"},
           "data": {"max_len": 64}, "train": {"max_steps": 1, "lr": 1e-9, "warmup_steps": 1, "progress": False},
           "out": str(tmp_path / "run")})
    bias = read_checkpoint(tmp_path / "run").weights["head.bias"].numpy()
    # the built-in SMILES vocabulary spells any bracket atom (504 tokens); its corpus holds about 100 of them
    assert (bias < -9.9).sum() > 300 and (np.abs(bias) < 1e-3).sum() > 80


def test_every_objective_is_built_with_its_shape_bound():
    from polymask.objectives import OBJECTIVES, build_objective

    for name in OBJECTIVES.names():
        config = OBJECTIVES.get(name).Config()
        encoder = Encoder(EncoderConfig(preset="tiny", **OBJECTIVES.get(name).encoder_overrides(config)), 40)
        objective = build_objective(config, encoder, SPECIALS, mask_span=3, shape_multiple=16)
        assert (type(objective), objective.mask_span, objective.shape_multiple) == (OBJECTIVES.get(name), 3, 16)


def test_one_rule_rounds_shapes():
    from polymask.data.batching import round_up
    from polymask.objectives.visible import compact_visible

    assert [round_up(n, 16) for n in (1, 16, 17)] == [16, 16, 32] and round_up(7, 1) == 7
    assert collate([[2, 5, 3]], pad_id=0, multiple=16).input_ids.shape == (1, 16)
    visible = torch.tensor([[True] * 5 + [False] * 30])
    assert compact_visible(torch.arange(35)[None], visible, 0, multiple=16).input_ids.shape == (1, 16)
