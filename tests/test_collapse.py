"""The collapse alarm: unigram accuracy, effective rank of final states, and the trainer's warning."""
import json

import pytest
import torch

from polymask.config import CollapseConfig
from polymask.model import Encoder, EncoderConfig
from polymask.training.collapse import CollapseMonitor, FinalStates, unigram_accuracy
from polymask.training.trainer import train

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end

SPECIALS = (0, 1, 2, 3, 4)


def test_unigram_accuracy_is_the_most_frequent_maskable_token_frequency():
    sequences = [[2, 5, 5, 6, 3], [2, 5, 7, 3, 0, 0]]
    assert unigram_accuracy(sequences, SPECIALS) == pytest.approx(3 / 5)


def test_monitor_alarms_only_after_the_first_step_and_names_the_kind():
    monitor = CollapseMonitor(CollapseConfig(accuracy_margin=0.01, min_rank=4), unigram=0.06, first_step=100)
    assert monitor.check(50, 0.06, 1) == []
    assert not monitor.collapsed
    warnings = monitor.check(100, 0.065, 2)
    assert len(warnings) == 2 and "unigram level" in warnings[0] and "effective rank 2" in warnings[1]
    assert monitor.collapsed
    assert monitor.check(200, 0.2, 40) == [] and not monitor.collapsed
    report = monitor.report()
    assert [alarm["kind"] for alarm in report["alarms"]] == ["unigram", "rank"]
    json.dumps(report, allow_nan=False)


def test_final_states_rank_separates_a_collapsed_encoder_from_a_healthy_one():
    torch.manual_seed(0)
    encoder = Encoder(EncoderConfig(preset="tiny"), vocab_size=60).eval()
    ids = torch.randint(5, 60, (8, 24))
    ids[:, 0], ids[:, -1] = 2, 3
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[0, 20:] = False
    with FinalStates(encoder, SPECIALS, max_tokens=4096) as states:
        encoder(ids, attention_mask=mask)
    real_tokens = mask & ~torch.isin(ids, torch.tensor(SPECIALS))  # padding and [CLS]/[SEP] are left out
    assert states.gathered == int(real_tokens.sum()) and states.rank() >= 10
    collapsed = PositionOnly(64)
    with FinalStates(collapsed, SPECIALS, max_tokens=4096) as states:
        collapsed(ids, attention_mask=mask)
    assert states.rank() == 1


class PositionOnly(torch.nn.Module):
    """A collapsed encoder: every token's state is its position along one direction (ExLM's failure mode)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.direction = torch.nn.Parameter(torch.randn(width))

    def forward(self, input_ids, attention_mask=None):
        positions = torch.arange(input_ids.shape[1], dtype=torch.float32)
        return positions[None, :, None] * self.direction.expand(*input_ids.shape, -1)


def test_a_run_that_learns_nothing_raises_the_alarm(tmp_path, make_config, capsys):
    config = make_config("smiles", tmp_path / "run", max_steps=4, lr=1e-9, eval_every=2,
                         collapse={"after_step": 2})
    summary = train(config)
    assert summary["collapsed"] is True
    assert summary["collapse"]["alarms"][0]["kind"] == "unigram"
    assert 0 < summary["unigram_accuracy"] < 1
    assert "collapse alarm at step 2" in capsys.readouterr().err
    saved = (tmp_path / "run" / "summary.json").read_text()
    assert json.loads(saved)["collapsed"] is True and "NaN" not in saved


def test_alarms_raised_before_a_resume_stay_in_the_summary(tmp_path, make_config):
    config = make_config("smiles", tmp_path / "run", max_steps=4, lr=1e-9, eval_every=2, save_every=2,
                         collapse={"after_step": 2})
    first = train({**config, "train": {**config["train"], "stop_after_steps": 2}})
    assert [alarm["step"] for alarm in first["collapse"]["alarms"]] == [2]
    resumed = train(config, resume=tmp_path / "run")
    assert [alarm["step"] for alarm in resumed["collapse"]["alarms"]] == [2, 4]
