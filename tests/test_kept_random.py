"""Kept and random tokens (``mask_prob``, ``random_prob``) on every objective: what enters the encoder, what is
predicted. MLM's default is BERT's 80/10/10; MAE-LM's and ExLM's is their papers' (every selected position masked)."""
import pytest
import torch
import torch.nn.functional as F

from polymask.data.batching import collate
from polymask.errors import ConfigError
from polymask.model import Encoder, EncoderConfig
from polymask.objectives import OBJECTIVES, Corruption
from polymask.objectives.base import CorruptionConfig
from polymask.tokenization import SpecialIds

SPECIALS = SpecialIds(0, 1, 2, 3, 4)  # pad, unk, cls, sep, mask
VOCAB = 40


def build(name: str, **options):
    torch.manual_seed(0)
    objective = OBJECTIVES.get(name)
    config = objective.Config(**options)
    encoder = Encoder(EncoderConfig(preset="tiny", n_layers=3, **objective.encoder_overrides(config)), VOCAB)
    return objective(config, encoder, SPECIALS).eval()


def ragged_batch():
    return collate([[2, *range(5, 25), 3], [2, *range(30, 38), 3]], pad_id=0)


def encoder_inputs(model, batch, seed):
    """What the encoder was called with during one forward pass: (input_ids, position_ids) per call."""
    seen = []
    hook = model.encoder.register_forward_hook(
        lambda module, args, kwargs, out: seen.append((kwargs.get("input_ids", args[0] if args else None),
                                                       kwargs.get("position_ids"))), with_kwargs=True)
    output = model(batch, torch.Generator().manual_seed(seed))
    hook.remove()
    (call,) = seen
    return output, call


def collapse_groups(model, expansion):
    """An ExLM expanded input with each group of k states read once: the unexpanded sequence of every row."""
    rows = []
    for row in range(expansion.input_ids.shape[0]):
        first = expansion.state_index[row] <= 1
        real = expansion.input_ids[row] != SPECIALS.pad
        rows.append(expansion.input_ids[row][first & real].tolist())
    return rows


def test_defaults_are_bert_for_mlm_and_the_papers_for_maelm_and_exlm():
    assert (OBJECTIVES.get("mlm").Config().mask_prob, OBJECTIVES.get("mlm").Config().random_prob) == (0.8, 0.1)
    for name in ("maelm", "exlm"):
        config = OBJECTIVES.get(name).Config()
        assert isinstance(config, CorruptionConfig) and (config.mask_prob, config.random_prob) == (1.0, 0.0)


@pytest.mark.parametrize("name", ["mlm", "maelm", "exlm"])
def test_a_split_over_one_is_refused_naming_both_fields(name):
    with pytest.raises(ValueError, match="objective.mask_prob \\+ objective.random_prob = 1.2 exceeds 1"):
        OBJECTIVES.get(name).Config(mask_prob=0.7, random_prob=0.5)


def test_the_split_is_checked_when_a_run_config_loads(make_config, tmp_path):
    from polymask.config import build_run_config

    config = make_config("dna", tmp_path / "run", max_steps=1)
    config["objective"] = {"name": "maelm", "mask_prob": 0.9, "random_prob": 0.2}
    with pytest.raises(ConfigError, match="objective.mask_prob \\+ objective.random_prob = 1.1 exceeds 1"):
        build_run_config(config)


@pytest.mark.parametrize("name", ["mlm", "maelm"])
def test_all_kept_the_encoder_input_is_the_clean_input(name):
    model = build(name, mask_prob=0.0, random_prob=0.0)
    batch = ragged_batch()
    output, (ids, positions) = encoder_inputs(model, batch, seed=1)
    assert torch.equal(ids, batch.input_ids)
    if positions is not None:  # MAE-LM: nothing removed, every token at its own position
        real = batch.attention_mask
        assert torch.equal(positions[real], torch.arange(ids.shape[1]).expand_as(ids)[real])
    assert output.predictions == int(model.select(batch, torch.Generator().manual_seed(1)).sum())


