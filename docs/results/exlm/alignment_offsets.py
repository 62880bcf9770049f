"""Where does an ExLM checkpoint's Viterbi path emit each masked token?

``python docs/results/exlm/alignment_offsets.py RUN DATA [SEQUENCES]`` masks DATA as
``polymask analyze semantics`` does with its defaults (mask ratio 0.15, seed 0, batch 32) and
prints, over the masked tokens, how far the group of the state that emits a token on the Viterbi
path lies from the token's own group (0: one of its own k copies; +1: a copy of the next masked
position, or of [SEP] for the last one) and which copy (1..k) emits it. A dense DAG leaves this
alignment free.
"""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import torch

from polymask.analysis.semantics import masked_batches
from polymask.checkpoints.pretrained import read_checkpoint


def main(run: Path, data: Path, sequences: int = 2000) -> None:
    checkpoint = read_checkpoint(run)
    model = checkpoint.build_objective().eval()
    k = model.config.k
    offsets, copies = Counter(), Counter()
    for batch, selected in masked_batches(checkpoint, model, [data], None, 0, 32, sequences):
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
