"""What an export holds: the config fields, weights and architectures of a folder, either in transformers'
native ESM layout (``native_plan``) or in polymask's remote-code layout (``remote_plan``), and a fine-tuned
task head in that layout (``sequence_head``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from polymask.export.esm_native import HF_ACTIVATIONS, esm_config, esm_weights
from polymask.model.encoder import Encoder
from polymask.objectives import Objective
from polymask.tasks.data.task_kind import TASK_KINDS
from polymask.tokenization import SpecialIds


@dataclass
class SequenceHead:
    """A fine-tuned sequence head in the export's layout (``PolymaskForSequenceClassification``)."""

    weights: dict[str, torch.Tensor]  # classifier.weight (n_outputs, d_model), classifier.bias
    config: dict[str, Any]            # num_labels, problem_type, id2label, label2id, pooling, classifier_dropout
    about: str = ""                   # what the head is, for the model card (the kind's ``card_phrase``)
    note: str = ""                    # what the export did to the layer, for the model card (``export_note``)


def sequence_head(weight: torch.Tensor, bias: torch.Tensor, kind: str, label_names: list[str], pooling: str,
                  dropout: float, mean: list[float] | None = None, std: list[float] | None = None) -> SequenceHead:
    """A polymask task head (``SequencePredictor.head``) for transformers, as the registered task ``kind`` maps it
    (``TaskKind.problem_type``, ``exported_layer``): ``regression`` (the targets' ``mean``/``std`` are folded into
    the linear layer, so outputs come in original units), ``binary`` (one sigmoid per task:
    multi_label_classification) or ``multiclass`` (softmax: single_label_classification).
    """
    task_kind = TASK_KINDS.get(kind)
    normalisation = None if mean is None else {"mean": mean, "std": std}
    weight, bias = task_kind.exported_layer(weight.detach().float(), bias.detach().float(), normalisation)
    id2label = dict(enumerate(label_names))
    config = {"num_labels": len(label_names), "problem_type": task_kind.problem_type, "id2label": id2label,
              "label2id": {name: index for index, name in id2label.items()}, "pooling": pooling,
              "classifier_dropout": dropout}
    return SequenceHead({"classifier.weight": weight.contiguous(), "classifier.bias": bias.contiguous()}, config,
                        task_kind.card_phrase or "", task_kind.export_note)


