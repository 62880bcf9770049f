"""Trained encoders applied to new records: ``FinetunedModel`` (predictions and embeddings), ``PretrainedEncoder``
and ``HFFolderEncoder`` (embeddings), all reading records exactly as fine-tuning did.

Records are a list of strings (tuples of two for a sentence-pair task), a pandas Series, or a DataFrame
whose columns are found as ``polymask predict`` finds a file's (the model's input columns, else the modality's
usual names, in any case). A record the modality rejects keeps its row: empty predictions, a
NaN embedding, and the reason. A record longer than the model is read from its first ``max_len`` tokens, as at
fine-tuning, and counted.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import torch
from tokenizers import Tokenizer

from polymask.checkpoints.finetuned import read_finetuned
from polymask.checkpoints.finetuned_meta import SavedTask
from polymask.checkpoints.pretrained import FINETUNED_META, LoadedCheckpoint, read_checkpoint
from polymask.data.model_inputs import Encoded, Inputs, as_inputs, encode_records, run_batched
from polymask.data.variants import encode_variants
from polymask.errors import CheckpointError
from polymask.inference.columns import REASON, Applied
from polymask.inference.span import predict_answers_of
from polymask.inference.table import TableLayout, choose_columns
from polymask.modalities import Modality, build_modality
from polymask.plugins import REGISTER_FIRST
from polymask.model.encoder import Encoder
from polymask.model.heads import Pooling
from polymask.model.heads import pool as pool_states
from polymask.registry import UnknownNameError
from polymask.runtime import resolve_device
from polymask.tasks.data.task_kind import TASK_KINDS, TaskKind
from polymask.tasks.finetune.features import MoleculeFeatures, feature_rows, molecules
from polymask.tasks.finetune.hf_folder import HFEncoder, HFFolder, RawInputs, load_hf_folder
from polymask.tokenization import SpecialIds

if TYPE_CHECKING:
    import pandas as pd


def kind_of(task: SavedTask, meta_file: Path) -> type[TaskKind]:
    """The registered task kind a saved model's task names, checked against the task's outputs and classes."""
    try:
        kind = TASK_KINDS.get(task.kind)
        kind.check_saved(task)
    except UnknownNameError as exc:
        raise CheckpointError(f"the model's task kind: {exc}; {REGISTER_FIRST}") from None
    except ValueError as exc:
        raise CheckpointError(f"{meta_file}: task: {exc}") from None
    return kind


class AppliedEncoder:
    """An encoder with the tokenizer and modality it was trained with, ready to embed records."""

    def __init__(self, encoder: Encoder, tokenizer: Tokenizer, modality: Modality, max_len: int, pooling: Pooling,
                 input_columns: Sequence[str], device: str = "auto") -> None:
        self.device = resolve_device(device)
        self.encoder = encoder.eval().to(self.device)
        self.tokenizer = tokenizer
        self.modality = modality
        #: a longer record is read from its first ``max_len`` tokens and counted (``Encoded.truncated``): a fine-tuned
        #: model's own (finetuned.json), a pretraining checkpoint's ``data.max_len``, a Hugging Face folder's
        self.max_len = max_len
        self.pooling = pooling
        self.input_columns = list(input_columns)
        self.pad = SpecialIds.of(tokenizer).pad
        #: how its own task's files were laid out (GLUE's quotes as plain text, CoLA's missing header), so that
        #: predict and embed read such a file as fine-tuning read it
        self.table_layout = TableLayout()

    @property
    def column_defaults(self) -> list[str]:
        """The column names tried, in order, in a table or DataFrame that names none: the model's, the modality's."""
        return [*self.input_columns, *self.modality.default_columns]

    def parse_records(self, records: Any) -> tuple[list[Inputs], list[str | None], Any]:
        """``as_inputs`` of ``records``, a DataFrame's input columns chosen as in a file given to ``predict``."""
        import pandas as pd

        columns = self.input_columns
        if isinstance(records, pd.DataFrame):
            columns = choose_columns([str(name) for name in records.columns], None, self.column_defaults,
                                     len(columns), "the DataFrame", "DataFrame.rename(columns=...)")
        return as_inputs(records, columns)

    def encode_inputs(self, inputs: Sequence[Inputs], reasons: Sequence[str | None]) -> Encoded:
        """Token ids of parsed records, read through the modality as at training."""
        return encode_records(inputs, reasons, self.modality, self.tokenizer, self.max_len)

    def embed(self, records: Any, pool: Pooling | None = None, batch_size: int = 64, progress: bool = False,
              with_reasons: bool = False) -> np.ndarray | tuple[np.ndarray, list[str | None]]:
        """One vector per record (N, d_model), float32, in input order: the final hidden states pooled by
        ``pool`` (default: the model's pooling; mean over real tokens for a pretrained encoder). A rejected
        record's row is NaN; ``with_reasons`` also returns why (None for embedded records)."""
        inputs, reasons, _ = self.parse_records(records)
        encoded = self.encode_inputs(inputs, reasons)
        vectors = self.embed_encoded(encoded, pool, batch_size, progress)
        return (vectors, encoded.reasons) if with_reasons else vectors

    def embed_encoded(self, encoded: Encoded, pooling: Pooling | None = None, batch_size: int = 64,
                      progress: bool = False) -> np.ndarray:
        """Embeddings of already encoded records (NaN rows where rejected)."""
        pooling = pooling or self.pooling
        accepted = encoded.accepted

        def forward(batch: Any, indices: np.ndarray) -> np.ndarray:
            hidden = self.encoder(batch.input_ids, attention_mask=batch.attention_mask)
            return pool_states(hidden, batch.attention_mask, pooling).float().cpu().numpy()

        vectors = np.full((len(encoded.ids), self.encoder.config.d_model), np.nan, dtype=np.float32)
        vectors[accepted] = run_batched([encoded.ids[i] for i in accepted], forward, vectors.shape[1], batch_size,
                                        self.pad, self.device, progress=progress, desc="embed")
        return vectors


