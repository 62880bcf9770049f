"""Smoke test run inside the dependency-floor environment (see dependency_floors.py).

Pretrains tiny encoders for a few steps (SMILES MLM and ExLM, text MAE-LM, DNA MLM), fine-tunes one on
ESOL, loads the built-in tokenizers with AutoTokenizer, exports every checkpoint and loads the exports
with transformers alone (polymask blocked from import) in this environment and, with ``--hf-python``,
in a second one where polymask is not installed: AutoTokenizer, the Auto models (native ESM without remote
code where the export is native), and the fill-mask pipeline both with ``tokenizer=`` and in docs/export.md's
form (the folder alone). Prints one JSON
object; exits 1 if a check fails.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

RUNS = [("smiles", "mlm"), ("smiles", "exlm"), ("text", "maelm"), ("dna", "mlm")]
# docs/export.md's fill-mask: the folder alone, no tokenizer= (polymask blocked, as in hf_roundtrip); remote code
# trusted only where the folder's auto_map needs it (a native ESM export of MLM needs none)
PLAIN_FILL_MASK = """
import json, sys
sys.modules["polymask"] = None
from transformers import pipeline
def remote(folder):
    return "AutoModelForMaskedLM" in json.loads(open(folder + "/config.json").read()).get("auto_map", {})
cases = json.loads(open(sys.argv[1]).read())
print(json.dumps({case["name"]: [{"token": item["token_str"], "score": item["score"]} for item in
                  pipeline("fill-mask", model=case["folder"], trust_remote_code=remote(case["folder"]))(
                      case["fill"], top_k=3)] for case in cases}))
"""
# what AutoModel builds from each export: transformers' own EsmModel where the encoder maps exactly
NATIVE = {"smiles-mlm": True, "smiles-exlm": False, "text-maelm": True, "dna-mlm": True}


def pretrain(work: Path) -> dict[str, Any]:
    from conftest import tiny_config

    from polymask.training.trainer import train

    steps = {}
    for modality, objective in RUNS:
        config = tiny_config(modality, work / f"{modality}-{objective}", max_steps=6, threads=2)
        config["objective"] = {"name": objective}
        config["data"]["max_val_records"] = 16
        steps[f"{modality}-{objective}"] = train(config)["steps"]
    return steps


def finetune(work: Path) -> dict[str, Any]:
    from polymask.cli import main

    out = work / "finetune-esol"
    code = main(["finetune", "--task", "moleculenet/esol", "--checkpoint", str(work / "smiles-mlm"), "--epochs", "1",
                 "--max-train-examples", "200", "--out", str(out), "--quiet"])
    assert code == 0, f"polymask finetune exited with {code}"
    return json.loads((out / "results.json").read_text())["cells"][0]["test"]


def builtin_tokenizers(work: Path) -> dict[str, Any]:
    from transformers import AutoTokenizer

    samples = {"smiles": "CC(=O)Oc1ccccc1C(=O)O", "text": "It is a truth universally acknowledged.",
               "dna": "ACGTACGTTGCA", "dna-6mer-overlap": "ACGTAC CGTACG"}
    found = {}
    for folder in sorted((REPO / "tokenizers").iterdir()):
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        ids = tokenizer(samples[folder.name])["input_ids"]
        assert tokenizer.unk_token_id not in ids and tokenizer.mask_token == "[MASK]", folder.name
        found[folder.name] = len(ids)
    return found


def plain_fill_mask(cases: list[dict], work: Path, python: str) -> dict[str, list[dict]]:
    """Top 3 of ``pipeline("fill-mask", model=folder)`` per case, each in a fresh ``python`` (transformers 4.x
    registers a remote class for every model of its config class in the process)."""
    found = {}
    for case in cases:
        path = work / f"plain-fill-mask-{case['name']}.json"
        path.write_text(json.dumps([case]))
        env = {**os.environ, "HF_HOME": str(work / "hf-home"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
        process = subprocess.run([python, "-c", PLAIN_FILL_MASK, str(path)], capture_output=True, text=True, env=env,
                                 cwd=work, timeout=900)
        if process.returncode != 0:
            raise AssertionError(f"pipeline('fill-mask') without tokenizer= failed:\n{process.stderr[-3000:]}")
        found.update(json.loads(process.stdout.strip().splitlines()[-1]))
    return found


def export_and_load(work: Path, python: str) -> dict[str, Any]:
    from hf_roundtrip import reference_case, run_blocked

    from polymask.export.hf import export_checkpoint

    cases = []
    for modality, objective in RUNS:
        name = f"{modality}-{objective}"
        export_checkpoint(work / name, work / "hf" / name, overwrite=True)
        cases.append(reference_case(work / name, work / "hf" / name))
    loaded = run_blocked(cases, work, python, one_process_each=True)
    plain = plain_fill_mask(cases, work, python)
    for name, result in loaded.items():
        assert result["same_ids"] and result["hidden_diff"] < 1e-4 and result["logits_diff"] < 1e-4, (name, result)
        assert (result["model_class"] == "EsmModel") == NATIVE[name], (name, result["model_class"])
        assert result["hidden_diff"] < 1e-5 or not NATIVE[name], (name, result["hidden_diff"])
        assert plain[name] == result["fill_mask"], (name, plain[name], result["fill_mask"])
    return {name: {"model_class": r["model_class"], "masked_lm_class": r["masked_lm_class"], "remote_code": r["remote"],
                   "hidden_diff": r["hidden_diff"], "logits_diff": r["logits_diff"],
                   "fill_mask_top": r["fill_mask"][0]["token"], "fill_mask_plain_top": plain[name][0]["token"]}
            for name, r in loaded.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("work", type=Path, help="scratch folder")
    parser.add_argument("--hf-python", help="python of an environment without polymask, to load the exports there")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    checks: list[tuple[str, Callable[[], Any]]] = [
        ("pretrain", lambda: pretrain(args.work)), ("finetune", lambda: finetune(args.work)),
        ("builtin_tokenizers", lambda: builtin_tokenizers(args.work)),
        ("export_load_same_env", lambda: export_and_load(args.work, sys.executable))]
    if args.hf_python:
        checks.append(("export_load_without_polymask", lambda: export_and_load(args.work, args.hf_python)))
    results: dict[str, Any] = {}
    for name, check in checks:
        try:
            results[name] = {"ok": True, "result": check()}
        except Exception as exc:  # a failed check is recorded and the next one still runs
            results[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000],
                             "trace": traceback.format_exc()[-3000:]}
    print(json.dumps(results))
    return 0 if all(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
