"""Where does an ExLM checkpoint's Viterbi path emit each masked token?

``python docs/results/exlm/alignment_offsets.py RUN DATA [SEQUENCES]`` masks DATA as
``polymask analyze semantics`` does and prints, over the masked tokens, how far the group of the
state that emits a token on the Viterbi path lies from the token's own group (0: one of its own
k copies; +1: a copy of the next masked position, or of [SEP] for the last one) and which copy
(1..k) emits it. A dense DAG leaves this alignment free.
"""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import torch

from polymask.config import build_run_config
from polymask.data.batching import BatchSampler, collate
from polymask.data.corpus import prepare_corpus
from polymask.data.masking import maskable_positions, sample_mask
from polymask.modalities import build_modality
from polymask.training.checkpoint import load_checkpoint
from polymask.training.runtime import step_generator

SEMANTICS_STREAM = 7  # the masks of ``polymask analyze semantics``


def main(run: Path, data: Path, sequences: int = 2000) -> None:
    checkpoint = load_checkpoint(run)
    config = build_run_config(checkpoint.config)
    model = checkpoint.build_objective().eval()
    k = model.config.k
    corpus = prepare_corpus(build_modality(config.modality), checkpoint.tokenizer, [data], column=None,
                            max_len=config.data.max_len, val_fraction=0.0, max_val_records=0, seed=0,
                            cache_dir=config.data.resolved_cache_dir(), strict=False)
    store = corpus.train
    offsets, copies = Counter(), Counter()
    for index, indices in enumerate(BatchSampler(store.lengths[:sequences], 32, 0, "bucket", shuffle=False).epoch(0)):
        batch = collate([store[int(i)] for i in indices], model.specials.pad)
        maskable = maskable_positions(batch.input_ids, model.special_ids)
        selected = sample_mask(maskable, 0.15, step_generator(0, index, 0, SEMANTICS_STREAM), model.mask_span)
        with torch.no_grad():
            path, masked = model.aligned_states(model.score(batch, selected))
        target_index = torch.arange(path.shape[1]).expand_as(path)
        offsets.update((path // k - target_index)[masked].tolist())
        copies.update((path % k + 1)[masked].tolist())
    total = sum(offsets.values())
    print(f"{total} masked tokens; emitting group minus own group:",
          {offset: round(count / total, 3) for offset, count in sorted(offsets.items())})
    print("emitting copy (1..k):", {copy: round(count / total, 3) for copy, count in sorted(copies.items())})


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), *(int(a) for a in sys.argv[3:]))
