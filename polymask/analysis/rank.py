"""``polymask analyze rank``: the representation deficiency of MLM (MAE-LM paper, Figure 1).

On the same held-out sequences with the same masked positions (a fixed seed), collect each layer's
token representations for several input kinds and report their effective rank: the number of
principal components explaining a fraction tau of the variance, and the entropy-based effective
rank. Kinds: ``masked_real`` (real, unselected tokens of the masked input: every selected token
becomes [MASK]), ``unmasked`` (the same tokens with nothing masked), ``mask_tokens`` (the [MASK]
positions of the masked input) for objectives whose encoder sees [MASK] (MLM), and ``visible_only``
(the same tokens, the selected ones removed) for MAE-LM. If [MASK] tokens make the MLM encoder
spend dimensions on them, ``masked_real`` has a lower rank than ``unmasked``.
"""
from __future__ import annotations

import argparse
import csv
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from polymask.analysis.masked_inputs import MaskedInputSettings, add_masked_input_arguments, masked_batches
from polymask.analysis.registry import ANALYSES
from polymask.cli_options import settings_from
from polymask.jsonio import atomic_path, make_dir, write_json, write_text

if TYPE_CHECKING:
    from torch import Tensor

    from polymask.data.batching import Batch
    from polymask.objectives import Objective


class RankSettings(MaskedInputSettings):
    """The masked inputs and how ranks are counted."""

    tau: float = Field(0.9, gt=0, le=1, description="fraction of variance the counted components explain")
    max_tokens: int = Field(8192, ge=1, description="cap on token rows per layer and kind")


def layer_states(objective: "Objective", batch: "Batch", selected: "Tensor", kind: str) -> list["Tensor"]:
    """Per-layer representations (N, D) of one batch for ``kind``."""
    import torch

    from polymask.objectives.visible import compact_visible

    encoder = objective.encoder
    real = torch.ones_like(selected) if batch.attention_mask is None else batch.attention_mask
    kept = real & ~selected & ~torch.isin(batch.input_ids, objective.special_ids)
    if kind == "visible_only":
        visible = compact_visible(batch.input_ids, real & ~selected, objective.specials.pad)
        states = encoder(visible.input_ids, attention_mask=visible.attention_mask,
                         position_ids=visible.position_ids, output_hidden_states=True)
        rows = kept.gather(1, visible.position_ids) & visible.valid
        return [layer[rows] for layer in states]
    ids = batch.input_ids if kind == "unmasked" else batch.input_ids.masked_fill(selected, objective.specials.mask)
    states = encoder(ids, attention_mask=batch.attention_mask, output_hidden_states=True)
    rows = selected if kind == "mask_tokens" else kept
    return [layer[rows] for layer in states]


def measure_checkpoint(path: Path, data: list[Path], tau: float, mask_ratio: float | None, seed: int,
                       batch_size: int, max_sequences: int, max_tokens: int) -> dict[str, Any]:
    """Per-layer ranks of every input kind of one checkpoint (masked at ``mask_ratio``, default its own)."""
    import torch

    from polymask.checkpoints.pretrained import read_checkpoint
    from polymask.effective_rank import entropy_rank, singular_values, variance_rank

    checkpoint = read_checkpoint(path)
    objective = checkpoint.build_objective().eval()
    name = objective.config.name
    kinds = objective.rank_inputs
    collected: dict[str, list[list[Tensor]]] = {kind: [] for kind in kinds}
    with torch.no_grad():
        for batch, selected in masked_batches(checkpoint, objective, data, mask_ratio, seed, batch_size, max_sequences):
            for kind in kinds:
                collected[kind].append(layer_states(objective, batch, selected, kind))
    rows = []
    for kind, batches in collected.items():
        for layer, parts in enumerate(zip(*batches)):
            states = torch.cat(parts)[:max_tokens].float()
            values = singular_values(states)
            rows.append({"layer": layer, "kind": kind, "tokens": int(states.shape[0]),
                         "variance_rank": variance_rank(values, tau), "entropy_rank": entropy_rank(values)})
    return {"checkpoint": str(checkpoint.folder), "objective": name,
            "mask_ratio": objective.config.mask_ratio if mask_ratio is None else mask_ratio,
            "label": f"{checkpoint.name} ({name})", "d_model": objective.encoder.config.d_model,
            "layers": rows}


