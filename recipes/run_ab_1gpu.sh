#!/usr/bin/env bash
# One-GPU A/B (ab_1gpu.yaml): GRPO, then AVSPO with the paper's trigger (threshold_mode=adaptive), on Qwen2.5-0.5B-Instruct and
# GSM8K, the same seeds and settings but algorithm.adv_estimator; then `avspo analyze grpo=... avspo=...` compares them
# (ACR and effective ACR, GSM8K accuracy against rollouts, the rollouts AVSPO took to reach GRPO's final accuracy) in
# OUT_DIR/analysis/analysis.md, beside analysis.json and the plots.
# Estimated (not measured here): about 1 to 1.5 hours per run on one 80 GB GPU, 2.5 to 3 hours in all
# (docs/using/recipes.md, "One-GPU A/B").
# Usage: [OUT_DIR=...] [MODEL_PATH=...] [DATA_DIR=...] bash recipes/run_ab_1gpu.sh [hydra overrides, for both runs]
# Data first (docs/using/recipes.md, "2. Data"):
#   python -m recipes.math_data.prepare gsm8k --out $DATA_DIR/gsm8k_train.parquet
#   python -m recipes.math_data.prepare eval --out-dir $DATA_DIR/eval --benchmarks gsm8k
# Settings (MODEL_PATH, DATA_DIR, TRAIN_FILES, VAL_FILES, PYTHON, DRY_RUN, ...): recipes/common.sh. OUT_DIR: where the
# metrics (grpo.metrics.jsonl, avspo.metrics.jsonl) and the analysis go [./ab_1gpu]; AVSPO: the avspo command [avspo].
set -euo pipefail

MODEL_PATH="${MODEL_PATH:-Qwen/Qwen2.5-0.5B-Instruct}"
N_GPUS_PER_NODE="${N_GPUS_PER_NODE:-1}"
NNODES="${NNODES:-1}"
DATA_DIR="${DATA_DIR:-$HOME/data/avspo}"
TRAIN_FILES="${TRAIN_FILES:-$DATA_DIR/gsm8k_train.parquet}"
VAL_FILES="${VAL_FILES:-$DATA_DIR/eval/gsm8k.parquet}"
OUT_DIR="${OUT_DIR:-$PWD/ab_1gpu}"
AVSPO="${AVSPO:-avspo}"
# verl's validation metric of the GSM8K test split (data_source gsm8k, the reward's acc, greedy: mean@1).
ACCURACY="val-core/gsm8k/acc/mean@1"

# shellcheck source=recipes/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
[[ "$OUT_DIR" == /* ]] || OUT_DIR="$PWD/$OUT_DIR"
[[ "${DRY_RUN:-0}" == 1 ]] || mkdir -p "$OUT_DIR"
RUN_COST="about 30-45 s per step on one 80 GB GPU: 1-1.5 hours per run with its validations, 2.5-3 hours for the pair"
RUN_WRITES="$OUT_DIR/grpo.metrics.jsonl and $OUT_DIR/avspo.metrics.jsonl (each run's metrics), $OUT_DIR/analysis/ (analysis.md,"
RUN_WRITES+=" analysis.json and the plots), TensorBoard events in tensorboard_log/avspo_ab/ under the folder it runs in;"
RUN_WRITES+=" no checkpoints (trainer.save_freq=-1)"

for estimator in grpo avspo; do
  RUN_ENV=("VERL_FILE_LOGGER_PATH=$OUT_DIR/$estimator.metrics.jsonl")
  run_recipe ab_1gpu "algorithm.adv_estimator=$estimator" "trainer.default_local_dir=$OUT_DIR/checkpoints/$estimator" "$@"
done
launch "$AVSPO" analyze "grpo=$OUT_DIR/grpo.metrics.jsonl" "avspo=$OUT_DIR/avspo.metrics.jsonl" --accuracy "$ACCURACY" \
  --out "$OUT_DIR/analysis"
