"""``polymask export``: a checkpoint as a Hugging Face folder that ``transformers`` alone loads.

The folder holds ``config.json`` (``model_type: polymask`` with an ``auto_map``), the weights in
``model.safetensors``, the two remote-code files of ``hf_remote/`` (they import only torch and
transformers; load with ``trust_remote_code=True``), the tokenizer (``PreTrainedTokenizerFast``, also
named by ``config.json``'s ``tokenizer_class``) and a model card ``README.md``. It is written into a
temporary folder, checked (the exported model's hidden states against polymask's encoder on records of
the training corpus) and renamed into place.

``write_export`` is the one writer; a fine-tuned model exports through it with its fine-tuned encoder
and ``sequence_head(...)`` (weights under ``classifier.*``, task fields in the config, loaded by
``AutoModelForSequenceClassification``).
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer

from polymask import jsonio
from polymask.atomic_folder import staged_folder
from polymask.errors import CheckpointError, PolymaskError
from polymask.export.esm_native import HF_ACTIVATIONS, esm_config, esm_weights, native_blockers
from polymask.export.model_card import CardFacts, card_facts, model_card
from polymask.export.samples import sample_batch
from polymask.model.encoder import Encoder
from polymask.objectives import Objective
from polymask.objectives.base import LMHead
from polymask.tokenization import SpecialIds, save_tokenizer
from polymask.training.checkpoint import load_checkpoint
from polymask.transformers_quiet import quiet_transformers
from polymask.weights_io import save_weights

REMOTE_DIR = Path(__file__).parent / "hf_remote"
REMOTE_FILES = ("configuration_polymask.py", "modeling_polymask.py")
MLM_HEADS = ("mlm", "maelm", "exlm")  # objectives whose LM head the export carries (fill-mask)
TOLERANCE = 1e-4
ESM_EXTRAS = ("pooler.", "contact_head.")  # parts of transformers' EsmModel that polymask's encoder has not
# save_tokenizer's class, named in config.json too: transformers 4.45's pipeline() loads a tokenizer for a
# remote-code config only when the config names its class
TOKENIZER_CLASS = "PreTrainedTokenizerFast"


@dataclass
class SequenceHead:
    """A fine-tuned sequence head in the export's layout (``PolymaskForSequenceClassification``)."""

    weights: dict[str, torch.Tensor]  # classifier.weight (n_outputs, d_model), classifier.bias
    config: dict[str, Any]            # num_labels, problem_type, id2label, label2id, pooling, classifier_dropout


def sequence_head(weight: torch.Tensor, bias: torch.Tensor, kind: str, label_names: list[str], pooling: str,
                  dropout: float, mean: list[float] | None = None, std: list[float] | None = None) -> SequenceHead:
    """A polymask task head (``SequencePredictor.head``) for transformers.

    ``kind`` is polymask's task kind: ``regression`` (the targets' ``mean``/``std`` are folded into the
    linear layer, so outputs come in original units), ``binary`` (one sigmoid per task:
    multi_label_classification) or ``multiclass`` (softmax: single_label_classification).
    """
    problem = {"regression": "regression", "binary": "multi_label_classification",
               "multiclass": "single_label_classification"}[kind]
    weight, bias = weight.detach().float(), bias.detach().float()
    if kind == "regression":
        scale, shift = torch.tensor(std, dtype=torch.float32), torch.tensor(mean, dtype=torch.float32)
        weight, bias = weight * scale[:, None], bias * scale + shift
    id2label = dict(enumerate(label_names))
    return SequenceHead({"classifier.weight": weight.contiguous(), "classifier.bias": bias.contiguous()},
                        {"num_labels": len(label_names), "problem_type": problem, "id2label": id2label,
                         "label2id": {name: index for index, name in id2label.items()}, "pooling": pooling,
                         "classifier_dropout": dropout})


@dataclass
class ExportResult:
    folder: Path
    architectures: list[str]
    max_abs_diff: float | None                 # hidden states, exported vs polymask, on ``checked_records``
    checked_records: int
    native: bool = False                       # the encoder is transformers' own EsmModel (no remote code for it)
    notes: list[str] = field(default_factory=list)


