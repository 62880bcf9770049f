#!/usr/bin/env bash
# Part 2 of the objectives experiment (issue 57) on text: both MLM settings and the best MAE-LM and ExLM settings of
# part 1 on DNA (docs/results/dna-gue/objectives-steps/: MAE-LM's default tied its 10/10 variant; ExLM with kept and
# random tokens led its all-[MASK] default beyond noise), at equal optimiser steps on the CPU, with the shipped text
# encoder's recipe (configs/text-mlm-corpus.yaml: 4 x 256, 15% masking, batch 256, lr 1e-3, the text-corpus BPE)
# on the same 31.9M-word corpus (../README.md). N = 1,250 steps, 41.0M tokens: where the shipped run's checkpoint
# at 30% of its steps (40.9M tokens) already parted from the untrained encoder on STS-B (0.537 against 0.157 test
# Pearson, ../glue/results.md).
# Fine-tuned on STS-B, CoLA, MRPC and RTE with the GLUE recipe (tasks/glue/recipe.yaml), 3 seeds, beside the
# untrained encoder and TF-IDF; then the frozen joint-pair STS-B probe on the benchmark's validation split.
#
# Cost on this project's 2-core VM (fp32; median step of 9, measured 2026-12-07 with nothing else running):
# 17.3 s a step for MLM on one thread; on two threads MLM 10.7 s, MAE-LM 10.4 s, ExLM 24.8 s, so a run of N steps
# takes 3.7 h (MLM, MAE-LM) and 8.6 h (ExLM): longer than a 3-hour session, and a run resumes only where its
# folder kept its optimizer state (git does not keep it). On a GPU the four runs take minutes (the shipped run:
# 692k tokens/s on an H200); the fine-tuning cells then run anywhere (about 30 min of one core per row).
# One job at a time; it resumes or reuses what is finished, so rerun the same line after an interruption:
#   nohup docs/results/text-corpus/objectives-steps/run.sh steps-1250 > runs/text-1250.log 2>&1 &
# The corpus is rebuilt when runs/text-corpus/corpus.txt is missing: the shared text-corpus tool reads the seven
# snapshots that `fetch` lays under $MIRROR (default /work/.mirror; its docstring names them), about 5 minutes.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
D=docs/results/text-corpus/objectives-steps
POLYMASK=${POLYMASK:-.venv/bin/polymask}
PYTHON=${PYTHON:-.venv/bin/python}
DATA=${POLYMASK_DATA_DIR:-/work/shared/data}
SHARED=${POLYMASK_SHARED:-/work/shared}
ROWS=(mlm mlm100=mlm:mask_prob=1.0,random_prob=0.0 maelm exlm1010=exlm:mask_prob=0.8,random_prob=0.1)
TASKS=(glue/stsb glue/cola glue/mrpc glue/rte)

if [ ! -f runs/text-corpus/corpus.txt ]; then
  [ -f runs/text-sources/counts.json ] || python3 "$SHARED/tools/text-corpus/build.py" --mirror "${MIRROR:-/work/.mirror}" \
      --out runs/text-sources
  $PYTHON benchmarks/text_corpus.py --sources runs/text-sources --glue "$DATA/glue" \
      --words wikipedia=13e6 gutenberg=8e6 imdb=7e6 wikinews=4e6 --out runs/text-corpus
fi

compare() {  # compare FOLDER BUDGET: every row, pretraining seed 0, with the untrained and TF-IDF rows
  OMP_NUM_THREADS=2 $POLYMASK compare --modality text --config text-mlm-corpus --data runs/text-corpus/corpus.txt \
    --objectives "${ROWS[@]}" --budget $2 --seeds 0 --benchmark-seeds "${BENCHMARK_SEEDS:-3}" --tasks "${TASKS[@]}" \
    --set train.threads=2 --set train.keep_checkpoints=2 --set train.eval_every=100 --set train.save_every=100 \
    --finetune-set save_model=false --data-dir "$DATA/glue" --out $D/$1
}

probe() {  # probe FOLDER: the frozen joint-pair STS-B probe of every finished run, on the validation split
  local runs=(); for run in $D/$1/pretrain/*-seed*; do [ -f $run/summary.json ] && runs+=($run); done
  $PYTHON benchmarks/stsb_probe.py --glue "$DATA/glue" --split valid --checkpoint "${runs[@]}" > $D/$1/stsb-probe.md
}

case ${1:?which folder: steps-1250} in
  steps-1250) compare steps-1250 1250-steps && probe steps-1250 ;;
  *) echo "unknown folder $1" >&2; exit 2 ;;
esac
