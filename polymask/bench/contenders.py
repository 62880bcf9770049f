"""The contenders ``polymask bench`` times: a polymask objective through its real training step, and HF
``BertForMaskedLM`` with the same dimensions, data and ``DataCollatorForLanguageModeling``.

Each builder returns a ``Contender``: a function running one optimiser step (returning its real and
padded token counts), the module that is "the encoder" (for encoder-time and encoder-positions
measurements), and the device.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from polymask.config import build_run_config
from polymask.objectives import MASK_RATIO
from polymask.runtime import autocast, precision_used
from polymask.training.trainer import Trainer

Step = Callable[[], tuple[int, int]]


@dataclass
class Contender:
    """One thing ``polymask bench`` times (a row's trainer): its step, encoder, device and precision."""

    step: Step
    encoder: nn.Module
    device: torch.device
    precision: str  # the precision actually used: "bf16" or "fp32"


@dataclass(frozen=True)
class BenchSetup:
    """What every row of one bench shares: the modality and its corpus (``data``: files, default the built-in
    corpus; ``column``: their sequence column), the encoder preset, batch size and maximum length."""

    modality: str
    preset: str
    batch_size: int
    max_len: int
    data: tuple[Path, ...] = ()
    column: str | None = None

    @property
    def stem(self) -> str:
        """The results files' name: ``<modality>-<preset>-b<batch>-l<len>``."""
        return f"{self.modality}-{self.preset}-b{self.batch_size}-l{self.max_len}"

    def describe(self) -> dict[str, Any]:
        """The setup as the results files record it (``data`` only when not the built-in corpus)."""
        data = {"data": [str(path) for path in self.data], "column": self.column} if self.data else {}
        return {"modality": self.modality, "preset": self.preset, "batch_size": self.batch_size,
                "max_len": self.max_len, **data}


def polymask_trainer(objective: str, setup: BenchSetup, precision: str, workdir: Path,
                     mask_ratio: float = MASK_RATIO) -> Trainer:
    """A trainer for one objective, as ``polymask train`` would build it (its own run folder under workdir)."""
    return Trainer(build_run_config({
        "modality": setup.modality, "objective": {"name": objective, "mask_ratio": mask_ratio},
        "model": {"preset": setup.preset},
        "data": {"max_len": setup.max_len, "paths": [str(path) for path in setup.data], "column": setup.column},
        "out": str(workdir / f"{objective}-{mask_ratio}"),
        "train": {"batch_size": setup.batch_size, "precision": precision, "progress": False, "max_steps": 10**6}}))


def train_step(trainer: Trainer) -> tuple[int, int]:
    """One real optimiser step; (real tokens, padded tokens) of its batch."""
    result = trainer.step()
    return result.real_tokens, result.padded_tokens


def polymask_contender(objective: str, setup: BenchSetup, precision: str, workdir: Path,
                       mask_ratio: float) -> Contender:
    """A polymask objective, stepped by its own trainer."""
    trainer = polymask_trainer(objective, setup, precision, workdir, mask_ratio)
    return Contender(lambda: train_step(trainer), trainer.objective.encoder, trainer.device,
                     precision_used(trainer.device, precision))


def hf_bert_contender(setup: BenchSetup, precision: str, workdir: Path, mask_ratio: float = MASK_RATIO,
                      seed: int = 0) -> Contender:
    """HF ``BertForMaskedLM`` with polymask's encoder dimensions, on the same tokenised corpus, batched as HF's
    Trainer does by default (shuffled, dynamically padded, 80/10/10 masking by the collator)."""
    from transformers import BertConfig, BertForMaskedLM, DataCollatorForLanguageModeling

    from polymask.tokenization import to_hf

    reference = polymask_trainer("mlm", setup, precision, workdir / "hf")
    batch_size, max_len = setup.batch_size, setup.max_len
    encoder_config, device = reference.encoder.config, reference.device
    torch.manual_seed(seed)
    model = BertForMaskedLM(BertConfig(
        vocab_size=reference.tokenizer.get_vocab_size(), hidden_size=encoder_config.d_model,
        num_hidden_layers=encoder_config.n_layers, num_attention_heads=encoder_config.n_heads,
        intermediate_size=encoder_config.d_ff, max_position_embeddings=max_len)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    collator = DataCollatorForLanguageModeling(to_hf(reference.tokenizer), mlm_probability=mask_ratio)
    store = reference.batches.store
    order = np.random.default_rng(seed).permutation(len(store))
    cursor = {"at": 0}

    def step() -> tuple[int, int]:
        start = cursor["at"] % (len(order) - batch_size)
        cursor["at"] += batch_size
        batch = collator([{"input_ids": store[int(i)].tolist()} for i in order[start:start + batch_size]])
        batch = {key: value.to(device) for key, value in batch.items()}
        with autocast(device, precision):
            loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return int(batch["attention_mask"].sum()), batch["input_ids"].numel()

    return Contender(step, model.bert, device, precision_used(device, precision))