def _prefixed(prefix: str, module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {f"{prefix}{name}": tensor.detach().float().contiguous() for name, tensor in module.state_dict().items()}


def hf_weights(encoder: Encoder, objective: Objective | None = None) -> dict[str, torch.Tensor]:
    """Weights in the remote-code layout: the encoder under ``polymask.``; with an ``objective`` that exports an
    LM head (``Objective.lm_export``) also that head (``lm_head.``) and, for the decoder path, the decoder
    (``decoder.``). Other objective modules (ExLM's transition scorer) are dropped."""
    weights = _prefixed("polymask.", encoder)
    if objective is not None and objective.lm_export is not None:
        weights.update(_prefixed("lm_head.", objective.head))
        if objective.lm_export == "decoder":
            weights.update(_prefixed("decoder.", objective.decoder))
    return weights


def hf_config(encoder: Encoder, specials: SpecialIds, objective: Objective | None = None) -> dict[str, Any]:
    """``PolymaskConfig`` fields for an encoder (and the objective whose head the export carries)."""
    config = encoder.config
    fields: dict[str, Any] = {
        "vocab_size": encoder.vocab_size, "hidden_size": config.d_model, "num_hidden_layers": config.n_layers,
        "num_attention_heads": config.n_heads, "intermediate_size": config.d_ff, "hidden_dropout": config.dropout,
        "attention_dropout": config.attention_dropout, "layer_norm_eps": config.norm_eps,
        "rotary_base": config.rope_theta, "rotary_2d": config.rope_2d, "embed_norm": config.embed_norm,
        "hidden_act": HF_ACTIVATIONS[config.activation], "objective": None if objective is None else
        objective.config.name, "mask_token_id": specials.mask, "pad_token_id": specials.pad,
    }
    if objective is not None and objective.lm_export == "decoder":
        decoder = objective.decoder
        first = decoder.blocks[0]
        fields.update(decoder_layers=len(decoder.blocks), decoder_width=first.norm1.normalized_shape[0],
                      decoder_heads=first.attn.n_heads, decoder_intermediate_size=first.mlp.fc.out_features,
                      decoder_dropout=first.drop.p)
    return fields


@dataclass
class ExportPlan:
    """What one export writes: config fields, weights, architectures, the remote-code classes (``auto_map``)
    and a note for each part that has no native counterpart."""

    config: dict[str, Any]
    weights: dict[str, torch.Tensor]
    architectures: list[str]
    auto_map: dict[str, str]
    native: bool
    notes: list[str] = field(default_factory=list)


def remote_plan(encoder: Encoder, specials: SpecialIds, objective: Objective | None, head: SequenceHead | None,
                blockers: list[str]) -> ExportPlan:
    """Everything through ``modeling_polymask.py`` (``model_type: polymask``, ``trust_remote_code=True``)."""
    masked_lm = objective is not None
    auto_map = {"AutoConfig": "configuration_polymask.PolymaskConfig", "AutoModel": "modeling_polymask.PolymaskModel",
                "AutoModelForSequenceClassification": "modeling_polymask.PolymaskForSequenceClassification"}
    if masked_lm:
        auto_map["AutoModelForMaskedLM"] = "modeling_polymask.PolymaskForMaskedLM"
    architectures = ["PolymaskForMaskedLM" if masked_lm else "PolymaskModel"]
    config, weights = hf_config(encoder, specials, objective), hf_weights(encoder, objective)
    if head is not None:
        config.update(head.config)
        weights.update(head.weights)
        architectures = ["PolymaskForSequenceClassification", *architectures[:masked_lm]]
    note = f"no native transformers architecture: {'; '.join(blockers)}. Load with trust_remote_code=True"
    return ExportPlan(config, weights, architectures, auto_map, False, [note])


def native_plan(encoder: Encoder, specials: SpecialIds, max_len: int, objective: Objective | None,
                head: SequenceHead | None) -> ExportPlan:
    """The encoder as native ESM; MAE-LM's decoder path and a fine-tuned head through remote code."""
    config = esm_config(encoder, specials, max_len)
    maelm = objective is not None and objective.lm_export == "decoder"
    plain_head = objective is not None and objective.lm_export == "head"
    weights = esm_weights(encoder, max_len, objective.head if plain_head else None)
    architectures = ["EsmForMaskedLM" if plain_head else "EsmModel"]
    auto_map: dict[str, str] = {}
    notes = []
    if maelm:
        config.update({key: value for key, value in hf_config(encoder, specials, objective).items()
                       if key.startswith("decoder_")})
        weights.update({**_prefixed("mae_decoder.", objective.decoder), **_prefixed("mae_head.", objective.head)})
        auto_map["AutoModelForMaskedLM"] = "modeling_polymask.PolymaskEsmMaeForMaskedLM"
        architectures = ["PolymaskEsmMaeForMaskedLM", "EsmModel"]
        notes.append("MAE-LM's decoder path has no native counterpart: AutoModelForMaskedLM and fill-mask need "
                     "trust_remote_code=True (AutoModel is native EsmModel)")
    if head is not None:
        config.update(head.config)
        weights.update(head.weights)
        auto_map["AutoModelForSequenceClassification"] = "modeling_polymask.PolymaskEsmForSequenceClassification"
        architectures = ["PolymaskEsmForSequenceClassification", *architectures[:objective is not None]]
        notes.append("the fine-tuned head (pooling, then one linear layer) has no native counterpart: "
                     "AutoModelForSequenceClassification needs trust_remote_code=True (without it transformers builds "
                     "EsmForSequenceClassification with a new, untrained head and reports the classifier weights as "
                     "newly initialised; AutoModel is native EsmModel)")
    return ExportPlan(config, weights, architectures, auto_map, True, notes)