def test_all_kept_exlm_expands_only_the_start_and_end_tokens():
    model = build("exlm", mask_prob=0.0, random_prob=0.0)
    batch = ragged_batch()
    corruption = model.corrupt(batch, torch.Generator().manual_seed(1))
    assert not corruption.masked.any() and corruption.shown.sum() == corruption.selected.sum() > 0
    expansion = model.expand(batch, corruption)
    assert not (expansion.input_ids == SPECIALS.mask).any()
    clean = [row[row != SPECIALS.pad].tolist() for row in batch.input_ids]
    assert collapse_groups(model, expansion) == clean
    assert expansion.target_lengths.tolist() == [2, 2]  # the DAG emits [CLS] and [SEP] only


@pytest.mark.parametrize("name", ["mlm", "maelm", "exlm"])
def test_all_random_no_mask_token_enters_the_encoder(name):
    model = build(name, mask_prob=0.0, random_prob=1.0)
    batch = ragged_batch()
    corruption = model.corrupt(batch, torch.Generator().manual_seed(2))
    assert torch.equal(corruption.selected, corruption.shown)
    shown = corruption.input_ids[corruption.selected]
    assert not torch.isin(shown, torch.tensor(SPECIALS.all)).any()  # random tokens come from the real vocabulary
    assert (shown != batch.input_ids[corruption.selected]).float().mean() > 0.8
    assert torch.equal(corruption.input_ids[~corruption.selected], batch.input_ids[~corruption.selected])
    _, (ids, _) = encoder_inputs(model, batch, seed=2)
    assert not (ids == SPECIALS.mask).any()


@pytest.mark.parametrize("name", ["mlm", "maelm"])
@pytest.mark.parametrize("split", [(1.0, 0.0), (0.8, 0.1), (0.0, 0.5)])
def test_the_loss_covers_exactly_the_selected_positions_with_their_true_tokens(name, split):
    model = build(name, mask_ratio=0.3, mask_prob=split[0], random_prob=split[1])
    batch = ragged_batch()
    rows = []
    hook = model.head.register_forward_hook(lambda module, args, out: rows.append(out))
    output = model(batch, torch.Generator().manual_seed(4))
    hook.remove()
    selected = model.corrupt(batch, torch.Generator().manual_seed(4)).selected
    (logits,) = rows
    assert output.predictions == logits.shape[0] == int(selected.sum())
    assert torch.allclose(output.loss, F.cross_entropy(logits.float(), batch.input_ids[selected]))


@pytest.mark.parametrize("split", [(0.5, 0.25), (0.0, 0.0)])
def test_exlm_weighs_every_dag_target_and_shown_token_the_same(split):
    model = build("exlm", mask_ratio=0.3, mask_prob=split[0], random_prob=split[1])
    batch = ragged_batch()
    output = model(batch, torch.Generator().manual_seed(4))
    corruption = model.corrupt(batch, torch.Generator().manual_seed(4))
    masked, shown = int(corruption.masked.sum()), int(corruption.shown.sum())
    assert output.predictions == masked + shown == int(corruption.selected.sum())
    scores = model.score(batch, corruption)
    assert scores.expansion.target_lengths.sum() == masked + 2 * batch.input_ids.shape[0]
    assert scores.shown_logits.shape[0] == shown
    from polymask.objectives.dag import dag_log_likelihood

    lengths = scores.expansion.target_lengths
    dag = -dag_log_likelihood(scores.emissions, scores.links, scores.expansion.state_counts, lengths).sum()
    token = F.cross_entropy(scores.shown_logits.float(), batch.input_ids[corruption.shown], reduction="sum")
    assert torch.allclose(output.loss, (dag + token) / (masked + 2 * len(lengths) + shown), atol=1e-6)


def test_exlm_without_shown_tokens_is_the_reference_criterion():
    """Every selected token masked (the default): each row's negative log-likelihood over its target length,
    averaged over rows, as the reference's criterion."""
    from polymask.objectives.dag import dag_log_likelihood

    model = build("exlm", mask_ratio=0.3)
    batch = ragged_batch()
    output = model(batch, torch.Generator().manual_seed(4))
    scores = model.score(batch, model.corrupt(batch, torch.Generator().manual_seed(4)))
    lengths = scores.expansion.target_lengths
    log_likelihood = dag_log_likelihood(scores.emissions, scores.links, scores.expansion.state_counts, lengths)
    assert scores.shown_logits.shape[0] == 0
    assert torch.allclose(output.loss, -(log_likelihood / lengths).mean(), atol=1e-6)


