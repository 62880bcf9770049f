"""``polymask export`` of a fine-tuned model folder: the fine-tuned encoder with its task head, loaded by
``AutoModelForSequenceClassification`` (and ``AutoModel``), checked against polymask before it is written.

The task kind maps the head (``TaskKind.exported_layer``, ``problem_type``, ``output_names``): regression heads come
out in the targets' original units (the saved mean and std are folded into the layer); binary tasks as one sigmoid
output per task, multiclass tasks as softmax over the classes. Kinds without a ``card_phrase`` (span, question
answering) are not exported. A model that averages its predictions over a record's variants (test-time averaging) is
exported with its single-prediction head; the card says how to average.
"""
from __future__ import annotations

from pathlib import Path

from polymask.errors import PolymaskError
from polymask.export.hf import ExportResult, write_export
from polymask.export.layout import sequence_head
from polymask.export.model_card import CardFacts
from polymask.export.samples import encode_padded, sample_records
from polymask.tasks.data.task_kind import TASK_KINDS


def export_finetuned(path: Path, out: Path, overwrite: bool = False) -> ExportResult:
    """Export the fine-tuned model folder ``path`` to the folder ``out``."""
    from polymask.inference.model import load_model

    model = load_model(path, device="cpu")
    meta, kind = model.meta, model.kind
    if kind.card_phrase is None:
        exported = [name for name in TASK_KINDS if TASK_KINDS.get(name).card_phrase is not None]
        raise PolymaskError(f"{path}: a {kind.name} model, which has no exported head; polymask export writes "
                            f"pretrained encoders and sequence-level models ({', '.join(exported)})")
    mlp_head = meta.finetune.head == "mlp"
    if model.features is not None or mlp_head:
        extras = [f"a head that also reads {'+'.join(model.features.names)} features"] if model.features else []
        extras += ["an mlp head (a hidden layer before the output layer)"] if mlp_head else []
        raise PolymaskError(f"{path}: {' and '.join(extras)}, which a transformers sequence-classification model "
                            f"cannot reproduce; use polymask predict or polymask.load_model for this model")
    normalisation = meta.normalisation or {}
    head = sequence_head(model.network.head.weight, model.network.head.bias, kind.name, kind.output_names(meta.task),
                         meta.pooling, meta.finetune.dropout, normalisation.get("mean"), normalisation.get("std"))
    texts = sample_records(model.modality, [])
    batch = encode_padded(model.tokenizer, texts, model.max_len) if texts else None
    pretrained, task = meta.pretrained, meta.task
    facts = CardFacts(
        source=str(path), modality=meta.modality.model_dump(mode="json", exclude_unset=True),
        objective={"name": pretrained.objective or "unknown"}, encoder=meta.encoder.config.model_dump(mode="json"),
        data=f"pretrained checkpoint `{pretrained.checkpoint}`, fine-tuned on {task.key}", max_len=model.max_len,
        vocab_size=meta.encoder.vocab_size, step=pretrained.step, max_steps=None,
        task={"key": task.key, "metric": meta.metric, "valid": meta.valid, "seed": meta.seed,
              "averaged_over": list(model.averaged_over), "input_columns": task.input_columns},
        record_advice=model.modality.export_record_advice(model.max_len))
    result = write_export(out, model.encoder, model.modality.exported_tokenizer(model.tokenizer), model.max_len,
                          facts, batch, head=head, overwrite=overwrite)
    if model.averaged_over:
        result.notes.append(f"the head predicts one record at a time; polymask's model averages its predictions over "
                            f"{', '.join(model.averaged_over)} (the model card says how)")
    return result
