"""``polymask analyze semantics``: how multimodal are a model's predictions at masked positions?

ExLM's "semantic multimodality" measure: on the same held-out sequences with the same masked
positions (a fixed seed; every selected token becomes [MASK]), report for each checkpoint the mean
entropy of the predicted distribution at the masked positions and the top-k accuracy of the
original token. For MLM the distribution is the LM head's at the masked position (for MAE-LM the
decoder's, the encoder seeing only the visible tokens); for ExLM it is
the distribution of the state that emits the masked token on the Viterbi path through the DAG.
A lower entropy with a similar top-k accuracy means less ambiguous (less multimodal) predictions.

Each objective gives its own prediction (``Objective.masked_log_probs``).
"""
from __future__ import annotations

import argparse
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from polymask.analysis.masked_inputs import MaskedInputSettings, add_masked_input_arguments, masked_batches
from polymask.analysis.registry import ANALYSES
from polymask.cli_options import settings_from
from polymask.errors import ConfigError
from polymask.jsonio import atomic_path, make_dir, write_json

if TYPE_CHECKING:  # kept out of the import so that building the CLI parser stays light

    pass

DEFAULT_TOP_K = (1, 2, 3, 5, 10)


def measure_checkpoint(path: Path, data: list[Path], mask_ratio: float | None, seed: int, batch_size: int,
                       max_sequences: int, top_k: tuple[int, ...]) -> dict[str, Any]:
    """Entropy and top-k accuracy at masked positions of one checkpoint on ``data``."""
    import torch

    from polymask.checkpoints.pretrained import read_checkpoint

    checkpoint = read_checkpoint(path)
    objective = checkpoint.build_objective().eval()
    name = objective.config.name
    if not objective.predicts_masked_tokens():
        raise ConfigError(f"{path}: objective '{name}' does not predict masked tokens (no masked_log_probs); "
                          "the semantics analysis needs it")
    digest = hashlib.sha256()
    entropy_sum, target_nll, hits, count, sequences = 0.0, 0.0, torch.zeros(len(top_k)), 0, 0
    for batch, selected in masked_batches(checkpoint, objective, data, mask_ratio, seed, batch_size, max_sequences):
        digest.update(batch.input_ids[selected].numpy().tobytes() + selected.nonzero().numpy().tobytes())
        with torch.no_grad():
            log_probs = objective.masked_log_probs(batch, selected)
        targets = batch.input_ids[selected]
        entropy_sum += float(-(log_probs.exp() * log_probs).sum(dim=-1).sum())
        target_nll += float(-log_probs.gather(1, targets[:, None]).sum())
        ranked = log_probs.topk(max(top_k), dim=-1).indices
        for slot, k in enumerate(top_k):
            hits[slot] += (ranked[:, :k] == targets[:, None]).any(dim=-1).sum()
        count += int(targets.numel())
        sequences += batch.input_ids.shape[0]
    return {"checkpoint": str(checkpoint.folder), "objective": objective.config.model_dump(mode="json"),
            "label": f"{checkpoint.name} ({name})",
            "sequences": sequences, "masked_tokens": count, "masked_positions_sha256": digest.hexdigest(),
            "mean_entropy_nats": entropy_sum / count, "mean_target_nll_nats": target_nll / count,
            "top_k_accuracy": {str(k): float(hits[slot]) / count for slot, k in enumerate(top_k)}}


def plot(results: list[dict[str, Any]], out: Path) -> Path:
    """Entropy bars and top-k accuracy curves, one colour per checkpoint."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    labels = [result["label"] for result in results]
    colours = [f"C{i}" for i in range(len(results))]
    left.bar(range(len(results)), [r["mean_entropy_nats"] for r in results], color=colours)
    left.set_xticks(range(len(results)), labels, rotation=15, ha="right", fontsize=8)
    left.set_ylabel("mean entropy at masked positions (nats)")
    for result, colour in zip(results, colours):
        ks = [int(k) for k in result["top_k_accuracy"]]
        right.plot(ks, list(result["top_k_accuracy"].values()), marker="o", color=colour, label=result["label"])
    right.set_xlabel("k")
    right.set_ylabel("top-k accuracy")
    right.legend(fontsize=8)
    figure.suptitle("Semantic multimodality at masked positions")
    figure.tight_layout()
    path = out / "semantics.png"
    with atomic_path(path) as tmp:
        figure.savefig(tmp, dpi=120)
    plt.close(figure)
    return path


def run_semantics(checkpoints: list[Path], data: list[Path], out: Path, settings: MaskedInputSettings | None = None,
                  top_k: tuple[int, ...] = DEFAULT_TOP_K) -> dict[str, Any]:
    """Measure every checkpoint (``settings``: the defaults when None); write ``<out>/semantics.json`` and
    ``<out>/semantics.png``."""
    settings = settings or MaskedInputSettings()
    results = [measure_checkpoint(path, data, settings.mask_ratio, settings.seed, settings.batch_size,
                                  settings.max_sequences, top_k) for path in checkpoints]
    report = {"data": [str(p) for p in data], "mask_ratio": settings.mask_ratio, "seed": settings.seed,
              "same_masked_positions": len({r["masked_positions_sha256"] for r in results}) == 1,
              "results": results}
    make_dir(out)
    write_json(out / "semantics.json", report)
    plot(results, out)
    return report


def _handle(args: argparse.Namespace) -> int:
    top_k = tuple(sorted({int(k) for k in args.top_k.split(",")}))
    report = run_semantics(args.checkpoint, args.data, args.out, settings_from(args, MaskedInputSettings), top_k)
    for result in report["results"]:
        accuracy = ", ".join(f"top-{k} {v:.3f}" for k, v in result["top_k_accuracy"].items())
        print(f"{result['label']}: entropy {result['mean_entropy_nats']:.3f} nats, {accuracy} "
              f"({result['masked_tokens']} masked tokens)")
    print(f"wrote {args.out / 'semantics.json'} and {args.out / 'semantics.png'}")
    return 0


@ANALYSES.register("semantics")
def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("semantics", help="prediction entropy and top-k accuracy at masked positions",
                            description=__doc__.split("\n\n")[1])
    add_masked_input_arguments(parser, "semantics", "an MLM and an ExLM run", MaskedInputSettings)
    parser.add_argument("--top-k", default=",".join(map(str, DEFAULT_TOP_K)), help="comma-separated k values")
    parser.set_defaults(handler=_handle)
