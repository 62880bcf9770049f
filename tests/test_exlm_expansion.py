"""ExLM's state expansion: the worked example of issue #4, padding, and what the encoder sees."""
import torch
from conftest import attention_outputs, differ

from polymask.data.batching import collate
from polymask.model import Encoder, EncoderConfig
from polymask.objectives.exlm import ExLM, ExLMConfig
from polymask.objectives.state_expansion import expand_states
from polymask.tokenization import SpecialIds

SPECIALS = SpecialIds(0, 1, 2, 3, 4)
A, B, C, X = 10, 11, 12, 13


def test_worked_example_positions():
    ids = torch.tensor([[2, A, B, X, C, 3]])
    selected = torch.tensor([[False, False, False, True, False, False]])
    expansion = expand_states(ids, selected, None, k=4, mask_id=4, pad_id=0)
    assert expansion.original_index[0].tolist() == [0, 0, 0, 0, 1, 2, 3, 3, 3, 3, 4, 5, 5, 5, 5]
    assert expansion.state_index[0].tolist() == [1, 2, 3, 4, 0, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4]
    assert expansion.input_ids[0].tolist() == [2] * 4 + [A, B] + [4] * 4 + [C] + [3] * 4
    assert expansion.position_ids(two_d=True)[0, :, 1].tolist() == expansion.state_index[0].tolist()
    assert expansion.attention_mask is None
    assert expansion.targets[0].tolist() == [2, X, 3]
    assert expansion.state_slots[0].tolist() == [0, 1, 2, 3, 6, 7, 8, 9, 11, 12, 13, 14]


def test_padded_rows_expand_as_they_would_alone():
    rows = [[2, A, B, C, X, A, 3], [2, B, C, 3], [2, X, X, A, B, 3]]
    batch = collate(rows, pad_id=0)
    selected = torch.zeros_like(batch.input_ids, dtype=torch.bool)
    selected[0, [2, 4]] = True
    selected[1, 1] = True
    selected[2, [1, 2, 3]] = True
    together = expand_states(batch.input_ids, selected, batch.attention_mask, 3, 4, 0)
    for row, tokens in enumerate(rows):
        alone = expand_states(torch.tensor([tokens]), selected[row:row + 1, :len(tokens)], None, 3, 4, 0)
        width = alone.input_ids.shape[1]
        assert together.attention_mask[row].sum() == width
        assert (together.input_ids[row, width:] == 0).all()
        for field in ("input_ids", "original_index", "state_index"):
            assert getattr(together, field)[row, :width].tolist() == getattr(alone, field)[0].tolist(), field
        states = int(together.state_counts[row])
        assert states == 3 * (int(selected[row].sum()) + 2) == alone.state_counts[0]
        assert together.state_slots[row, :states].tolist() == alone.state_slots[0].tolist()
        assert together.targets[row, :together.target_lengths[row]].tolist() == alone.targets[0].tolist()


def test_expanded_states_feed_the_vocabulary_projection_and_encoder_sees_2d_positions():
    torch.manual_seed(0)
    encoder = Encoder(EncoderConfig(preset="tiny", rope_2d=True), 40)
    model = ExLM(ExLMConfig(k=4), encoder, SPECIALS).eval()
    batch = collate([[2, *range(5, 15), 3], [2, *range(20, 26), 3]], pad_id=0)
    selected = model.select(batch, torch.Generator().manual_seed(0))
    scores = model.score(batch, selected)
    masked_per_row = selected.sum(dim=1)
    assert scores.log_probs.shape == (2, int(4 * (masked_per_row.max() + 2)), 40)
    assert scores.emissions.shape == (2, int(masked_per_row.max() + 2), scores.log_probs.shape[1])
    # the k copies of a group differ only by their state index, so what attention adds to them differs
    expansion = model.expand(batch, selected)
    added = attention_outputs(encoder, expansion.input_ids, attention_mask=expansion.attention_mask,
                              position_ids=expansion.position_ids(True))
    assert differ(added[0, 0], added[0, 1]) and differ(added[0, 1], added[0, 2])


def test_without_2d_rope_positions_run_over_the_expanded_sequence():
    ids = torch.tensor([[2, A, X, 3]])
    expansion = expand_states(ids, torch.tensor([[False, False, True, False]]), None, 2, 4, 0)
    assert expansion.position_ids(two_d=False)[0].tolist() == list(range(7))
    assert ExLM.encoder_overrides(ExLMConfig(rope_2d=False)) == {"rope_2d": False}
    assert ExLM.encoder_overrides(ExLMConfig()) == {"rope_2d": True}
