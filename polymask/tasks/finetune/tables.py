"""Fine-tuning a pretrained encoder on a table task (binary, multiclass, regression), with early stopping on
the validation metric.

The encoder comes without any objective module (``LoadedCheckpoint.build_encoder``); a pooled
linear head is added; training (``loop.fit``) stops when the validation metric has not improved for
``patience`` epochs, and the test metrics are those of the best validation epoch.
"""
from __future__ import annotations

import functools
import random
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Collection

import numpy as np
import torch
from tokenizers import Tokenizer
from torch import Tensor

from polymask.checkpoints.finetuned import SaveTarget, save_finetuned
from polymask.data.batching import Batch, BatchSampler, collate
from polymask.data.model_inputs import model_windows, run_batched, tokenize_normalised
from polymask.data.variants import encode_variants
from polymask.errors import ConfigError
from polymask.finetune_config import FinetuneConfig
from polymask.modalities.base import Modality
from polymask.model.encoder import Encoder
from polymask.model.heads import SequencePredictor
from polymask.runtime import autocast, precision_used, resolve_device, where_run
from polymask.tasks.data.loading import TaskData, TaskSplit, with_caps
from polymask.tasks.data.task_kind import TaskKind
from polymask.tasks.finetune.features import MoleculeFeatures, feature_rows, molecules
from polymask.tasks.finetune.loop import fit
from polymask.tasks.finetune.saved_meta import finetuned_meta
from polymask.tasks.metrics.scoring import score
from polymask.tokenization import SpecialIds
from polymask.tracking import Reporter


@dataclass
class EncodedSplit:
    sequences: list[list[int]]
    labels: np.ndarray
    truncated: int
    #: (N, F) extra features per example (``extra_features``), or None
    features: np.ndarray | None = None


def first_windows(split: TaskSplit, modality: Modality, tokenizer: Tokenizer, max_len: int) -> TaskSplit:
    """The split with each input cut to what the model reads (``Modality.first_window``), so that augmentation and
    test-time variants are made of the same bases."""
    return replace(split, inputs=model_windows(split.inputs, modality, tokenizer, max_len))


def encode_split(split: TaskSplit, modality: Modality, tokenizer: Tokenizer, max_len: int) -> EncodedSplit:
    """Token ids as every path that applies a model reads them (``tokenize_normalised``): over-long examples are read
    from their first ``max_len`` tokens and counted."""
    read = tokenize_normalised(split.inputs, modality, tokenizer, max_len)
    return EncodedSplit(read.ids, split.labels, read.truncated)


def augmented_epochs(split: TaskSplit, modality: Modality, tokenizer: Tokenizer, max_len: int, seed: int,
                     invariances: Collection[str] = ()) -> Callable[[int], EncodedSplit]:
    """``epoch -> split``: each epoch's examples drawn through ``modality.augmented(invariances)`` with their own
    seed (the same for every system, so systems see the same variants)."""
    augmenter = modality.augmented(invariances)

    @functools.lru_cache(maxsize=1)  # fit asks for epoch 0 twice (to count the steps, then to train)
    def of_epoch(epoch: int) -> EncodedSplit:
        rng = random.Random(f"finetune-augment/{seed}/{epoch}")
        variants = [tuple(augmenter.augment(text, rng) for text in inputs) for inputs in split.inputs]
        return encode_split(TaskSplit(variants, split.labels), augmenter, tokenizer, max_len)

    return of_epoch


def _predict(model: SequencePredictor, head: TaskKind, data: EncodedSplit, batch_size: int, pad: int,
             device: torch.device, precision: str) -> np.ndarray:
    def forward(batch: Batch, indices: np.ndarray) -> np.ndarray:
        return head.predict(model(batch.input_ids, batch.attention_mask, feature_rows(data.features, indices, device)))

    model.eval()
    predictions = run_batched(data.sequences, forward, model.n_outputs, batch_size, pad, device, precision)
    model.train()
    return predictions


def with_features(split: EncodedSplit, inputs: list[tuple[str, ...]], features: MoleculeFeatures | None) -> EncodedSplit:
    """``split`` with the extra features of its ``inputs`` (the first input of each example: its molecule)."""
    if features is None:
        return split
    return replace(split, features=features.transform(molecules(inputs)))


def extra_features(config: FinetuneConfig, modality: Modality, train: TaskSplit) -> MoleculeFeatures | None:
    """The ``extra_features`` sets fitted on the training molecules, or None; molecular sets need SMILES."""
    if not config.extra_features:
        return None
    if modality.config.name != "smiles":
        raise ConfigError(f"extra_features {config.extra_features} are molecular (computed from SMILES); this task's "
                          f"modality is {modality.config.name}")
    return MoleculeFeatures.fit(config.extra_features, molecules(train.inputs))


