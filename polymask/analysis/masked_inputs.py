"""What the masked-input analyses share: held-out batches with masks fixed by a seed (the same for every
checkpoint trained at the same mask ratio), their settings and their command-line options."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from pydantic import Field

from polymask.builtin_models import checkpoint_path
from polymask.cli_options import add_model_options, add_plugin_option
from polymask.schema import StrictModel

if TYPE_CHECKING:  # kept out of the import so that building the CLI parser stays light
    from torch import Tensor

    from polymask.checkpoints.pretrained import LoadedCheckpoint
    from polymask.data.batching import Batch
    from polymask.objectives import Objective

MASK_STREAM = 7


class MaskedInputSettings(StrictModel):
    """Which masked inputs an analysis reads: the same for every checkpoint it compares."""

    mask_ratio: float | None = Field(
        None, gt=0, lt=1, description="fraction of maskable tokens masked; none: each checkpoint's own "
                                      "objective.mask_ratio (give one to mask checkpoints trained at different "
                                      "ratios alike)")
    seed: int = Field(0, description="seed of the masks (the same for every checkpoint)")
    batch_size: int = Field(32, ge=1, description="sequences per forward pass")
    max_sequences: int = Field(2000, ge=1, description="cap on sequences read from --data")


def masked_batches(checkpoint: "LoadedCheckpoint", objective: "Objective", data: list[Path],
                   mask_ratio: float | None, seed: int, batch_size: int,
                   max_sequences: int) -> Iterator[tuple["Batch", "Tensor"]]:
    """Batches of ``data`` (read through the checkpoint's modality and tokenizer, the first
    ``max_sequences`` sequences, in length order) and the positions the checkpoint's objective selects in them
    (``Objective.select``: its mask ratio, or ``mask_ratio`` when given, and its modality's spans), fixed by
    ``seed``."""
    from polymask.data.batching import BatchSampler, collate
    from polymask.data.corpus import prepare_corpus
    from polymask.modalities import build_modality
    from polymask.runtime import step_generator

    run = checkpoint.run_config
    corpus = prepare_corpus(build_modality(run.modality), checkpoint.tokenizer, data, column=None,
                            max_len=run.data.max_len, val_fraction=0.0, max_val_records=0, seed=seed,
                            cache_dir=run.data.resolved_cache_dir(), strict=False)
    store = corpus.train
    lengths = store.lengths[:max_sequences]
    for index, indices in enumerate(BatchSampler(lengths, batch_size, seed, "bucket", shuffle=False).epoch(0)):
        batch = collate([store[int(i)] for i in indices], objective.specials.pad)
        yield batch, objective.select(batch, step_generator(seed, index, 0, MASK_STREAM), mask_ratio)


def add_masked_input_arguments(parser: argparse.ArgumentParser, name: str, example: str,
                               settings: type[MaskedInputSettings]) -> None:
    """--checkpoint, --data, --out and an option per field of ``settings`` (the masking options and the
    analysis's own) of ``polymask analyze <name>``."""
    parser.add_argument("--checkpoint", type=checkpoint_path, action="append", required=True,
                        help=f"run or checkpoint folder, or a built-in model's name (repeat to compare, e.g. "
                             f"{example})")
    parser.add_argument("--data", type=Path, nargs="+", required=True, help="held-out corpus files")
    parser.add_argument("--out", type=Path, default=Path(f"runs/analysis/{name}"), help="folder for the outputs")
    add_model_options(parser, settings, settings.model_fields)
    add_plugin_option(parser, "the runs' custom modalities and objectives")