def _prefixed(prefix: str, module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {f"{prefix}{name}": tensor.detach().float().contiguous() for name, tensor in module.state_dict().items()}


def hf_weights(encoder: Encoder, objective: Objective | None = None) -> dict[str, torch.Tensor]:
    """Weights in the remote-code layout: the encoder under ``polymask.``; with an MLM-family ``objective``
    also its LM head (``lm_head.``) and MAE-LM's decoder (``decoder.``). Other objective modules (ExLM's
    transition scorer) are dropped."""
    weights = _prefixed("polymask.", encoder)
    if objective is not None and isinstance(getattr(objective, "head", None), LMHead):
        weights.update(_prefixed("lm_head.", objective.head))
        decoder = getattr(objective, "decoder", None)
        if decoder is not None:
            weights.update(_prefixed("decoder.", decoder))
    return weights


def hf_config(encoder: Encoder, specials: SpecialIds, objective: Objective | None = None) -> dict[str, Any]:
    """``PolymaskConfig`` fields for an encoder (and the objective whose head the export carries)."""
    config = encoder.config
    fields: dict[str, Any] = {
        "vocab_size": encoder.vocab_size, "hidden_size": config.d_model, "num_hidden_layers": config.n_layers,
        "num_attention_heads": config.n_heads, "intermediate_size": config.d_ff, "hidden_dropout": config.dropout,
        "attention_dropout": config.attention_dropout, "layer_norm_eps": config.norm_eps,
        "rotary_base": config.rope_theta, "rotary_2d": config.rope_2d, "embed_norm": config.embed_norm,
        "hidden_act": HF_ACTIVATIONS[config.activation], "objective": None if objective is None else objective.config.name, "mask_token_id": specials.mask,
        "pad_token_id": specials.pad,
    }
    decoder = getattr(objective, "decoder", None)
    if decoder is not None:
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
    maelm = objective is not None and getattr(objective, "decoder", None) is not None
    plain_head = objective is not None and not maelm
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
                     "AutoModelForSequenceClassification needs trust_remote_code=True (AutoModel is native EsmModel)")
    return ExportPlan(config, weights, architectures, auto_map, True, notes)


def _write_model(folder: Path, plan: ExportPlan) -> None:
    if plan.native:
        from transformers import EsmConfig

        with quiet_transformers():
            config = EsmConfig(**{key: value for key, value in plan.config.items() if key != "model_type"})
    else:
        from polymask.export.hf_remote.configuration_polymask import PolymaskConfig

        config = PolymaskConfig(**plan.config)
    config.architectures = plan.architectures
    if plan.auto_map:
        config.auto_map = plan.auto_map
    config.tokenizer_class = TOKENIZER_CLASS
    config.save_pretrained(str(folder))
    save_weights(plan.weights, folder / "model.safetensors", metadata={"format": "pt"})
    if plan.auto_map:
        for name in REMOTE_FILES:
            shutil.copyfile(REMOTE_DIR / name, folder / name)


def _model_class(architecture: str) -> Any:
    from polymask.export.hf_remote import modeling_polymask

    if hasattr(modeling_polymask, architecture):
        return getattr(modeling_polymask, architecture)
    import transformers

    return getattr(transformers, architecture)


def _hidden_difference(model: Any, encoder: Encoder, batch: dict[str, torch.Tensor]) -> float:
    exported = getattr(model, "esm", getattr(model, "polymask", model)).eval()
    was_training = encoder.training
    encoder.eval()
    with torch.no_grad():
        expected = encoder(batch["input_ids"], attention_mask=batch["attention_mask"].bool())
        got = exported(**batch).last_hidden_state
    encoder.train(was_training)
    real = batch["attention_mask"].bool()
    return float((expected[real] - got[real]).abs().max())


