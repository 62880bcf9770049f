#!/usr/bin/env bash
# Issue 59, item 1: the SQuAD v1.1 fine-tuning recipe of text-en-mlm-32m, chosen on the validation articles. Run from
# the repository root, one stage at a time (each reruns only the cells it lacks, so a rerun after an interruption
# resumes); the search table is rewritten after each:
#   nohup docs/results/text-corpus/squad-recipe/run.sh screen > runs/squad-screen.log 2>&1 &   # 4 recipes, 1 seed
#   docs/results/text-corpus/squad-recipe/run.sh middle     # lr 6e-4 at the window length that led the screen
#   docs/results/text-corpus/squad-recipe/run.sh seeds      # seeds 1 and 2 for the best two recipes
#   docs/results/text-corpus/squad-recipe/run.sh untrained  # the untrained twin under the best recipe, 3 seeds
# Windows: 256 tokens with 64 question tokens and a stride of 128 (the committed recipe's), or 128 tokens with 32
# question tokens (99% of questions fit) and a stride of 64, so that consecutive windows share at least 29 tokens.
# On one CPU thread an epoch of the 5,374 training questions takes about 5-6 min at either length (13.6k windows of
# 128 tokens, 6.4k of 256; estimated from 500-question runs beside two other jobs); a cell runs up to 20 epochs,
# patience 3: up to 2 h.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
D=docs/results/text-corpus/squad-recipe
POLYMASK=${POLYMASK:-.venv/bin/polymask}
PYTHON=${PYTHON:-.venv/bin/python}
SYSTEM="text-en-mlm-32m (mlm)"

window() {  # the options of a window length
  case $1 in
    128) echo "--max-len 128 --set span.max_query_len=32 --set span.doc_stride=64" ;;
    256) echo "--max-len 256 --set span.max_query_len=64 --set span.doc_stride=128" ;;
  esac
}

cell() {  # cell RECIPE SEEDS [--no-references]: RECIPE is w<window>-lr<rate>
  local recipe=$1 seeds=$2; shift 2
  local length=${recipe%%-*}; length=${length#w}
  # shellcheck disable=SC2046
  OMP_NUM_THREADS=1 $POLYMASK benchmark squad --checkpoint text-en-mlm-32m --tasks v1 --seeds "$seeds" \
    --lr "${recipe#*-lr}" --epochs 20 --patience 3 $(window "$length") --no-save-models "$@" \
    --out $D/$recipe
  table
}

table() { $PYTHON benchmarks/squad_recipe.py $D --system "$SYSTEM" --out $D; }
best() { $PYTHON benchmarks/squad_recipe.py $D --system "$SYSTEM" --best "$1"; }

case ${1:?which stage: screen, middle, seeds or untrained} in
  screen) for recipe in w128-lr3e-4 w256-lr3e-4 w128-lr1e-3 w256-lr1e-3; do cell $recipe 1 --no-references; done ;;
  middle) leader=$(best 1); cell "${leader%%-*}-lr6e-4" 1 --no-references ;;
  seeds) for recipe in $(best 2); do cell "$recipe" 3 --no-references; done ;;
  untrained) cell "$(best 1)" 3 ;;
  *) echo "unknown stage $1" >&2; exit 2 ;;
esac
