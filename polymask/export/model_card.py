"""The model card (``README.md``) of an exported folder: what the model is, how it was trained and made."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polymask.checkpoints.pretrained import LoadedCheckpoint
from polymask.export.layout import ExportPlan, SequenceHead
from polymask.modalities import build_modality
from polymask.objectives import OBJECTIVES


@dataclass
class CardFacts:
    """What the card states, gathered from the checkpoint and its run folder."""

    source: str
    modality: dict[str, Any]
    objective: dict[str, Any]
    encoder: dict[str, Any]
    data: str
    max_len: int
    vocab_size: int
    step: int | None
    max_steps: int | None
    validation: dict[str, Any] = field(default_factory=dict)  # val_loss / val_accuracy at the checkpoint's step
    records: int | None = None
    task: dict[str, Any] | None = None  # a fine-tuned model's task: key, metric, validation scores, seed, inputs
    record_advice: str = ""  # the modality's word on preparing records (``Modality.export_record_advice``)


def _run_dir(folder: Path) -> Path | None:
    return folder.parent.parent if folder.parent.name == "checkpoints" else None


def _validation_at(run_dir: Path | None, step: int | None) -> dict[str, Any]:
    """The last validation line of ``metrics.jsonl`` at or before ``step``."""
    metrics = None if run_dir is None else run_dir / "metrics.jsonl"
    if metrics is None or not metrics.is_file() or step is None:
        return {}
    found: dict[str, Any] = {}
    for line in metrics.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if "val_loss" in record and record.get("step", step + 1) <= step:
            found = record
    return found


def card_facts(checkpoint: LoadedCheckpoint) -> CardFacts:
    """Facts for the card of a pretrained checkpoint."""
    config = checkpoint.run_config
    paths = config.data.paths
    step = checkpoint.step
    run_dir = _run_dir(checkpoint.folder)
    summary_path = None if run_dir is None else run_dir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path is not None and summary_path.is_file() else {}
    recorded = {"mode": "json", "exclude_unset": True}  # the options the checkpoint states, as it states them
    return CardFacts(
        source=str(checkpoint.folder), modality=config.modality.model_dump(**recorded),
        objective=config.objective.model_dump(**recorded), encoder=checkpoint.encoder_config.model_dump(mode="json"),
        data=", ".join(f"`{path.name}`" for path in paths) if paths else
        f"the built-in {config.modality.name} corpus of polymask (polymask/corpora/)",
        max_len=config.data.max_len, vocab_size=checkpoint.vocab_size, step=step,
        max_steps=config.train.max_steps, validation=_validation_at(run_dir, step), records=summary.get("records"),
        record_advice=build_modality(config.modality).export_record_advice(config.data.max_len))


def _options(config: dict[str, Any]) -> str:
    shown = [f"{key}={value}" for key, value in config.items() if key != "name" and value is not None]
    return f"`{config['name']}`" + (f" ({', '.join(shown)})" if shown else "")


def _number(value: Any, digits: int = 4) -> str:
    return "not recorded" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _head_text(head: SequenceHead) -> str:
    """What a fine-tuned model's task head is and how to load it."""
    count, names = head.config["num_labels"], ", ".join(f"`{name}`" for name in head.config["id2label"].values())
    return ("`AutoModelForSequenceClassification` carries the fine-tuned task head: "
            f"{head.about} ({count} output{'' if count == 1 else 's'}: {names}; "
            f"{head.config['pooling']} pooling). `AutoModel` gives the fine-tuned encoder alone.")


def _use_lines(plan: ExportPlan) -> list[str]:
    """How to load the folder: natively (ESM) or with remote code, and which parts need which."""
    if plan.native:
        remote = ", ".join(f"`{name}`" for name in plan.auto_map)
        return [
            "The encoder is transformers' native `EsmModel`, weight for weight (polymask's pre-LayerNorm rotary "
            "encoder with the exact GELU is ESM's architecture), so it loads without remote code. EsmModel's pooler "
            "and contact head are not part of polymask's encoder: transformers initialises them and says so; "
            "`last_hidden_state` does not use them.", "",
            "```python",
            "from transformers import AutoModel, AutoTokenizer",
            "tokenizer = AutoTokenizer.from_pretrained(path)",
            "model = AutoModel.from_pretrained(path)",
            "hidden = model(**tokenizer(records, padding=True, return_tensors=\"pt\")).last_hidden_state",
            "```", "",
            *([f"Remote code (`modeling_polymask.py`, which imports only torch and transformers; "
               f"`trust_remote_code=True`) is needed for {remote} only: " + "; ".join(plan.notes) + ".", ""]
              if plan.auto_map else []),
        ]
    return [
        "This model has no native transformers architecture: " + "; ".join(plan.notes) + ". Its architecture is "
        "shipped as `modeling_polymask.py` (it imports only torch and transformers):", "",
        "```python",
        "from transformers import AutoModel, AutoTokenizer",
        "tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=True)  # reads config.json too",
        "model = AutoModel.from_pretrained(path, trust_remote_code=True)",
        "hidden = model(**tokenizer(records, padding=True, return_tensors=\"pt\")).last_hidden_state",
        "```", "",
    ]


