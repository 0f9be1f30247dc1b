# shellcheck shell=bash
# Shared by the recipe scripts (run_*.sh, submit_ray_job.sh, run_slurm.sh): sourced, not run.
#
# Settings come from environment variables; unset or empty means the default in brackets.
#   MODEL_PATH       the model: a local folder, or a hub id (org/name)           [the recipe's]
#   DATA_DIR         where `python -m recipes.math_data.prepare` wrote its files  [$HOME/data/avspo]
#   TRAIN_FILES      training parquet file(s), space-separated                    [$DATA_DIR/level3_500.parquet]
#   VAL_FILES        validation parquet file(s), space-separated                  [$DATA_DIR/eval/math500.parquet]
#   N_GPUS_PER_NODE  GPUs per node                                                [the recipe's]
#   NNODES           number of nodes                                              [the recipe's]
#   PYTHON           a Python with verl and avspo-plugin installed                [python3]
#   PLUGIN_LOAD      how Ray processes load the plugin: entry-point (verl >= 0.9 loads the installed
#                    package's verl.plugins entry point by itself) or env (verl 0.6.1 - 0.8: the
#                    VERL_USE_EXTERNAL_MODULES variable through the Ray runtime env)  [entry-point]
#   CHECK_PATHS=0    skip the file and model checks (a submitting machine that does not see the
#                    cluster's files); paths are then passed as given, and must be absolute  [1]
#   CHECK_NODES=0    submit_ray_job.sh / run_slurm.sh: skip the check job that looks at every node
#                    (plugin, math-verify, verl, the avspo estimator, GPUs, wandb login)   [1]
#   DRY_RUN=1        print what would run instead of running it: first the estimated cost and what the run
#                    writes (as # comments), then each command on one line, shell-quoted, to paste as it
#                    is; a data file that does not exist yet is a note (with the command that writes it),
#                    not an error. Each note is given once.
# Arguments after the script's own are passed to verl as hydra overrides. The recipes log to
# [console,tensorboard]; an override trainer.logger=[...,wandb] is checked for a wandb login first.

RECIPES_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PLUGIN_MODULE="avspo_plugin.verl"
PYTHON="${PYTHON:-python3}"
DATA_DIR="${DATA_DIR:-$HOME/data/avspo}"
TRAIN_FILES="${TRAIN_FILES:-$DATA_DIR/level3_500.parquet}"
VAL_FILES="${VAL_FILES:-$DATA_DIR/eval/math500.parquet}"
PLUGIN_LOAD="${PLUGIN_LOAD:-entry-point}"

die() {
  echo "error: $*" >&2
  exit 1
}

# note TEXT: TEXT on stderr, once per script run (a two-run script checks the same files twice).
NOTES_GIVEN=""
note() {
  case "$NOTES_GIVEN" in *"<<$1>>"*) return 0 ;; esac
  NOTES_GIVEN+="<<$1>>"
  echo "$1" >&2
}

