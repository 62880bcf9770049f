"""Load exported folders with transformers alone, with polymask blocked from import (run as a subprocess).

``python tests/hf_loader.py CASES.json`` where CASES.json lists {"name", "folder", "reference", "texts",
"fill"}: ``reference`` is a safetensors file with polymask's input_ids, attention_mask, hidden (last
hidden states), and masked_input_ids / masked_logits / masked_positions for the LM head. Prints one
JSON object: per case the largest |difference| of hidden states and of LM logits, whether the tokenizer
gives polymask's ids, the tokenizer's settings, and the fill-mask pipeline's top prediction.
"""
import json
import sys

sys.modules["polymask"] = None  # any `import polymask` now fails: transformers alone must do the work

import torch  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from transformers import AutoModel, AutoModelForMaskedLM, AutoTokenizer, pipeline  # noqa: E402


def check(case: dict) -> dict:
    folder, reference = case["folder"], load_file(case["reference"])
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    encoded = tokenizer(case["texts"], padding=True, truncation=True, return_tensors="pt")
    real = reference["attention_mask"].bool()
    model = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
    masked_lm = AutoModelForMaskedLM.from_pretrained(folder, trust_remote_code=True).eval()
    with torch.no_grad():
        hidden = model(**encoded).last_hidden_state
        logits = masked_lm(input_ids=reference["masked_input_ids"], attention_mask=reference["attention_mask"]).logits
    rows, columns = reference["masked_positions"].unbind(-1)
    fill = pipeline("fill-mask", model=folder, tokenizer=tokenizer, trust_remote_code=True)(case["fill"], top_k=3)
    return {
        "same_ids": bool(torch.equal(encoded["input_ids"], reference["input_ids"])
                         and torch.equal(encoded["attention_mask"], reference["attention_mask"])),
        "hidden_diff": float((hidden[real] - reference["hidden"][real]).abs().max()),
        "logits_diff": float((logits[rows, columns] - reference["masked_logits"]).abs().max()),
        "tokens": {name: getattr(tokenizer, name) for name in ("mask_token", "pad_token", "cls_token", "sep_token")},
        "model_max_length": tokenizer.model_max_length,
        "model_class": type(model).__name__,
        "fill_mask": [{"token": item["token_str"], "score": item["score"]} for item in fill],
    }


if __name__ == "__main__":
    cases = json.loads(open(sys.argv[1]).read())
    print(json.dumps({case["name"]: check(case) for case in cases}))
