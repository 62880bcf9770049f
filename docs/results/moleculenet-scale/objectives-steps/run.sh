#!/usr/bin/env bash
# Part 2 of the objectives experiment (issue 57) on SMILES: the rows that decided part 1 on DNA
# (docs/results/dna-gue/objectives-steps/), at equal optimiser steps on the 1.73M-molecule corpus with the shipped
# encoder's recipe (configs/smiles-mlm-moses.yaml: 4 x 128, mask ratio 0.4, batch 256), fine-tuned on MoleculeNet's
# eight tasks with the v2 recipe (tasks/moleculenet/recipe.yaml). N = 1,039 steps: MLM's count in the 10 minutes of
# ../README.md section 5. Run from the repository root, one job per core; every job resumes or reuses what is
# finished, so rerun the same lines after an interruption:
#   BENCHMARK_SEEDS=1 nohup docs/results/moleculenet-scale/objectives-steps/run.sh steps-1039 > runs/smiles-1039-a.log 2>&1 &
#   BENCHMARK_SEEDS=1 nohup docs/results/moleculenet-scale/objectives-steps/run.sh steps-1039 > runs/smiles-1039-b.log 2>&1 &
# then steps-2078 (twice N) and seeds (a second pretraining seed of the rows a verdict rests on).
# BENCHMARK_SEEDS=1 screens on one fine-tuning seed; a later run with 3 reuses the seed-0 cells.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
D=docs/results/moleculenet-scale/objectives-steps
POLYMASK=${POLYMASK:-.venv/bin/polymask}
DATA=${POLYMASK_DATA_DIR:-/work/shared/data}
ROWS=(mlm mlm100=mlm:mask_prob=1.0,random_prob=0.0 maelm maelm1010=maelm:mask_prob=0.8,random_prob=0.1
      exlm exlm1010=exlm:mask_prob=0.8,random_prob=0.1
      exlm-ref=exlm:transition_grad=1,group_attention=per_state,next_group_bias=0)
TASKS=(bbbp bace clintox tox21 sider esol freesolv lipophilicity)

# the corpus leaves out every validation and test molecule of the MoleculeNet tasks (configs/smiles-mlm-moses.yaml)
[ -f runs/heldout-moleculenet/heldout.json ] || $POLYMASK benchmark-heldout moleculenet --data-dir "$DATA/moleculenet" \
    --tasks esol freesolv lipophilicity bbbp bace clintox tox21 hiv sider muv toxcast --out runs/heldout-moleculenet

compare() {  # compare FOLDER BUDGET "SEEDS" [--no-references] -- VARIANTS...
  local out=$D/$1 budget=$2 seeds=$3; shift 3
  local refs=(); if [ "$1" = "--no-references" ]; then refs=(--no-references); shift; fi
  [ "$1" = "--" ] && shift
  OMP_NUM_THREADS=1 POLYMASK_DATA_DIR=$DATA $POLYMASK compare --modality smiles --config smiles-mlm-moses \
    --objectives "$@" --budget $budget --seeds $seeds --benchmark-seeds "${BENCHMARK_SEEDS:-3}" --tasks "${TASKS[@]}" \
    --set train.keep_checkpoints=2 --set train.eval_every=250 --set train.save_every=250 \
    --finetune-set save_model=false "${refs[@]}" --data-dir "$DATA/moleculenet" --out $out
}

case ${1:?which folder: steps-1039, steps-2078 or seeds} in
  steps-1039) compare steps-1039 1039-steps 0 -- "${ROWS[@]}" ;;
  steps-2078) compare steps-2078 2078-steps 0 --no-references -- "${ROWS[@]}" ;;
  seeds) compare seeds 1039-steps 1 --no-references -- "${ROWS[@]:0:6}" ;;  # every row but exlm-ref, a second pretraining seed
  *) echo "unknown folder $1" >&2; exit 2 ;;
esac
