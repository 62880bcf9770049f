"""ExLM's degenerate case: with k = 1 it is an all-[MASK] MLM.

With one state per group the expanded sequence is the masked input itself (same tokens, same order,
second position coordinate 1 on [CLS], [MASK] and [SEP]), the DAG has exactly one path, and the
loss is the emission loss of the masked tokens plus [CLS] and [SEP], per target, plus the log-links
along that forced path. So emissions, accuracy and the encoder's gradient must be those of MLM.
"""
import torch

from polymask.data.batching import collate
from polymask.model import Encoder, EncoderConfig
from polymask.objectives.exlm import ExLM, ExLMConfig
from polymask.tokenization import SpecialIds

SPECIALS = SpecialIds(0, 1, 2, 3, 4)


def setup(**options):
    torch.manual_seed(0)
    model = ExLM(ExLMConfig(k=1, **options), Encoder(EncoderConfig(preset="tiny", rope_2d=True), 60), SPECIALS)
    batch = collate([[2, *range(5, 35), 3], [2, *range(40, 52), 3]], pad_id=0)
    selected = model.select(batch, torch.Generator().manual_seed(3))
    return model, batch, selected


def mlm_log_probs(model, batch, selected):
    """All-[MASK] MLM through the same encoder and head, with the positions ExLM gives k = 1 states."""
    grouped = selected.clone()
    grouped[:, 0] = True
    lengths = batch.attention_mask.sum(dim=1) if batch.attention_mask is not None else None
    grouped[torch.arange(len(lengths)), lengths - 1] = True
    positions = torch.stack((torch.arange(batch.input_ids.shape[1]).expand_as(batch.input_ids),
                             (grouped & batch.attention_mask).long()), dim=-1)
    hidden = model.encoder(batch.input_ids.masked_fill(selected, SPECIALS.mask), attention_mask=batch.attention_mask,
                           position_ids=positions)
    return model.head(hidden[selected]).float().log_softmax(dim=-1)


def test_k1_emissions_and_accuracy_equal_all_mask_mlm():
    model, batch, selected = setup()
    model.eval()
    exlm = model.aligned_log_probs(model.score(batch, selected))
    mlm = mlm_log_probs(model, batch, selected)
    assert torch.allclose(exlm, mlm, atol=1e-5)
    output = model(batch, torch.Generator().manual_seed(3))
    assert int(output.correct) == int((mlm.argmax(dim=-1) == batch.input_ids[selected]).sum())


def test_k1_gradient_into_the_encoder_is_the_emission_gradient_alone():
    model, batch, selected = setup()
    scores = model.score(batch, selected)
    lengths = scores.expansion.target_lengths
    rows = torch.arange(scores.emissions.shape[1])
    forced_path = scores.emissions[:, rows, rows]  # k = 1: target t is emitted by state t
    emission_loss = -((forced_path * scores.expansion.target_mask).sum(dim=1) / lengths).mean()
    encoder_grad = torch.autograd.grad(emission_loss, model.encoder.embed.weight)[0]
    loss = model(batch, torch.Generator().manual_seed(3)).loss
    assert torch.allclose(torch.autograd.grad(loss, model.encoder.embed.weight)[0], encoder_grad, atol=1e-7)


def test_with_the_reference_gradient_the_transitions_also_train_the_encoder():
    """transition_grad=1 (the reference code) adds the forced path's log-links to the encoder's gradient:
    with k = 1 a pure "which state comes next" signal, the one that collapsed the encoder (docs/exlm.md)."""
    model, batch, selected = setup(transition_grad=1.0)
    loss = model(batch, torch.Generator().manual_seed(3)).loss
    with_links = torch.autograd.grad(loss, model.encoder.embed.weight)[0]
    detached, _, _ = setup()
    loss = detached(batch, torch.Generator().manual_seed(3)).loss
    without = torch.autograd.grad(loss, detached.encoder.embed.weight)[0]
    assert not torch.allclose(with_links, without, atol=1e-7)


def test_k1_loss_is_the_mean_per_target_cross_entropy_of_the_forced_path():
    model, batch, selected = setup()
    model.eval()
    scores = model.score(batch, selected)
    targets = scores.expansion.targets
    log_probs = scores.log_probs  # (B, N = T, V)
    per_target = -log_probs.gather(2, targets[..., None])[..., 0] * scores.expansion.target_mask
    links = scores.links
    index = torch.arange(targets.shape[1] - 1)
    link_terms = links[:, index, index + 1] * scores.expansion.target_mask[:, 1:]
    expected = ((per_target.sum(dim=1) - link_terms.sum(dim=1)) / scores.expansion.target_lengths).mean()
    assert torch.allclose(model(batch, torch.Generator().manual_seed(3)).loss, expected, atol=1e-5)