@dataclass
class PretrainedCheckpoint(LoadedCheckpoint):
    """A pretraining checkpoint (``polymask.load_checkpoint``) that also embeds records."""

    def embed(self, records: Any, pool: str = "mean", batch_size: int = 64, device: str = "auto",
              with_reasons: bool = False) -> Any:
        """One vector per record (N, d_model) from the encoder's final hidden states, mean-pooled over the real
        tokens by default (``pool="cls"``: the [CLS] state); records read through the run's modality, rejected
        ones NaN (``with_reasons``: also why). See ``AppliedEncoder.embed``."""
        return PretrainedEncoder(self, device).embed(records, pool, batch_size, with_reasons=with_reasons)


def load_checkpoint(path: str | Path) -> PretrainedCheckpoint:
    """Load (and verify) a pretraining checkpoint from a checkpoint or run folder, or a built-in model's name."""
    loaded = read_checkpoint(path)
    return PretrainedCheckpoint(**{item.name: getattr(loaded, item.name) for item in fields(loaded)})


class PretrainedEncoder(AppliedEncoder):
    """The encoder of a pretraining checkpoint (MLM, MAE-LM or ExLM; the objective's modules dropped)."""

    def __init__(self, checkpoint: "LoadedCheckpoint", device: str = "auto") -> None:
        run = checkpoint.run_config
        modality = build_modality(run.modality)
        super().__init__(checkpoint.build_encoder(), checkpoint.tokenizer, modality, run.data.max_len, "mean",
                         [modality.default_columns[0]], device)
        self.folder = checkpoint.folder


def hf_max_len(folder: HFFolder) -> int:
    """The most tokens the folder's model takes: its tokenizer's ``model_max_length``, at most its positions."""
    lengths = [folder.tokenizer.hf.model_max_length, getattr(folder.model.config, "max_position_embeddings", None)]
    return min(length for length in lengths if isinstance(length, int))


class HFFolderEncoder(AppliedEncoder):
    """A local Hugging Face folder's model (its last hidden state) with its own tokenizer; records are checked and
    normalised by ``modality`` and handed to that tokenizer as plain text, as fine-tuning hands them."""

    def __init__(self, folder: Path, modality: Modality, device: str = "auto") -> None:
        loaded = load_hf_folder(folder)
        super().__init__(HFEncoder(loaded.model, loaded.segment_separator), loaded.tokenizer, RawInputs(modality),
                         hf_max_len(loaded), "mean", [modality.default_columns[0]], device)
        self.folder = Path(folder)