def model_card(facts: CardFacts, plan: ExportPlan, difference: float | None, checked: int,
               head: SequenceHead | None = None) -> str:
    """The README.md text (YAML front matter for the Hub, then the card)."""
    objective = facts.objective["name"]
    encoder = facts.encoder
    masked_lm = any(name.endswith("ForMaskedLM") for name in plan.architectures)
    pipeline_tag = "text-classification" if head is not None else "fill-mask" if masked_lm else "feature-extraction"
    tags = ["polymask", facts.modality["name"], objective, *(["esm"] if plan.native else [])]
    validation = facts.validation
    check = (f"max |difference| {difference:.1e} on {checked} real records (of the training corpus, or of the modality's "
             "built-in corpus where that is not on hand), padded into one batch"
             if difference is not None else "not checked (no corpus of the modality could be read)")
    fill_remote = masked_lm and "AutoModelForMaskedLM" in plan.auto_map
    lines = [
        "---", "library_name: transformers", f"pipeline_tag: {pipeline_tag}",
        "tags:", *[f"- {tag}" for tag in tags], "---", "",
        f"# polymask {facts.modality['name']} encoder ({objective})", "",
        f"A {encoder['n_layers']}-layer, {encoder['d_model']}-wide pre-LayerNorm Transformer encoder with rotary "
        f"positions{' (2D: token index, state index)' if encoder['rope_2d'] else ''}, pretrained with polymask.", "",
        "| | |", "|---|---|",
        f"| modality | {_options(facts.modality)} |",
        f"| objective | {_options(facts.objective)} |",
        f"| encoder | {encoder['n_layers']} layers x {encoder['d_model']}, {encoder['n_heads']} heads, MLP "
        f"{encoder['d_ff']} ({'exact' if encoder.get('activation') == 'gelu' else 'tanh-approximated'} GELU), "
        f"embedding LayerNorm {'on' if encoder['embed_norm'] else 'off'} |",
        f"| transformers architecture | {', '.join(f'`{name}`' for name in plan.architectures)} |",
        f"| data | {facts.data}" + (f", {facts.records:,} records" if facts.records else "") + " |",
        f"| steps | {_number(facts.step)} of {_number(facts.max_steps)} |",
        f"| validation masked-token accuracy | {_number(validation.get('val_accuracy'))} "
        f"(loss {_number(validation.get('val_loss'))}, at step {_number(validation.get('step'))}) |",
        f"| tokenizer | {facts.vocab_size} tokens, at most {facts.max_len} per sequence ([CLS] ... [SEP]) |",
        *([f"| fine-tuned on | {facts.task['key']} (seed {facts.task['seed']}); validation "
           + ", ".join(f"{name} {_number(value)}" for name, value in facts.task["valid"].items()) + " |"]
          if facts.task else []),
        "",
        "## Use", "",
        *_use_lines(plan),
        "Prepare each record as polymask did before tokenising (`Modality.normalize`, then "
        "`Modality.tokenizer_input`; the modality's options are listed above): the tokenizer alone does not "
        "validate or canonicalise (for example, SMILES were RDKit-canonicalised, DNA upper-cased with ambiguity "
        "codes as N and, for overlapping k-mers, written as space-separated k-mers). " + facts.record_advice, "",
    ]
    if masked_lm:
        loading = ("`pipeline(\"fill-mask\", model=path, trust_remote_code=True)`" if fill_remote
                   else "`pipeline(\"fill-mask\", model=path)`")
        lines += [f"`AutoModelForMaskedLM` and {loading} use " + OBJECTIVES.get(objective).fill_mask_note, ""]
    elif head is None:
        lines += ["No masked-LM head is exported for this objective: use `AutoModel`.", ""]
    if head is not None:
        lines += [_head_text(head), ""]
    columns = (facts.task or {}).get("input_columns") or []
    if len(columns) == 2:
        lines += [f"The task reads pairs ({columns[0]}, {columns[1]}): tokenise each pair together, `tokenizer(first, "
                  f"second, padding=True, truncation=True, max_length={facts.max_len}, return_tensors=\"pt\")`; "
                  "`truncation=True` cuts a long pair from the end of its longer part first, as polymask did.", ""]
    averaged = (facts.task or {}).get("averaged_over")
    if averaged:
        lines += [f"The head predicts one record at a time. polymask's fine-tuned model predicts the mean of its "
                  f"predictions over each record's variants under {', '.join(averaged)} (`Modality.variants` of "
                  "the record cut to the window the model reads: for DNA both strands, the reverse complement, and "
                  "each k-mer reading frame, the record without its first 0 to k-1 bases; for SMILES other atom "
                  "orders): average the probabilities over those inputs to reproduce `polymask predict`. The "
                  "validation score above is of single predictions.", ""]
    lines += [
        "## How it was made", "",
        f"`polymask export` from the checkpoint `{facts.source}`. The weights are polymask's, in float32 "
        "safetensors" + ("" if head is None else head.note) + "; nothing was retrained. The export was checked "
        f"against polymask's encoder before it was written: last hidden states, {check}.", "",
    ]
    return "\n".join(lines)
