#!/usr/bin/env bash
# ACR monitoring on plain GRPO (avspo_paper_monitor.yaml: verl's GRPO with the ACR monitor), the paper's setting.
# Usage: [MODEL_PATH=...] [DATA_DIR=...] bash recipes/run_avspo_paper_monitor.sh [hydra overrides]
# Settings (MODEL_PATH, DATA_DIR, TRAIN_FILES, VAL_FILES, N_GPUS_PER_NODE, NNODES, ...): recipes/common.sh.
set -euo pipefail

MODEL_PATH="${MODEL_PATH:-Qwen/Qwen2.5-Math-1.5B}"
N_GPUS_PER_NODE="${N_GPUS_PER_NODE:-8}"
NNODES="${NNODES:-1}"

# shellcheck source=recipes/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
run_recipe avspo_paper_monitor "$@"