def check_export(folder: Path, plan: ExportPlan, encoder: Encoder, batch: dict[str, torch.Tensor] | None) -> float | None:
    """Load the folder as its first architecture (every weight used, none missing) and, for a native export, as
    ``EsmModel`` (what ``AutoModel`` gives without remote code); return the largest |difference| between their last
    hidden states and polymask's encoder (fp32, real positions of a padded batch); None without a batch."""
    loads = list(dict.fromkeys([plan.architectures[0], *(["EsmModel"] if plan.native else [])]))
    differences = []
    for index, architecture in enumerate(loads):
        with quiet_transformers():
            model, info = _model_class(architecture).from_pretrained(str(folder), output_loading_info=True)
        absent = ESM_EXTRAS if plan.native else ()
        wrong = {"missing_keys": [key for key in info["missing_keys"] if not key.removeprefix("esm.").startswith(absent)],
                 "unexpected_keys": [] if index else list(info["unexpected_keys"])}  # the second load sees heads
        if any(wrong.values()):
            raise CheckpointError(f"the exported weights do not fit {architecture}: {wrong}")
        if batch is not None:
            differences.append(_hidden_difference(model, encoder, batch))
    return max(differences) if differences else None


def write_export(out: Path, encoder: Encoder, tokenizer: Tokenizer, max_len: int, card: CardFacts,
                 batch: dict[str, torch.Tensor] | None, objective: Objective | None = None,
                 head: SequenceHead | None = None, overwrite: bool = False) -> ExportResult:
    """Write, check and atomically place an export of ``encoder`` with the LM head of ``objective``
    (``mlm``, ``maelm``, ``exlm``) and/or a fine-tuned ``head``.

    The encoder is a native ``EsmModel`` where that is exact (``esm_native.native_blockers``), with only the
    parts that have no native counterpart in remote code; otherwise the whole model is remote code. This is
    the one writer: ``export_checkpoint`` calls it for pretrained checkpoints; a fine-tuned model calls it
    with its fine-tuned encoder and ``sequence_head(...)`` of its task head.
    """
    out = Path(out)
    if out.exists() and not overwrite:
        raise PolymaskError(f"{out} already exists; pass --overwrite to replace it")
    specials = SpecialIds.of(tokenizer)
    masked_lm = objective is not None and objective.config.name in MLM_HEADS
    notes = []
    if objective is not None and not masked_lm:
        notes.append(f"objective '{objective.config.name}' has no LM head the export knows: no AutoModelForMaskedLM")
    lm_objective = objective if masked_lm else None
    blockers = native_blockers(encoder)
    plan = (remote_plan(encoder, specials, lm_objective, head, blockers) if blockers
            else native_plan(encoder, specials, max_len, lm_objective, head))
    plan.notes[:0] = notes
    with staged_folder(out) as tmp:
        _write_model(tmp, plan)
        save_tokenizer(tokenizer, tmp, model_max_length=max_len)
        difference = check_export(tmp, plan, encoder, batch)
        if difference is not None and difference > TOLERANCE:
            raise CheckpointError(f"the exported model differs from polymask's encoder by {difference:.2e} "
                                  f"(tolerance {TOLERANCE:g}); nothing was written to {out}")
        checked = 0 if batch is None else int(batch["input_ids"].shape[0])
        (tmp / "README.md").write_text(model_card(card, plan, difference, checked, head))
        if out.exists() and not overwrite:  # created while this export ran
            raise PolymaskError(f"{out} already exists; pass --overwrite to replace it")
    return ExportResult(out, plan.architectures, difference, checked, plan.native, plan.notes)


def export_checkpoint(path: Path, out: Path, overwrite: bool = False) -> ExportResult:
    """Export the pretrained checkpoint at ``path`` (a run or checkpoint folder) to the folder ``out``."""
    checkpoint = load_checkpoint(path)
    objective = checkpoint.build_objective().eval()
    max_len = int(checkpoint.config.get("data", {}).get("max_len", 512))
    return write_export(out, objective.encoder, checkpoint.tokenizer, max_len, card_facts(checkpoint),
                        sample_batch(checkpoint, max_len), objective, overwrite=overwrite)


def export_summary(result: ExportResult) -> str:
    """One JSON line for the command line."""
    return jsonio.dumps({"out": str(result.folder), "architectures": result.architectures, "native": result.native,
                       "max_abs_diff_hidden": result.max_abs_diff, "checked_records": result.checked_records,
                       "notes": result.notes})
