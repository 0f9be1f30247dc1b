#!/usr/bin/env bash
# One-GPU A/B (ab_1gpu.yaml): GRPO, then AVSPO at its defaults (the paper's method: adaptive trigger), on
# Qwen2.5-0.5B-Instruct and GSM8K, the same seeds and settings but algorithm.adv_estimator, SEEDS times (seed s sets
# data.seed and actor_rollout_ref.rollout.seed for both arms); then `avspo analyze grpo@s=... avspo@s=...` compares
# them seed by seed and pooled (the paired difference of the final GSM8K accuracy, with a 95% interval from 2 seeds on,
# and what that many seeds can tell) in OUT_DIR/analysis/analysis.md, beside analysis.json and the plots.
# Estimated (not measured here): about 30-45 s per step on one 80 GB GPU, so a seed (two runs of STEPS=100 steps)
# 2.5 to 3 hours (docs/using/recipes.md, "One-GPU A/B").
# Usage: [SEEDS=3] [STEPS=100] [OUT_DIR=...] [MODEL_PATH=...] [DATA_DIR=...] bash recipes/run_ab_1gpu.sh [hydra overrides,
# for every run]
# Data first (docs/using/recipes.md, "2. Data"):
#   python -m recipes.math_data.prepare gsm8k --out $DATA_DIR/gsm8k_train.parquet
#   python -m recipes.math_data.prepare eval --out-dir $DATA_DIR/eval --benchmarks gsm8k
# Settings (MODEL_PATH, DATA_DIR, TRAIN_FILES, VAL_FILES, PYTHON, DRY_RUN, ...): recipes/common.sh. OUT_DIR: where the
# metrics (grpo.seed<s>.metrics.jsonl, avspo.seed<s>.metrics.jsonl) and the analysis go [./ab_1gpu]; AVSPO: the avspo
# command [avspo]; SEEDS: seeds per arm, 1 to SEEDS [3]; STEPS: training steps per run [100].
set -euo pipefail

MODEL_PATH="${MODEL_PATH:-Qwen/Qwen2.5-0.5B-Instruct}"
N_GPUS_PER_NODE="${N_GPUS_PER_NODE:-1}"
NNODES="${NNODES:-1}"
DATA_DIR="${DATA_DIR:-$HOME/data/avspo}"
TRAIN_FILES="${TRAIN_FILES:-$DATA_DIR/gsm8k_train.parquet}"
VAL_FILES="${VAL_FILES:-$DATA_DIR/eval/gsm8k.parquet}"
OUT_DIR="${OUT_DIR:-$PWD/ab_1gpu}"
AVSPO="${AVSPO:-avspo}"
SEEDS="${SEEDS:-3}"
STEPS="${STEPS:-100}"
[[ "$SEEDS" =~ ^[1-9][0-9]*$ ]] || { echo "error: SEEDS=$SEEDS: a whole number of seeds per arm, at least 1" >&2; exit 1; }
[[ "$STEPS" =~ ^[1-9][0-9]*$ ]] || { echo "error: STEPS=$STEPS: a whole number of training steps, at least 1" >&2; exit 1; }
# verl's validation metric of the GSM8K test split (data_source gsm8k, the reward's acc, greedy: mean@1).
ACCURACY="val-core/gsm8k/acc/mean@1"

# shellcheck source=recipes/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
[[ "$OUT_DIR" == /* ]] || OUT_DIR="$PWD/$OUT_DIR"
[[ "${DRY_RUN:-0}" == 1 ]] || mkdir -p "$OUT_DIR"
RUN_COST="about 30-45 s per step on one 80 GB GPU: at STEPS=100 1-1.5 hours per run with its validations, 2.5-3 hours"
RUN_COST+=" per seed (two runs), $SEEDS seed(s) here"
RUN_WRITES="$OUT_DIR/grpo.seed<s>.metrics.jsonl and $OUT_DIR/avspo.seed<s>.metrics.jsonl for s = 1..$SEEDS (each run's"
RUN_WRITES+=" metrics), $OUT_DIR/analysis/ (analysis.md, analysis.json and the plots), TensorBoard events in"
RUN_WRITES+=" tensorboard_log/avspo_ab/ under the folder it runs in; no checkpoints (trainer.save_freq=-1)"

RUNS=()
for seed in $(seq 1 "$SEEDS"); do
  for estimator in grpo avspo; do
    RUN_ENV=("VERL_FILE_LOGGER_PATH=$OUT_DIR/$estimator.seed$seed.metrics.jsonl")
    run_recipe ab_1gpu "algorithm.adv_estimator=$estimator" "data.seed=$seed" "actor_rollout_ref.rollout.seed=$seed" \
      "trainer.total_training_steps=$STEPS" "trainer.default_local_dir=$OUT_DIR/checkpoints/$estimator.seed$seed" "$@"
    RUNS+=("$estimator@$seed=$OUT_DIR/$estimator.seed$seed.metrics.jsonl")
  done
done
launch "$AVSPO" analyze "${RUNS[@]}" --accuracy "$ACCURACY" --out "$OUT_DIR/analysis"
