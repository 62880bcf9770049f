"""Every registered objective on every registered modality goes the whole way: build, a training step, save,
load, fine-tune, export. A toy objective defined in this file alone (what a plugin writes) goes the same way:
a new objective touches no other file of polymask."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import tiny_config
from torch import Tensor

from polymask.checkpoints.pretrained import read_checkpoint
from polymask.cli import main
from polymask.data.batching import Batch
from polymask.modalities import MODALITIES
from polymask.objectives import OBJECTIVES
from polymask.objectives.base import LMHead, Objective, ObjectiveConfig, ObjectiveOutput, token_loss
from polymask.training.trainer import train

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end

GLUE_EXCERPTS = Path(__file__).parent / "data" / "glue"
# one small task per modality, with its data folder (None: the built-in files)
TASKS = {"smiles": ("moleculenet/esol", None), "dna": ("dna/ecoli_promoters", None),
         "text": ("glue/wnli", GLUE_EXCERPTS)}
RANK_INPUTS = {"unmasked", "masked_real", "mask_tokens", "visible_only"}


class ToyConfig(ObjectiveConfig):
    name: str = "toy"


class ToyObjective(Objective):
    """Every selected token becomes [MASK]; a BERT head predicts it (MLM without the 80/10/10)."""

    Config = ToyConfig
    lm_export = "head"
    fill_mask_note = "the toy objective's head on the encoder output."

    def __init__(self, config: ToyConfig, encoder, specials, mask_span: int = 1, shape_multiple: int = 1) -> None:
        super().__init__(config, encoder, specials, mask_span, shape_multiple)
        self.head = LMHead(encoder.config.d_model, encoder.embed, encoder.config.norm_eps, encoder.config.activation)

    def forward(self, batch: Batch, generator: torch.Generator) -> ObjectiveOutput:
        selected = self.select(batch, generator)
        return token_loss(self._logits(batch, selected), batch.input_ids[selected])

    def masked_log_probs(self, batch: Batch, selected: Tensor) -> Tensor:
        return self._logits(batch, selected).float().log_softmax(dim=-1)

    def _logits(self, batch: Batch, selected: Tensor) -> Tensor:
        hidden = self.encoder(batch.input_ids.masked_fill(selected, self.specials.mask),
                              attention_mask=batch.attention_mask)
        return self.head(hidden[selected])


@pytest.fixture(scope="module")
def toy_objective():
    OBJECTIVES.register("toy")(ToyObjective)
    yield "toy"
    OBJECTIVES.unregister("toy")


def _cases() -> list[tuple[str, str]]:
    import polymask.objectives  # noqa: F401  (registers the built-in objectives)

    return [(objective, modality) for objective in [*OBJECTIVES.names(), "toy"] for modality in MODALITIES.names()
            if modality in TASKS]


def test_every_registered_modality_has_a_contract_task():
    assert set(MODALITIES.names()) <= set(TASKS), "add a small task for the new modality to TASKS"


@pytest.mark.parametrize("objective, modality", _cases())
def test_an_objective_goes_from_pretraining_to_export(objective, modality, toy_objective, tmp_path, capsys,
                                                      one_torch_thread):
    config = tiny_config(modality, tmp_path / "run", max_steps=2, threads=1)
    config["objective"] = {"name": objective}
    config["data"]["max_val_records"] = 16
    assert train(config)["steps"] == 2  # build and train

    checkpoint = read_checkpoint(tmp_path / "run")  # save and load: the whole model comes back
    rebuilt = checkpoint.build_objective().eval()
    assert type(rebuilt) is OBJECTIVES.get(objective)
    assert set(rebuilt.state_dict()) == set(checkpoint.weights)
    assert set(rebuilt.rank_inputs) <= RANK_INPUTS

    ids = torch.tensor([checkpoint.tokenizer.encode(MODALITIES.get(modality)().normalize(sample(modality))).ids])
    selected = torch.zeros_like(ids, dtype=torch.bool)
    selected[0, 1] = True
    with torch.no_grad():
        log_probs = rebuilt.masked_log_probs(Batch(ids, None), selected)
    assert log_probs.shape == (1, checkpoint.vocab_size)
    assert torch.allclose(log_probs.exp().sum(), torch.tensor(1.0), atol=1e-4)

    task, data_dir = TASKS[modality]
    arguments = ["finetune", "--task", task, "--checkpoint", str(tmp_path / "run"), "--epochs", "1", "--seeds", "1",
                 "--max-train-examples", "32", "--max-valid-examples", "16", "--max-test-examples", "16",
                 "--out", str(tmp_path / "finetune"), "--quiet", *(["--data-dir", str(data_dir)] if data_dir else [])]
    assert main(arguments) == 0
    results = json.loads((tmp_path / "finetune" / "results.json").read_text())
    assert results["cells"] and all(cell["test"] for cell in results["cells"])

    capsys.readouterr()
    assert main(["export", "--checkpoint", str(tmp_path / "run"), "--out", str(tmp_path / "hf")]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert exported["max_abs_diff_hidden"] < 1e-4
    assert any(name.endswith("ForMaskedLM") for name in exported["architectures"]) == (rebuilt.lm_export is not None)


def sample(modality: str) -> str:
    return {"smiles": "CC(=O)Oc1ccccc1C(=O)O", "dna": "ACGTACGTTGCAACGTACGTTGCA",
            "text": "It is a truth universally acknowledged."}[modality]


class SilentConfig(ObjectiveConfig):
    name: str = "silent"


class SilentObjective(ToyObjective):
    """A toy objective that does not say how it predicts a masked token."""

    Config = SilentConfig
    masked_log_probs = Objective.masked_log_probs


def test_compare_refuses_an_objective_it_cannot_analyse_in_one_line(toy_objective):
    from polymask.compare.run import check_objectives
    from polymask.errors import ConfigError

    OBJECTIVES.register("silent")(SilentObjective)
    try:
        check_objectives(["mlm", "toy"])  # both predict masked tokens
        with pytest.raises(ConfigError, match=r"cannot analyse objective\(s\) silent: .*masked_log_probs"):
            check_objectives(["mlm", "silent"])
    finally:
        OBJECTIVES.unregister("silent")