def test_exlm_shown_tokens_are_predicted_from_their_own_single_state():
    model = build("exlm", mask_ratio=0.3, mask_prob=0.5, random_prob=0.25)
    batch = ragged_batch()
    corruption = model.corrupt(batch, torch.Generator().manual_seed(4))
    expansion = model.expand(batch, corruption)
    rows = corruption.shown.nonzero()
    slots = expansion.first_slot[corruption.shown]
    assert (expansion.state_index[rows[:, 0], slots] == 0).all()  # a shown token is one state, not a group
    assert torch.equal(expansion.original_index[rows[:, 0], slots], rows[:, 1])
    assert torch.equal(expansion.input_ids[rows[:, 0], slots], corruption.input_ids[corruption.shown])


@pytest.mark.parametrize("name", ["mlm", "maelm", "exlm"])
def test_masked_predictions_for_analyses_mask_every_selected_position(name):
    """``masked_log_probs`` (rank and semantics analyses, compare) asks what a [MASK] predicts, whatever the split."""
    model = build(name, mask_prob=0.0, random_prob=0.5)
    batch = ragged_batch()
    selected = model.select(batch, torch.Generator().manual_seed(3))
    log_probs = model.masked_log_probs(batch, selected)
    assert log_probs.shape == (int(selected.sum()), VOCAB)
    same = Corruption.all_masked(batch.input_ids, selected, SPECIALS.mask)
    assert torch.equal(same.masked, same.selected) and (same.input_ids[selected] == SPECIALS.mask).all()


def test_mlm_corrupts_exactly_as_bert_corrupt_did():
    """The split moved into ``Objective.corrupt``: the same ids and the same generator state after it, so MLM runs and
    their resumes mask as before."""
    from polymask.data.masking import bert_corrupt

    model = build("mlm")
    batch = ragged_batch()
    mine, theirs = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    corruption = model.corrupt(batch, mine)
    selected = model.select(batch, theirs)
    expected = bert_corrupt(batch.input_ids, selected, SPECIALS.mask, model.random_pool, theirs)
    assert torch.equal(corruption.input_ids, expected) and torch.equal(corruption.selected, selected)
    assert torch.equal(mine.get_state(), theirs.get_state())


def test_exlm_shown_logits_are_the_head_on_the_encoder_state_of_each_shown_token():
    model = build("exlm", mask_ratio=0.3, mask_prob=0.5, random_prob=0.25)
    batch = ragged_batch()
    corruption = model.corrupt(batch, torch.Generator().manual_seed(4))
    scores = model.score(batch, corruption)
    expansion = scores.expansion
    hidden = model.encoder(expansion.input_ids, attention_mask=expansion.attention_mask,
                           position_ids=expansion.position_ids(True), key_bias=model.key_bias(expansion))
    expected = [model.head(hidden[row, expansion.first_slot[row, position]])
                for row, position in corruption.shown.nonzero().tolist()]
    assert torch.allclose(scores.shown_logits, torch.stack(expected), atol=1e-5)


@pytest.mark.parametrize("name", ["mlm", "maelm", "exlm"])
def test_masked_positions_are_counted_apart_for_the_collapse_alarm(name):
    """A kept token can be copied from the input: the alarm reads the accuracy at masked positions alone."""
    model = build(name, mask_ratio=0.3, mask_prob=0.5, random_prob=0.0)
    batch = ragged_batch()
    output = model(batch, torch.Generator().manual_seed(4))
    corruption = model.corrupt(batch, torch.Generator().manual_seed(4))
    assert output.masked_predictions == int(corruption.masked.sum()) < output.predictions
    assert 0 <= int(output.masked_correct) <= int(output.correct)
    plain = build(name, mask_ratio=0.3, mask_prob=1.0, random_prob=0.0)(batch, torch.Generator().manual_seed(4))
    assert plain.masked_predictions is None and plain.masked_correct is None  # every prediction is a masked one
