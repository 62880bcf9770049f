"""``polymask export``: a checkpoint as a Hugging Face folder that ``transformers`` alone loads.

The folder holds ``config.json`` (``model_type: esm`` where the encoder is transformers' native ESM,
else ``polymask``; an ``auto_map`` naming the classes that need remote code), the weights in
``model.safetensors``, the two remote-code files of ``hf_remote/`` where a part needs them (they import only
torch and transformers; ``trust_remote_code=True``), the tokenizer (``PreTrainedTokenizerFast``, also
named by ``config.json``'s ``tokenizer_class``) and a model card ``README.md``; ``layout`` decides what goes
where. It is written into a temporary folder, checked (the exported model's hidden states against
polymask's encoder on records of the training corpus) and renamed into place.

``write_export`` is the one writer; a fine-tuned model exports through it with its fine-tuned encoder
and ``layout.sequence_head(...)`` (weights under ``classifier.*``, task fields in the config, loaded by
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
from polymask.checkpoints.atomic import staged_folder
from polymask.checkpoints.pretrained import read_checkpoint
from polymask.errors import CheckpointError, PolymaskError
from polymask.export.esm_native import native_blockers
from polymask.export.layout import ExportPlan, SequenceHead, native_plan, remote_plan
from polymask.export.model_card import CardFacts, card_facts, model_card
from polymask.export.samples import sample_batch
from polymask.modalities import build_modality
from polymask.model.encoder import Encoder
from polymask.objectives import Objective
from polymask.tokenization import SpecialIds, save_tokenizer, with_mask_taking_its_space
from polymask.transformers_quiet import quiet_transformers
from polymask.weights_io import save_weights

REMOTE_DIR = Path(__file__).parent / "hf_remote"
REMOTE_FILES = ("configuration_polymask.py", "modeling_polymask.py")
TOLERANCE = 1e-4
ESM_EXTRAS = ("pooler.", "contact_head.")  # parts of transformers' EsmModel that polymask's encoder has not
# save_tokenizer's class, named in config.json too: transformers 4.45's pipeline() loads a tokenizer for a
# remote-code config only when the config names its class
TOKENIZER_CLASS = "PreTrainedTokenizerFast"


@dataclass
class ExportResult:
    folder: Path
    architectures: list[str]
    max_abs_diff: float | None                 # hidden states, exported vs polymask, on ``checked_records``
    checked_records: int
    native: bool = False                       # the encoder is transformers' own EsmModel (no remote code for it)
    notes: list[str] = field(default_factory=list)


def _write_model(folder: Path, plan: ExportPlan) -> None:
    if plan.native:
        from transformers import EsmConfig

        with quiet_transformers():
            config = EsmConfig(**plan.config)
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


def check_export(folder: Path, plan: ExportPlan, encoder: Encoder,
                 batch: dict[str, torch.Tensor] | None) -> float | None:
    """Load the folder as its first architecture (every weight used, none missing) and, for a native export, as
    ``EsmModel`` (what ``AutoModel`` gives without remote code); return the largest |difference| between their last
    hidden states and polymask's encoder (fp32, real positions of a padded batch); None without a batch."""
    loads = list(dict.fromkeys([plan.architectures[0], *(["EsmModel"] if plan.native else [])]))
    absent = ESM_EXTRAS if plan.native else ()
    differences = []
    for index, architecture in enumerate(loads):
        with quiet_transformers():
            model, info = _model_class(architecture).from_pretrained(str(folder), output_loading_info=True)
        missing = [key for key in info["missing_keys"] if not key.removeprefix("esm.").startswith(absent)]
        wrong = {"missing_keys": missing,
                 "unexpected_keys": [] if index else list(info["unexpected_keys"])}  # the second load sees heads
        if any(wrong.values()):
            raise CheckpointError(f"the exported weights do not fit {architecture}: {wrong}")
        if batch is not None:
            differences.append(_hidden_difference(model, encoder, batch))
    return max(differences) if differences else None


def write_export(out: Path, encoder: Encoder, tokenizer: Tokenizer, max_len: int, card: CardFacts,
                 batch: dict[str, torch.Tensor] | None, objective: Objective | None = None,
                 head: SequenceHead | None = None, overwrite: bool = False) -> ExportResult:
    """Write, check and atomically place an export of ``encoder`` with the LM head of ``objective`` (as its
    ``lm_export`` says) and/or a fine-tuned ``head``.

    The encoder is a native ``EsmModel`` where that is exact (``esm_native.native_blockers``), with only the
    parts that have no native counterpart in remote code; otherwise the whole model is remote code. This is
    the one writer: ``export_checkpoint`` calls it for pretrained checkpoints; a fine-tuned model calls it
    with its fine-tuned encoder and ``sequence_head(...)`` of its task head.
    """
    out = Path(out)
    if out.exists() and not overwrite:
        raise PolymaskError(f"{out} already exists; pass --overwrite to replace it")
    specials = SpecialIds.of(tokenizer)
    masked_lm = objective is not None and objective.lm_export is not None
    notes = []
    if objective is not None and not masked_lm:
        notes.append(f"objective '{objective.config.name}' exports no LM head (Objective.lm_export): "
                     "no AutoModelForMaskedLM")
    lm_objective = objective if masked_lm else None
    blockers = native_blockers(encoder)
    plan = (remote_plan(encoder, specials, lm_objective, head, blockers) if blockers
            else native_plan(encoder, specials, max_len, lm_objective, head))
    plan.notes[:0] = notes
    with staged_folder(out) as tmp:
        _write_model(tmp, plan)
        save_tokenizer(with_mask_taking_its_space(tokenizer), tmp, model_max_length=max_len)
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
    checkpoint = read_checkpoint(path)
    objective = checkpoint.build_objective().eval()
    max_len = checkpoint.run_config.data.max_len
    tokenizer = build_modality(checkpoint.run_config.modality).exported_tokenizer(checkpoint.tokenizer)
    return write_export(out, objective.encoder, tokenizer, max_len, card_facts(checkpoint),
                        sample_batch(checkpoint, max_len), objective, overwrite=overwrite)


def export_summary(result: ExportResult) -> str:
    """One JSON line for the command line."""
    return jsonio.dumps({"out": str(result.folder), "architectures": result.architectures, "native": result.native,
                       "max_abs_diff_hidden": result.max_abs_diff, "checked_records": result.checked_records,
                       "notes": result.notes})
