"""Task kinds: how a kind's examples are loaded and how a pretrained encoder is fine-tuned on them.

Table tasks (binary, multiclass, regression) share one loader and one fine-tuning loop; extractive
question answering (span, SQuAD JSON) has its own. The benchmark and the systems look a task's
kind up here, so a new kind is one entry.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tokenizers import Tokenizer

from polymask.checkpoints.finetuned import SaveTarget
from polymask.modalities.base import Modality
from polymask.model.encoder import Encoder
from polymask.tasks.data.loading import load_task
from polymask.tasks.data.spec import TABLE_KINDS, TaskSpec
from polymask.tasks.data.squad import load_squad
from polymask.tasks.finetune.options import FinetuneConfig
from polymask.tasks.finetune.spans import finetune_span
from polymask.tasks.finetune.tables import finetune
from polymask.tracking import Reporter


@dataclass(frozen=True)
class KindRunner:
    """``load(spec, modality, data_dir)`` -> task data; ``finetune(data, encoder, tokenizer, modality, config, seed,
    save_to, reporter)`` -> a result dict with ``valid`` and ``test`` metrics (the chosen model saved to ``save_to``
    if given; each epoch's loss and validation metrics sent to ``reporter``)."""

    load: Callable[[TaskSpec, Modality, Path | None], Any]
    finetune: Callable[[Any, Encoder, Tokenizer, Modality, FinetuneConfig, int, SaveTarget | None, Reporter],
                       dict[str, Any]]


KINDS: dict[str, KindRunner] = {
    **{kind: KindRunner(load_task, finetune) for kind in TABLE_KINDS},
    "span": KindRunner(load_squad, finetune_span),
}
