#!/usr/bin/env bash
# AVSPO on Qwen2.5-14B, Megatron engine (avspo_megatron_14b.yaml): one node of 8 GPUs, actor tensor
# parallel 4 x pipeline parallel 2, vLLM rollout tensor parallel 4. On two nodes (the head node of a
# running two-node Ray cluster, or run_slurm.sh / submit_ray_job.sh with RECIPE=avspo_megatron_14b),
# double the prompts per step so that every GPU keeps its work: NNODES=2 ... data.train_batch_size=2
# actor_rollout_ref.actor.ppo_mini_batch_size=2 (docs/using/recipes.md, "Sizing").
# Usage: [MODEL_PATH=...] [DATA_DIR=...] bash recipes/run_avspo_megatron_14b.sh [hydra overrides]
# Settings (MODEL_PATH, DATA_DIR, TRAIN_FILES, VAL_FILES, N_GPUS_PER_NODE, NNODES, ...): recipes/common.sh.
set -euo pipefail

MODEL_PATH="${MODEL_PATH:-Qwen/Qwen2.5-14B}"
N_GPUS_PER_NODE="${N_GPUS_PER_NODE:-8}"
NNODES="${NNODES:-1}"

# shellcheck source=recipes/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
run_recipe avspo_megatron_14b "$@"
