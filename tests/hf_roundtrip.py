"""Export -> load round trip: polymask's reference outputs, and a check with transformers alone.

``reference_case`` (polymask side) records polymask's outputs on real records of a checkpoint's corpus;
``run_blocked`` runs this file as a subprocess in which ``import polymask`` fails, loads each exported
folder with AutoTokenizer, AutoModel, AutoModelForMaskedLM and pipeline("fill-mask") (with
``trust_remote_code`` only for the classes the folder's ``auto_map`` names), and returns per
case the largest |difference| of hidden states and of LM logits, whether the tokenizer gives polymask's
ids, the tokenizer's settings and the fill-mask pipeline's top predictions.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file


def reference_case(run: Path, folder: Path, max_len: int = 64) -> dict:
    """polymask's hidden states on real records, and the LM head's logits at one masked position per record
    (MAE-LM through its decoder, as in pretraining); written next to ``folder``."""
    from polymask.checkpoints.pretrained import read_checkpoint
    from polymask.data.batching import Batch
    from polymask.export.samples import encode_padded, sample_texts

    checkpoint = read_checkpoint(run)
    objective = checkpoint.build_objective().eval()
    texts = sample_texts(checkpoint)
    batch = encode_padded(checkpoint.tokenizer, texts, max_len)
    ids, real = batch["input_ids"], batch["attention_mask"].bool()
    selected = torch.zeros_like(real)
    selected[torch.arange(len(texts)), real.sum(dim=1) // 2] = True
    masked_ids = ids.masked_fill(selected, objective.specials.mask)
    with torch.no_grad():
        hidden = objective.encoder(ids, attention_mask=real)
        if objective.config.name == "maelm":
            logits = objective.predict(Batch(ids, real), selected)
        else:
            logits = objective.head(objective.encoder(masked_ids, attention_mask=real))[selected]
    reference = folder.parent / f"{folder.name}.reference.safetensors"
    save_file({**batch, "hidden": hidden, "masked_input_ids": masked_ids, "masked_logits": logits,
               "masked_positions": selected.nonzero().contiguous()}, str(reference))
    encoding = checkpoint.tokenizer.encode(texts[0], add_special_tokens=False)
    start, end = encoding.offsets[len(encoding.ids) // 2]
    fill = texts[0][:start] + "[MASK]" + texts[0][end:]
    return {"name": folder.name, "folder": str(folder), "reference": str(reference), "texts": texts, "fill": fill}


def run_blocked(cases: list[dict], workdir: Path, python: str = sys.executable, one_process_each: bool = False) -> dict:
    """Check every case in a fresh interpreter (``python``: this one, or another environment's) where
    polymask cannot be imported; ``one_process_each``: a fresh interpreter per case (transformers 4.x
    registers a remote class for every model of its config class in the process, docs/export.md)."""
    results = {}
    for index, group in enumerate([[case] for case in cases] if one_process_each else [cases]):
        path = workdir / f"cases-{index}.json"
        path.write_text(json.dumps(group))
        env = {**os.environ, "HF_HOME": str(workdir / "hf-home"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
        process = subprocess.run([python, __file__, str(path)], capture_output=True, text=True, env=env, cwd=workdir,
                                 timeout=900)
        if process.returncode != 0:
            raise AssertionError(f"loading with transformers alone failed:\n{process.stderr[-3000:]}")
        results.update(json.loads(process.stdout.strip().splitlines()[-1]))
    return results


def check(case: dict) -> dict:
    from transformers import (
        AutoModel,
        AutoModelForMaskedLM,
        AutoModelForSequenceClassification,
        AutoTokenizer,
        pipeline,
    )

    folder, reference = case["folder"], load_file(case["reference"])
    remote = json.loads((Path(folder) / "config.json").read_text()).get("auto_map", {})  # what needs remote code
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code="AutoConfig" in remote)
    encoded = tokenizer(case["texts"], padding=True, truncation=True, return_tensors="pt")
    real = reference["attention_mask"].bool()
    model = AutoModel.from_pretrained(folder, trust_remote_code="AutoModel" in remote).eval()
    masked_lm = AutoModelForMaskedLM.from_pretrained(folder, trust_remote_code="AutoModelForMaskedLM" in remote).eval()
    classifier = AutoModelForSequenceClassification.from_pretrained(
        folder, num_labels=2, trust_remote_code="AutoModelForSequenceClassification" in remote).eval()
    with torch.no_grad():
        hidden = model(**encoded).last_hidden_state
        logits = masked_lm(input_ids=reference["masked_input_ids"], attention_mask=reference["attention_mask"]).logits
        classified = classifier(**encoded).logits
    rows, columns = reference["masked_positions"].unbind(-1)
    fill = pipeline("fill-mask", model=folder, tokenizer=tokenizer,
                    trust_remote_code="AutoModelForMaskedLM" in remote)(case["fill"], top_k=3)
    return {
        "same_ids": bool(torch.equal(encoded["input_ids"], reference["input_ids"])
                         and torch.equal(encoded["attention_mask"], reference["attention_mask"])),
        "hidden_diff": float((hidden[real] - reference["hidden"][real]).abs().max()),
        "logits_diff": float((logits[rows, columns] - reference["masked_logits"]).abs().max()),
        "tokens": {name: getattr(tokenizer, name) for name in ("mask_token", "pad_token", "cls_token", "sep_token")},
        "model_max_length": tokenizer.model_max_length,
        "model_class": type(model).__name__,
        "masked_lm_class": type(masked_lm).__name__,
        "remote": sorted(remote),
        "classifier_logits": list(classified.shape),  # a new 2-label head on the pretrained encoder
        "fill_mask": [{"token": item["token_str"], "score": item["score"]} for item in fill],
    }


if __name__ == "__main__":
    sys.modules["polymask"] = None  # any `import polymask` now fails: transformers alone must do the work
    cases = json.loads(Path(sys.argv[1]).read_text())
    print(json.dumps({case["name"]: check(case) for case in cases}))
