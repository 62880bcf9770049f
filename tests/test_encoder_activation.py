"""The encoder's GELU is a config field: exact for new runs, tanh for checkpoints written before the field."""
from __future__ import annotations

from pathlib import Path

import torch

from polymask.checkpoints.pretrained import read_checkpoint
from polymask.encoder_config import EncoderConfig, fill_legacy_defaults
from polymask.model.encoder import Encoder
from polymask.objectives.mlm import MaskedLM

LEGACY_RUN = Path(__file__).parent / "data" / "legacy_run"


def test_new_runs_use_the_exact_gelu_and_the_field_reaches_every_gelu():
    assert EncoderConfig(preset="tiny").activation == "gelu"
    torch.manual_seed(0)
    exact = Encoder(EncoderConfig(preset="tiny"), 32).eval()
    tanh = Encoder(EncoderConfig(preset="tiny", activation="gelu_tanh"), 32).eval()
    tanh.load_state_dict(exact.state_dict())
    ids = torch.randint(0, 32, (2, 12))
    with torch.no_grad():
        assert (exact(ids) - tanh(ids)).abs().max() > 1e-6  # the blocks' MLPs
        for module in (exact, tanh):  # the LM head follows the encoder's field
            head = MaskedLM(MaskedLM.Config(), module, _specials()).head
            assert head.activation == module.config.activation


def test_checkpoints_written_before_the_field_load_with_the_tanh_gelu():
    assert read_checkpoint(LEGACY_RUN).encoder_config.activation == "gelu_tanh"
    assert read_checkpoint("smiles-mlm-1.7m").encoder_config.activation == "gelu_tanh"  # a built-in model
    saved = {"d_model": 64, "activation": "gelu"}
    assert fill_legacy_defaults(saved) == ["embed_norm"] and saved["activation"] == "gelu"


def _specials():
    from polymask.tokenization import SpecialIds

    return SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4)
