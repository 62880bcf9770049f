#!/usr/bin/env bash
# The objectives experiment of issue 55 (README.md beside this file). Run from the repository root, one job per
# core; every job resumes or reuses what is finished, so rerun the same lines after an interruption:
#   nohup docs/results/dna-gue/objectives-steps/run.sh steps-7358 > runs/steps-7358.log 2>&1 &
#   nohup docs/results/dna-gue/objectives-steps/run.sh h1-seeds > runs/h1-seeds.log 2>&1 &
#   nohup docs/results/dna-gue/objectives-steps/run.sh exlm-seeds > runs/exlm-seeds.log 2>&1 &
# later: steps-3679 and steps-14716 (the H4 curve), two jobs on one folder share its runs and cells; labels after the
# folder keep only those rows (run.sh steps-14716 exlm mlm maelm: their cells, while exlm1010 still pretrains).
# BENCHMARK_SEEDS=1 screens on one fine-tuning seed; a later run with 3 reuses the seed-0 cells.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
D=docs/results/dna-gue/objectives-steps
POLYMASK=${POLYMASK:-.venv/bin/polymask}
H1=(mlm mlm100=mlm:mask_prob=1.0,random_prob=0.0 maelm maelm1010=maelm:mask_prob=0.8,random_prob=0.1)
EXLM=(exlm exlm1010=exlm:mask_prob=0.8,random_prob=0.1)
ALL=("${H1[@]}" "${EXLM[@]}"
     maelm-ref2=maelm:decoder_layers=2,decoder_positions=absolute,decoder_input_norm=true
     maelm-ref4=maelm:decoder_layers=4,decoder_positions=absolute,decoder_input_norm=true
     exlm-ref=exlm:transition_grad=1,group_attention=per_state,next_group_bias=0)
# the H4 curve, longest runs first (ExLM 2.4 h measured, MLM ~2 h at 14,716 steps) so that two jobs started together end
# within a session; ExLM 10/10 last (it led ExLM at N: does the lift hold at N/2 and 2N?)
CURVE=(exlm mlm maelm "${EXLM[1]}")

[ -f runs/gue-corpus/corpus.txt ] || $POLYMASK benchmark-corpus dna --tasks mouse_0 mouse_2 mouse_3 mouse_4 \
    prom_300_tata prom_core_all prom_core_notata prom_core_tata tf_0 tf_1 tf_2 tf_3 tf_4 \
    --data-dir "${POLYMASK_DATA_DIR:-/work/shared/data}" --out runs/gue-corpus

# h1-seeds and exlm-seeds read their seed-0 runs and cells from steps-7358: links, so each is computed once
for row in h1-seeds:mlm:mlm h1-seeds:mlm100:mlm h1-seeds:maelm:maelm h1-seeds:maelm1010:maelm \
           exlm-seeds:exlm:exlm exlm-seeds:exlm1010:exlm; do
  IFS=: read -r folder label objective <<< "$row"
  mkdir -p $D/steps-7358/pretrain/$label-seed0 $D/steps-7358/benchmark-dna/cells/$label-seed0-$objective \
           $D/$folder/pretrain $D/$folder/benchmark-dna/cells
  [ -e $D/$folder/pretrain/$label-seed0 ] || ln -s ../../steps-7358/pretrain/$label-seed0 $D/$folder/pretrain/
  [ -e $D/$folder/benchmark-dna/cells/$label-seed0-$objective ] || \
    ln -s ../../../steps-7358/benchmark-dna/cells/$label-seed0-$objective $D/$folder/benchmark-dna/cells/
done

ONLY=("${@:2}")
only() {  # the variants named in ONLY (all without it)
  [ ${#ONLY[@]} -eq 0 ] && { printf '%s\n' "$@"; return; }
  local v l; for v in "$@"; do for l in "${ONLY[@]}"; do [ "${v%%=*}" = "$l" ] && echo "$v"; done; done; return 0
}

compare() {  # compare FOLDER BUDGET "SEEDS" [--no-references] -- VARIANTS...
  local out=$D/$1 budget=$2 seeds=$3; shift 3
  local refs=(); if [ "$1" = "--no-references" ]; then refs=(--no-references); shift; fi
  [ "$1" = "--" ] && shift
  local variants; mapfile -t variants < <(only "$@")
  [ ${#variants[@]} -gt 0 ] || { echo "no row of $out is named ${ONLY[*]}" >&2; exit 2; }
  local tf=(); for t in tf_0 tf_1 tf_2 tf_3 tf_4; do tf+=(--finetune-set "task_settings.$t={epochs: 20, patience: 3}"); done
  OMP_NUM_THREADS=1 $POLYMASK compare --modality dna --config dna-gue-mlm-3mer --objectives "${variants[@]}" \
    --budget $budget --seeds $seeds --benchmark-seeds "${BENCHMARK_SEEDS:-3}" --tasks tf_0 tf_1 tf_2 tf_3 tf_4 prom_core_all prom_core_notata mouse_4 \
    prom_300_tata prom_core_tata mouse_0 mouse_2 mouse_3 --max-train-examples 5000 --set train.keep_checkpoints=2 \
    --set train.eval_every=500 --set train.save_every=500 --finetune-set save_model=false "${tf[@]}" "${refs[@]}" \
    --data-dir "${POLYMASK_DATA_DIR:-/work/shared/data}" --out $out
}

case ${1:?which folder: steps-7358, h1-first, h1-seeds, exlm-seeds, steps-3679 or steps-14716} in
  steps-7358) compare steps-7358 7358-steps 0 -- "${ALL[@]}" ;;
  h1-first) compare steps-7358 7358-steps 0 -- "${H1[@]}" ;;  # H1's seed-0 rows and the references, before the rest
  h1-seeds) compare h1-seeds 7358-steps "0 1" --no-references -- "${H1[@]}" ;;
  exlm-seeds) compare exlm-seeds 7358-steps "0 1" --no-references -- "${EXLM[@]}" ;;
  steps-3679) compare steps-3679 3679-steps 0 --no-references -- "${CURVE[@]}" ;;
  steps-14716) compare steps-14716 14716-steps 0 --no-references -- "${CURVE[@]}" ;;
  *) echo "unknown folder $1" >&2; exit 2 ;;
esac