def finetune(task: TaskData, encoder: Encoder, tokenizer: Tokenizer, modality: Modality, config: FinetuneConfig,
             seed: int, save_to: SaveTarget | None = None, reporter: Reporter | None = None) -> dict[str, Any]:
    """Fine-tune ``encoder`` on ``task``; returns metrics at the best validation epoch and counts. With
    ``save_to``, the model of the best validation epoch is saved there (``polymask.load_model`` opens it);
    ``reporter`` gets each epoch's training loss and validation metrics."""
    started = time.perf_counter()
    torch.manual_seed(seed)
    device = resolve_device(config.device)
    spec = task.spec
    metric_names = [spec.metric, *spec.extra_metrics]
    pad = SpecialIds.of(tokenizer).pad
    # capped validation and test subsets are the same for every system and seed
    capped = with_caps(task, seed, config.max_train_examples, config.max_valid_examples, config.max_test_examples)
    train_split, valid_split, test_split = capped.train, capped.valid, capped.test
    features = extra_features(config, modality, train_split)
    train, valid, test = (with_features(encode_split(split, modality, tokenizer, config.max_len), split.inputs, features)
                          for split in (train_split, valid_split, test_split))
    invariances = modality.invariances(spec.invariant_to)
    epoch_data = (augmented_epochs(first_windows(train_split, modality, tokenizer, config.max_len), modality,
                                   tokenizer, config.max_len, seed, invariances)
                  if config.augment else lambda epoch: train)
    head = spec.task_kind(train.labels)  # the kind's loss and prediction rule, fitted to the training labels
    model = spec.task_kind.network(encoder, task.n_outputs, config.pooling, config.dropout,
                                   features.width if features else 0, config.head).to(device)
    if config.freeze_encoder:
        model.encoder.requires_grad_(False)
    sampler = BatchSampler(np.array([len(s) for s in train.sequences]), config.batch_size, seed)
    labels = torch.as_tensor(train.labels, dtype=torch.float32)
    drawn = train

    def epoch_batches(epoch: int) -> list[np.ndarray]:
        nonlocal drawn
        drawn = epoch_data(epoch)
        return sampler.epoch(epoch)

    def loss_of(indices: np.ndarray) -> Tensor:
        batch = collate([drawn.sequences[i] for i in indices], pad).to(device)
        with autocast(device, config.precision):
            logits = model(batch.input_ids, batch.attention_mask, feature_rows(train.features, indices, device))
        return head.loss(logits, labels[indices].to(device))

    def evaluate(split: EncodedSplit) -> dict[str, float]:
        return score(metric_names, split.labels,
                     _predict(model, head, split, config.batch_size, pad, device, config.precision))

    def averaged(split: TaskSplit, single: EncodedSplit) -> tuple[dict[str, float], float]:
        """Scores of the mean prediction over each record's variants; they read their record's features (``single``)."""
        windows = first_windows(split, modality, tokenizer, config.max_len).inputs
        variants, ids = encode_variants(windows, modality, tokenizer, config.max_len, invariances)
        rows = single.features[variants.owner] if single.features is not None else None
        encoded = EncodedSplit(ids, split.labels[variants.owner], 0, rows)
        predictions = _predict(model, head, encoded, config.batch_size, pad, device, config.precision)
        return score(metric_names, split.labels, variants.average(predictions)), variants.per_record

    fitted = fit(model, config, epoch_batches, loss_of, lambda: evaluate(valid), spec.metric, reporter)
    test_metrics = evaluate(test)
    averaged_scores: dict[str, Any] = {}
    if config.test_time_average and invariances:  # the best epoch's model, chosen on single predictions
        (valid_averaged, per_record), (test_averaged, _) = averaged(valid_split, valid), averaged(test_split, test)
        if per_record > 1:  # else no record has a variant (e.g. no reading frame to shift): no row of its own
            averaged_scores["averaged"] = {"valid": valid_averaged, "test": test_averaged,
                                           "variants_per_example": per_record,
                                           "over": modality.varied(invariances)}
    for name, split in capped.extra_tests.items():
        encoded = with_features(encode_split(split, modality, tokenizer, config.max_len), split.inputs, features)
        test_metrics.update({f"{name}_{metric}": value for metric, value in evaluate(encoded).items()})
    if save_to is not None:
        save_finetuned(save_to.folder, model, tokenizer, finetuned_meta(
            spec, task.label_names, task.n_outputs, modality, encoder, config, seed, fitted.valid, fitted.best_epoch,
            save_to, head.normalisation(), extra_features=features.saved() if features else None))
    return {
        "task": spec.key, "seed": seed, "metric": spec.metric, "best_epoch": fitted.best_epoch,
        "epochs_run": fitted.epochs_run, "valid": fitted.valid, "test": test_metrics,
        "n_train": len(train.sequences), "n_valid": len(valid.sequences), "n_test": len(test.sequences),
        "truncated": train.truncated + valid.truncated + test.truncated,
        "skipped": len(task.skipped), "duplicates_removed": task.duplicates_removed,
        "split": spec.split.method, "precision": precision_used(device, config.precision), **where_run(device),
        "time_s": round(time.perf_counter() - started, 2), **averaged_scores,
    }