class FinetunedModel(AppliedEncoder):
    """A fine-tuned model folder (``polymask finetune`` writes one per task and seed): ``predict`` and ``embed``."""

    def __init__(self, folder: Path, device: str = "auto") -> None:
        loaded = read_finetuned(folder)
        self.folder = loaded.folder
        #: what the folder's ``finetuned.json`` says: the task, the settings it was fine-tuned with, ...
        self.meta = meta = loaded.meta
        encoder = Encoder(meta.encoder.config, meta.encoder.vocab_size)
        self.kind = kind_of(meta.task, loaded.folder / FINETUNED_META)
        #: the molecular features its head also reads (``extra_features`` at fine-tuning), else None
        self.features = MoleculeFeatures.from_saved(meta.extra_features) if meta.extra_features else None
        self.network: torch.nn.Module = self.kind.network(encoder, meta.task.n_outputs, meta.pooling, 0.0,
                                                          self.features.width if self.features else 0,
                                                          meta.finetune.head)
        self.head = self.kind.restore(meta.normalisation)  # the kind's prediction rule, as saved
        try:
            self.network.load_state_dict(loaded.weights)
        except RuntimeError as exc:  # torch lists every mismatch on a line of its own: the first says enough
            first = next((line.strip() for line in str(exc).splitlines()[1:] if line.strip()), str(exc))
            raise CheckpointError(f"{folder}: weights do not fit the configuration finetuned.json states ({first})") \
                from None
        super().__init__(encoder, loaded.tokenizer, build_modality(meta.modality), meta.max_len, meta.pooling,
                         meta.task.input_columns, device)
        self.network.eval().to(self.device)
        names = meta.task.column_names
        self.table_layout = TableLayout(meta.task.delimiter != "\t" or meta.task.quoting,
                                        tuple(names) if names else None)
        #: the invariances predictions are averaged over (``test_time_average`` at fine-tuning), else none
        self.averaged_over: list[str] = (self.modality.varied(meta.task.invariant_to)
                                         if meta.finetune.test_time_average else [])

    def predict(self, records: Any, batch_size: int = 64, progress: bool = False) -> "pd.DataFrame":
        """One row per record, in order (with the index of a DataFrame or Series given): the task kind's prediction
        columns (``TaskKind.prediction_columns``; for a span model ``predicted_answer``) and ``reason``, set where
        the record was rejected and its prediction cells left empty."""
        inputs, reasons, index = self.parse_records(records)
        frame = self.predict_inputs(inputs, reasons, batch_size, progress).frame
        if index is not None:
            frame.index = index
        return frame

    def predict_inputs(self, inputs: Sequence[Inputs], reasons: Sequence[str | None], batch_size: int = 64,
                       progress: bool = False) -> Applied:
        """Predictions for parsed inputs, with the counts a command-line summary reports."""
        import pandas as pd

        if not self.kind.table:  # span: answers read off the context's windows
            return predict_answers_of(self, inputs, reasons, batch_size)
        encoded = self.encode_inputs(inputs, reasons)
        accepted = encoded.accepted
        outputs = np.full((len(inputs), self.meta.task.n_outputs), np.nan)

        records = [encoded.records[i] for i in accepted]
        features = self.features.transform(molecules(records)) if self.features and records else None

        def run(ids: Sequence[list[int]], owner: np.ndarray) -> np.ndarray:
            """Predictions for ``ids``, each example reading the features of the record ``owner`` names."""
            rows_of = features[owner] if features is not None else None

            def forward(batch: Any, indices: np.ndarray) -> np.ndarray:
                rows = feature_rows(rows_of, indices, self.device)
                extra = {} if rows is None else {"features": rows}
                return self.head.predict(self.network(batch.input_ids, batch.attention_mask, **extra))

            return run_batched(ids, forward, outputs.shape[1], batch_size, self.pad, self.device, progress=progress,
                               desc="predict")

        if len(accepted) and self.averaged_over:  # chosen at fine-tuning: the mean over each record's variants
            variants, varied = encode_variants(records, self.modality, self.tokenizer, self.max_len, self.averaged_over)
            outputs[accepted] = variants.average(run(varied, variants.owner))
        elif len(accepted):  # (with none accepted, every row keeps its reason)
            outputs[accepted] = run([encoded.ids[i] for i in accepted], np.arange(len(records)))
        frame = pd.DataFrame(self.kind.prediction_columns(self.meta.task, outputs))
        frame[REASON] = encoded.reasons
        return Applied(frame, len(accepted), len(inputs) - len(accepted), encoded.truncated, encoded.unknown)


def load_model(path: str | Path, device: str = "auto") -> FinetunedModel:
    """Open a fine-tuned model folder (``cells/<system>/<task>/seed-N/`` of a finetune or benchmark run), or the
    output folder of a run that saved one model (``polymask finetune --data ... --out runs/logS``).

    >>> model = polymask.load_model("runs/finetune-moleculenet-esol/cells/demo-mlm/moleculenet-esol/seed-0")
    >>> model.predict(["CCO", "c1ccccc1"])      # DataFrame: predicted_<target> in original units, reason
    >>> model.embed(["CCO", "c1ccccc1"])        # (2, d_model) float32
    """
    return FinetunedModel(Path(path), device)