absolute_path() {
  if [[ -d "$(dirname "$1")" ]]; then
    printf '%s/%s' "$(cd "$(dirname "$1")" && pwd)" "$(basename "$1")"
  elif [[ "$1" == /* ]]; then
    printf '%s' "$1"
  else
    printf '%s/%s' "$PWD" "$1"
  fi
}

# make_file_hint FILE: the command that writes FILE, for the data files the recipes name (docs/using/recipes.md,
# "2. Data"); a generic pointer for any other.
make_file_hint() {
  # recipes/math_data/ is importable from the repository's root, wherever the script runs from.
  local file="$1" prepare="PYTHONPATH=${RECIPES_DIR%/recipes} $PYTHON -m recipes.math_data.prepare"
  local dir name
  dir="$(dirname "$file")"
  name="$(basename "$file" .parquet)"
  case "$name" in
    level3_500)
      printf '    %s math --out %s/math_train.parquet\n    %s level3-500 --train %s/math_train.parquet --model Qwen/Qwen2.5-Math-1.5B --out %s   # GPU (vLLM)' \
        "$prepare" "$dir" "$prepare" "$dir" "$file" ;;
    math_train) printf '    %s math --out %s' "$prepare" "$file" ;;
    gsm8k_train) printf '    %s gsm8k --out %s' "$prepare" "$file" ;;
    math500 | gsm8k | minerva | olympiadbench | amc | aime2024)
      printf '    %s eval --out-dir %s --benchmarks %s' "$prepare" "$dir" "$name" ;;
    *) printf '    (no recipe writes %s: a verl parquet file of your own, docs/using/recipes.md "2. Data")' "$file" ;;
  esac
}

# require_files VARIABLE FILE...: every FILE exists, or a message naming VARIABLE and the command that writes the
# file. Under DRY_RUN=1 a missing file is a note, so that the command can be printed before the data exists.
require_files() {
  local variable="$1" file message
  shift
  [[ $# -gt 0 ]] || die "$variable is empty: give at least one parquet file"
  for file in "$@"; do
    if [[ ! -f "$file" ]]; then
      message="$variable: no such file: $file
  Write it with (docs/using/recipes.md, \"2. Data\"):
$(make_file_hint "$file")
  or point $variable (or DATA_DIR) at your copy."
      if [[ "${DRY_RUN:-0}" == 1 ]]; then
        note "note (DRY_RUN: the command is printed all the same): $message"
      else
        die "$message"
      fi
    fi
  done
}

# check_model: MODEL_PATH, when set, is an existing folder or a hub id.
check_model() {
  [[ -n "${MODEL_PATH:-}" ]] || return 0
  if [[ -d "$MODEL_PATH" ]]; then
    MODEL_PATH="$(cd "$MODEL_PATH" && pwd)"
    return 0
  fi
  case "$MODEL_PATH" in
    /* | ./* | ../* | "~"*) die "MODEL_PATH: no such folder: $MODEL_PATH" ;;
  esac
  if [[ ! "$MODEL_PATH" =~ ^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$ ]]; then
    die "MODEL_PATH: '$MODEL_PATH' is neither an existing folder nor a hub id of the form org/name"
  fi
  note "note: MODEL_PATH=$MODEL_PATH is not a local folder: it is read from the hub as a model id"
}

# check_count VARIABLE: the variable, when set, is a positive integer.
check_count() {
  local value="${!1:-}"
  [[ -z "$value" || "$value" =~ ^[1-9][0-9]*$ ]] || die "$1 must be a positive integer, got '$value'"
}

# no_tilde VARIABLE PATH...: verl does not expand "~"; a path passed on as given must not start with it.
no_tilde() {
  local variable="$1" path
  shift
  for path in "$@"; do
    if [[ "$path" == "~"* ]]; then
      die "$variable: '$path' starts with ~, which verl does not expand: give an absolute path"
    fi
  done
}

# has_override REGEX OVERRIDE...: whether an override matches REGEX (anchored at its start).
has_override() {
  local pattern="$1" arg
  shift
  for arg in "$@"; do
    if [[ "$arg" =~ ^$pattern ]]; then return 0; fi
  done
  return 1
}

# uses_wandb OVERRIDE...: whether a trainer.logger override names wandb (the recipes' own logger,
# console + tensorboard, does not).
uses_wandb() {
  has_override '\+*trainer\.logger=.*wandb' "$@"
}

# check_wandb_login: wandb needs a login where the trainer logs; without one, verl's wandb.init fails
# (or waits for a key) only after the cluster has started. Say so before anything starts.
check_wandb_login() {
  local host="${WANDB_BASE_URL:-api.wandb.ai}" netrc="${NETRC:-$HOME/.netrc}"
  host="${host#*://}"
  host="${host%%/*}"
  [[ -n "${WANDB_API_KEY:-}" ]] && return 0
  case "${WANDB_MODE:-}" in offline | disabled | dryrun) return 0 ;; esac
  if [[ -f "$netrc" ]] && grep -q "$host" "$netrc"; then return 0; fi
  die "trainer.logger includes wandb, but wandb has no login here (WANDB_API_KEY unset, no $host in $netrc):
  run \`wandb login\` or set WANDB_API_KEY, or WANDB_MODE=offline, or log to trainer.logger=[console,tensorboard]"
}

# hydra_list FILE...: ['a','b'] as verl's data.train_files / data.val_files take it.
hydra_list() {
  local joined="" file
  for file in "$@"; do
    joined+="${joined:+,}'$file'"
  done
  printf '[%s]' "$joined"
}

# verl_command RECIPE [OVERRIDE...]: checks the settings and sets VERL_CMD to the verl command line.
verl_command() {
  local recipe="$1" file
  shift
  [[ -f "$RECIPES_DIR/$recipe.yaml" ]] || die "RECIPE: no $recipe.yaml in $RECIPES_DIR"
  case "$PLUGIN_LOAD" in
    entry-point | env) ;;
    *) die "PLUGIN_LOAD must be entry-point or env, got '$PLUGIN_LOAD'" ;;
  esac
  local -a train=() val=() train_abs=() val_abs=()
  read -r -a train <<<"$TRAIN_FILES"
  read -r -a val <<<"$VAL_FILES"
  if [[ "${CHECK_PATHS:-1}" == 1 ]]; then
    require_files TRAIN_FILES "${train[@]}"
    require_files VAL_FILES "${val[@]}"
    check_model
    for file in "${train[@]}"; do train_abs+=("$(absolute_path "$file")"); done
    for file in "${val[@]}"; do val_abs+=("$(absolute_path "$file")"); done
  else
    no_tilde TRAIN_FILES "${train[@]}"
    no_tilde VAL_FILES "${val[@]}"
    no_tilde MODEL_PATH "${MODEL_PATH:-}"
    train_abs=("${train[@]}")
    val_abs=("${val[@]}")
  fi
  check_count N_GPUS_PER_NODE
  check_count NNODES
  if [[ "${NNODES:-1}" -gt 1 ]] && ! has_override '\+*data\.train_batch_size=' "$@"; then
    note "note: NNODES=$NNODES with the recipe's prompts per step: more nodes split the same sequences over more
  GPUs, so each does less per step; scale data.train_batch_size and actor_rollout_ref.actor.ppo_mini_batch_size
  with the nodes (docs/using/recipes.md, \"Sizing\")"
  fi
  VERL_CMD=(
    "$PYTHON" -m verl.trainer.main_ppo
    --config-path "$RECIPES_DIR"
    --config-name "$recipe"
    "data.train_files=$(hydra_list "${train_abs[@]}")"
    "data.val_files=$(hydra_list "${val_abs[@]}")"
  )
  if [[ -n "${MODEL_PATH:-}" ]]; then VERL_CMD+=("actor_rollout_ref.model.path=$MODEL_PATH"); fi
  if [[ -n "${N_GPUS_PER_NODE:-}" ]]; then VERL_CMD+=("trainer.n_gpus_per_node=$N_GPUS_PER_NODE"); fi
  if [[ -n "${NNODES:-}" ]]; then VERL_CMD+=("trainer.nnodes=$NNODES"); fi
  VERL_CMD+=("$@")
}

# shell_word ARG: ARG as one shell word, quoted only where a shell would read it otherwise (hydra lists in quotes).
shell_word() {
  if [[ "$1" =~ ^[A-Za-z0-9_@%+=:,./-]+$ ]]; then
    printf '%s' "$1"
  elif [[ "$1" != *"'"* ]]; then
    printf "'%s'" "$1"
  elif [[ ! "$1" =~ [\"\$\`\\!] ]]; then
    printf '"%s"' "$1"
  else
    printf '%q' "$1"
  fi
}

# command_line ARG...: the command as one line that a shell runs as given.
command_line() {
  local line="" arg
  for arg in "$@"; do line+="${line:+ }$(shell_word "$arg")"; done
  printf '%s\n' "$line"
}

# recipe_outlook RECIPE: what a recipe's run costs and writes, for the dry run's header: RUN_COST and RUN_WRITES, unless
# the script set them. The costs are docs/using/recipes.md's estimates ("9. Cost per step"), not measurements; the
# folders are verl's defaults for the recipe's trainer.project_name and trainer.experiment_name (tests/recipes check
# them against each composed config).
recipe_outlook() {
  local experiment cost="about 10-20 s per step on 8 GPUs: 1.5-3 hours for the 500 steps, plus validation every 50"
  case "$1" in
    avspo_paper) experiment=qwen2.5-math-1.5b_level3-500_avspo ;;
    grpo_paper) experiment=qwen2.5-math-1.5b_level3-500_grpo ;;
    avspo_paper_monitor) experiment=qwen2.5-math-1.5b_level3-500_grpo_acr-monitor ;;
    avspo_dapo) experiment=qwen2.5-math-1.5b_level3-500_avspo_dapo-clip-token-mean ;;
    avspo_megatron_7b)
      experiment=qwen2.5-math-7b_level3-500_avspo_megatron
      cost="a few times the 1.5B recipes' 10-20 s per step on 8 GPUs, for 500 steps" ;;
    avspo_megatron_14b)
      experiment=qwen2.5-14b_level3-500_avspo_megatron
      cost="more per step than the 7B recipe (a few times the 1.5B recipes' 10-20 s), for 500 steps" ;;
    *) experiment="" ;;
  esac
  RUN_COST="${RUN_COST:-$cost (estimated, not measured: docs/using/recipes.md, \"9. Cost per step\")}"
  if [[ -z "${RUN_WRITES:-}" && -n "$experiment" ]]; then
    RUN_WRITES="a checkpoint every 100 steps in checkpoints/avspo/$experiment/global_step_<N>/ (trainer.default_local_dir)"
    RUN_WRITES+=" and TensorBoard events in tensorboard_log/avspo/$experiment/ (or \$TENSORBOARD_DIR), under the folder"
    RUN_WRITES+=" the trainer runs in; the console log"
  fi
}

# dry_run_header RECIPE: under DRY_RUN=1, once: what is printed, the estimated cost and what the run writes.
DRY_RUN_HEADER_GIVEN=0
dry_run_header() {
  [[ "${DRY_RUN:-0}" == 1 && "$DRY_RUN_HEADER_GIVEN" == 0 ]] || return 0
  DRY_RUN_HEADER_GIVEN=1
  recipe_outlook "$1"
  echo "# DRY_RUN=1: $(basename "$0") would run the command(s) below, one per line (each can be pasted as it is)"
  echo "# estimated cost: ${RUN_COST}"
  if [[ -n "${RUN_WRITES:-}" ]]; then echo "# writes: ${RUN_WRITES}"; fi
}

launch() {
  if [[ "${DRY_RUN:-0}" == 1 ]]; then
    command_line "$@"
    return 0
  fi
  (
    set -x
    "$@"
  )
}

# run_recipe RECIPE [OVERRIDE...]: run verl here. On one node Ray starts inside this process; on the
# head node of a running Ray cluster it connects to that cluster.
run_recipe() {
  verl_command "$@"
  if uses_wandb "$@"; then check_wandb_login; fi
  dry_run_header "$1"
  # RUN_ENV=(NAME=VALUE ...): variables of this run alone (run_ab_1gpu.sh: each run's metrics file), on its command
  # line so that a dry run's line runs as the script would.
  local -a run_env=()
  if [[ -n "${RUN_ENV+set}" ]]; then run_env=("${RUN_ENV[@]}"); fi
  if [[ "$PLUGIN_LOAD" == env ]]; then
    # This process imports it through the variable, the Ray processes through the runtime env.
    run_env+=("VERL_USE_EXTERNAL_MODULES=$PLUGIN_MODULE")
    VERL_CMD+=("+ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES=$PLUGIN_MODULE")
  fi
  if [[ ${#run_env[@]} -gt 0 ]]; then
    launch env "${run_env[@]}" "${VERL_CMD[@]}"
  else
    launch "${VERL_CMD[@]}"
  fi
}

# submit_recipe RECIPE [OVERRIDE...]: submit the run as a Ray job to the cluster at RAY_ADDRESS
# (its dashboard, e.g. http://head:8265); the job's driver runs on the head node. First a check job
# (check_cluster.py) looks at every node: the plugin, its math reward, math-verify and verl import,
# verl has the avspo estimator, the nodes have their GPUs, and wandb can log in when the run logs there.
submit_recipe() {
  local address="${RAY_ADDRESS:-}"
  if [[ -z "$address" && "${DRY_RUN:-0}" == 1 ]]; then
    address="http://<head-node>:8265"
  fi
  [[ -n "$address" ]] || die "RAY_ADDRESS is not set: give the cluster's dashboard address, e.g. http://head-node:8265"
  verl_command "$@"
  dry_run_header "$1"
  if [[ -z "${RAY_ADDRESS:-}" ]]; then echo "# RAY_ADDRESS is not set: $address stands for the cluster's dashboard"; fi
  # verl passes its own runtime env to ray.init inside the job; Ray refuses to merge it with the job's
  # when both name one variable, unless told to let the driver's win.
  local env_vars='"RAY_OVERRIDE_JOB_RUNTIME_ENV": "1"'
  if [[ "$PLUGIN_LOAD" == env ]]; then
    env_vars+=", \"VERL_USE_EXTERNAL_MODULES\": \"$PLUGIN_MODULE\""
  fi
  if [[ -n "${TENSORBOARD_DIR:-}" ]]; then
    env_vars+=", \"TENSORBOARD_DIR\": \"$TENSORBOARD_DIR\""
  fi
  local runtime_env="{\"env_vars\": {$env_vars}}"
  if [[ "${CHECK_NODES:-1}" == 1 ]]; then
    local -a check=("$PYTHON" "$RECIPES_DIR/check_cluster.py")
    if [[ -n "${NNODES:-}" ]]; then check+=(--nodes "$NNODES"); fi
    if [[ -n "${N_GPUS_PER_NODE:-}" ]]; then check+=(--gpus-per-node "$N_GPUS_PER_NODE"); fi
    if uses_wandb "$@"; then check+=(--wandb); fi
    launch "${RAY:-ray}" job submit --address "$address" --runtime-env-json "$runtime_env" -- "${check[@]}" ||
      die "the cluster at $address is not ready for this run: the check job's output above names each node's problem
  (CHECK_NODES=0 skips the check)"
  fi
  launch "${RAY:-ray}" job submit --address "$address" --runtime-env-json "$runtime_env" -- "${VERL_CMD[@]}"
}
