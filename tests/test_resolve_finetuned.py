"""An output folder of a run that saved one fine-tuned model opens as that model; several are named."""
from pathlib import Path

import pytest

from polymask.checkpoints.finetuned import FINETUNED_META, resolve_finetuned
from polymask.errors import CheckpointError


def _model(run: Path, system: str, seed: int) -> Path:
    folder = run / "cells" / system / "own-data-sol-logs" / f"seed-{seed}"
    folder.mkdir(parents=True)
    (folder / FINETUNED_META).write_text("{}")
    return folder


def test_a_model_folder_is_itself(tmp_path):
    model = _model(tmp_path, "demo-mlm", 0)
    assert resolve_finetuned(model) == model


def test_an_output_folder_with_one_model_opens_it(tmp_path):
    model = _model(tmp_path, "demo-mlm", 0)
    assert resolve_finetuned(tmp_path) == model


def test_an_output_folder_with_several_models_names_them(tmp_path):
    _model(tmp_path, "demo-mlm", 0)
    _model(tmp_path, "demo-mlm", 1)
    with pytest.raises(CheckpointError, match="holds 2 fine-tuned models; name one: cells/demo-mlm"):
        resolve_finetuned(tmp_path)


def test_an_output_folder_without_models_says_why(tmp_path):
    (tmp_path / "cells").mkdir()
    with pytest.raises(CheckpointError, match="no-save-models"):
        resolve_finetuned(tmp_path)


def test_a_built_in_encoder_s_name_is_not_a_fine_tuned_model_and_says_what_to_do(tmp_path, monkeypatch):
    from polymask.checkpoints.finetuned import read_finetuned

    monkeypatch.chdir(tmp_path)  # no folder of that name here
    with pytest.raises(CheckpointError, match="dna-gue-3mer-mlm-196k is a built-in pretrained encoder, not a "
                                              "fine-tuned model: fine-tune it first"):
        read_finetuned(Path("dna-gue-3mer-mlm-196k"))
    with pytest.raises(CheckpointError, match="fine-tuned model not found: no-such-model"):
        read_finetuned(Path("no-such-model"))