def write_tables(report: dict[str, Any], out: Path) -> None:
    """``rank.csv`` (one row per checkpoint, kind and layer) and ``rank.md``."""
    fields = ["label", "objective", "kind", "layer", "tokens", "variance_rank", "entropy_rank"]
    flat = [{"label": r["label"], "objective": r["objective"], **row} for r in report["results"] for row in r["layers"]]
    with atomic_path(out / "rank.csv") as tmp, open(tmp, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(flat)
    tau = report["tau"]
    lines = [f"Effective rank per layer (tau = {tau}: components explaining {tau:.0%} of the variance; "
             "entropy rank in brackets). Layer 0 is the embedding output.", "",
             "| checkpoint | input | " + " | ".join(f"layer {i}" for i in range(report["n_layers"])) + " |",
             "|---|---|" + "---:|" * report["n_layers"]]
    for result in report["results"]:
        kinds = dict.fromkeys(row["kind"] for row in result["layers"])
        for kind in kinds:
            cells = [f"{row['variance_rank']} ({row['entropy_rank']:.0f})" for row in result["layers"] if row["kind"] == kind]
            lines.append(f"| {result['label']} | {kind} | " + " | ".join(cells) + " |")
    write_text(out / "rank.md", "\n".join(lines) + "\n")


def plot(report: dict[str, Any], out: Path) -> Path:
    """One curve per checkpoint and input kind against layer, for both rank measures."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 4))
    styles = {"masked_real": "-", "unmasked": "--", "mask_tokens": ":", "visible_only": "-."}
    for index, result in enumerate(report["results"]):
        kinds = dict.fromkeys(row["kind"] for row in result["layers"])
        for kind in kinds:
            rows = [row for row in result["layers"] if row["kind"] == kind]
            for axis, key in zip(axes, ("variance_rank", "entropy_rank")):
                axis.plot([r["layer"] for r in rows], [r[key] for r in rows], styles.get(kind, "-"), marker="o",
                          color=f"C{index}", label=f"{result['label']}: {kind}")
    axes[0].set_ylabel(f"components for {report['tau']:.0%} of variance")
    axes[1].set_ylabel("entropy effective rank")
    for axis in axes:
        axis.set_xlabel("layer (0 = embeddings)")
    axes[1].legend(fontsize=7)
    figure.suptitle("Effective rank of token representations")
    figure.tight_layout()
    path = out / "rank.png"
    with atomic_path(path) as tmp:
        figure.savefig(tmp, dpi=120)
    plt.close(figure)
    return path


def run_rank_analysis(checkpoints: list[Path], data: list[Path], out: Path,
                      settings: RankSettings | None = None) -> dict[str, Any]:
    """Measure every checkpoint (``settings``: the defaults when None); write ``rank.json``, ``rank.csv``,
    ``rank.md`` and ``rank.png`` under ``out``."""
    settings = settings or RankSettings()
    results = [measure_checkpoint(path, data, settings.tau, settings.mask_ratio, settings.seed, settings.batch_size,
                                  settings.max_sequences, settings.max_tokens) for path in checkpoints]
    shown = settings.model_dump(include={"tau", "mask_ratio", "seed", "max_tokens"})
    report = {"data": [str(p) for p in data], **shown,
              "n_layers": max(row["layer"] for r in results for row in r["layers"]) + 1,
              "results": results}
    make_dir(out)
    write_json(out / "rank.json", report)
    write_tables(report, out)
    plot(report, out)
    return report


def _handle(args: argparse.Namespace) -> int:
    report = run_rank_analysis(args.checkpoint, args.data, args.out, settings_from(args, RankSettings))
    print((args.out / "rank.md").read_text())
    print(f"wrote {args.out}/rank.{{json,csv,md,png}} ({len(report['results'])} checkpoints)")
    return 0


@ANALYSES.register("rank")
def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("rank", help="effective rank of token representations per layer (MLM vs MAE-LM)",
                            description=__doc__.split("\n\n")[1])
    add_masked_input_arguments(parser, "rank", "an MLM and an MAE-LM run", RankSettings)
    parser.set_defaults(handler=_handle)
