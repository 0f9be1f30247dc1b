#!/usr/bin/env bash
#SBATCH --job-name=avspo
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=64
#SBATCH --mem=0
#SBATCH --exclusive
#SBATCH --time=24:00:00
#SBATCH --output=avspo_%j.out
# AVSPO on Slurm: a Ray head on the first node of the allocation, a Ray worker on each other node, then
# the recipe submitted as a Ray job (common.sh's submit_recipe, after its check job); Ray stops with the job.
# Usage (from the repository root, so that recipes/ is found):
#   RECIPE=avspo_megatron_14b sbatch recipes/run_slurm.sh [hydra overrides]
#   DRY_RUN=1 [NNODES=2] RECIPE=avspo_megatron_14b bash recipes/run_slurm.sh [hydra overrides]   # what the job runs
#   RECIPE=avspo_megatron_14b sbatch --nodes=2 recipes/run_slurm.sh data.train_batch_size=2 \
#       actor_rollout_ref.actor.ppo_mini_batch_size=2          # two nodes: twice the prompts per step
# NNODES is the allocation's node count; N_GPUS_PER_NODE defaults to Slurm's GPUs per node, else 8;
# CPUS_PER_NODE (CPUs of each node's Ray step) to SLURM_CPUS_PER_TASK, else SLURM_CPUS_ON_NODE.
# Other settings (MODEL_PATH, DATA_DIR, PYTHON, PLUGIN_LOAD, ...): recipes/common.sh. RAY_PORT [6379],
# DASHBOARD_PORT [8265], RAY (the ray command) [ray], RAY_START_TIMEOUT seconds [600].
# Every srun step states its CPUs and GPUs: from Slurm 22.05 on, srun no longer takes --cpus-per-task
# from sbatch, and a step without it would run Ray on one CPU.
set -euo pipefail

# sbatch runs a copy of this script from its spool folder: find recipes/ from the submit folder.
if [[ -z "${RECIPES_DIR:-}" ]]; then
  if [[ -n "${SLURM_SUBMIT_DIR:-}" ]]; then
    RECIPES_DIR="$SLURM_SUBMIT_DIR/recipes"
  else
    RECIPES_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  fi
fi
if [[ ! -f "$RECIPES_DIR/common.sh" ]]; then
  echo "error: no common.sh in RECIPES_DIR=$RECIPES_DIR: submit from the repository root or set RECIPES_DIR" >&2
  exit 1
fi
# shellcheck source=recipes/common.sh
source "$RECIPES_DIR/common.sh"

RECIPE="${RECIPE:-avspo_megatron_14b}"
RAY="${RAY:-ray}"
RAY_PORT="${RAY_PORT:-6379}"
DASHBOARD_PORT="${DASHBOARD_PORT:-8265}"
RAY_START_TIMEOUT="${RAY_START_TIMEOUT:-600}"
if [[ -n "${SLURM_JOB_ID:-}" ]]; then
  NNODES="$SLURM_JOB_NUM_NODES"
  CPUS_PER_NODE="${CPUS_PER_NODE:-${SLURM_CPUS_PER_TASK:-${SLURM_CPUS_ON_NODE:-}}}"
elif [[ "${DRY_RUN:-0}" == 1 ]]; then
  # What the job would run, printed before it is submitted: NNODES nodes (default 1, as #SBATCH --nodes above) named
  # node1, node2, ..., each with #SBATCH --cpus-per-task's CPUs unless CPUS_PER_NODE says otherwise.
  NNODES="${NNODES:-1}"
  CPUS_PER_NODE="${CPUS_PER_NODE:-64}"
else
  die "not inside a Slurm allocation: submit with sbatch (or use submit_ray_job.sh); DRY_RUN=1 prints what the job runs"
fi
N_GPUS_PER_NODE="${N_GPUS_PER_NODE:-${SLURM_GPUS_ON_NODE:-8}}"
[[ -n "$CPUS_PER_NODE" ]] || die "CPUS_PER_NODE is not set and Slurm gave neither SLURM_CPUS_PER_TASK nor SLURM_CPUS_ON_NODE"
check_count NNODES
check_count CPUS_PER_NODE
# Check the recipe and paths before starting anything.
verl_command "$RECIPE" "$@"
dry_run_header "$RECIPE"

if [[ -n "${SLURM_JOB_ID:-}" ]]; then
  mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
  [[ ${#nodes[@]} -eq "$NNODES" ]] || die "scontrol lists ${#nodes[@]} node(s) in $SLURM_JOB_NODELIST, Slurm says $NNODES"
else
  nodes=()
  for ((i = 1; i <= NNODES; i++)); do nodes+=("node$i"); done
  echo "# not inside an allocation: ${nodes[*]} and <node1-address> stand for the allocation's nodes and its head's address"
fi
head_node="${nodes[0]}"

# The GPUs each node really has, before Ray is told how many: one task per node prints its Slurm node
# name, its address and the GPUs `nvidia-smi -L` lists there.
# shellcheck disable=SC2016  # expanded on each node, not here
node_report='printf "%s %s %s\n" "$SLURMD_NODENAME" "$(hostname --ip-address | cut -d" " -f1)" "$(nvidia-smi -L 2>/dev/null | grep -c "^GPU ")"'
report_step=(srun --nodes="$NNODES" --ntasks="$NNODES" --ntasks-per-node=1 --cpus-per-task=1
  --gpus-per-node="$N_GPUS_PER_NODE" bash -c "$node_report")
if [[ "${DRY_RUN:-0}" == 1 ]]; then
  echo "# each node's name, address and GPUs (the job stops when one lists fewer than $N_GPUS_PER_NODE):"
  command_line "${report_step[@]}"
  head_ip="<$head_node-address>"
else
  mapfile -t reports < <("${report_step[@]}")
  head_ip=""
  short=()
  for node in "${nodes[@]}"; do
    report=""
    for line in "${reports[@]}"; do
      if [[ "${line%% *}" == "$node" ]]; then report="$line"; fi
    done
    read -r _ ip gpus <<<"$report"
    if [[ -z "$report" ]]; then
      short+=("$node: no report (the step did not run there)")
    elif [[ "$gpus" -lt "$N_GPUS_PER_NODE" ]]; then
      short+=("$node: nvidia-smi -L lists $gpus GPU(s), $N_GPUS_PER_NODE needed")
    fi
    if [[ "$node" == "$head_node" ]]; then head_ip="$ip"; fi
  done
  if [[ ${#short[@]} -gt 0 ]]; then
    die "not every node has its GPUs (N_GPUS_PER_NODE=$N_GPUS_PER_NODE):
$(printf '  %s\n' "${short[@]}")
  Check the driver on those nodes, and that the allocation asked for the GPUs (--gpus-per-node)."
  fi
  [[ -n "$head_ip" ]] || die "no address for the head node $head_node"
  echo "Ray head: $head_node ($head_ip:$RAY_PORT), dashboard http://$head_ip:$DASHBOARD_PORT, ${#nodes[@]} nodes" >&2
fi

# The Ray processes live as long as these job steps; stop them when this script ends, however it ends.
ray_steps=()
stop_ray() {
  if [[ ${#ray_steps[@]} -gt 0 ]]; then kill "${ray_steps[@]}" 2>/dev/null || true; fi
}
trap stop_ray EXIT

# wait_for_nodes N: until N alive Ray nodes each advertise N_GPUS_PER_NODE GPUs, or RAY_START_TIMEOUT
# seconds have passed.
wait_for_nodes() {
  if [[ "${DRY_RUN:-0}" == 1 ]]; then
    echo "# then wait until $1 Ray node(s) each list $N_GPUS_PER_NODE GPUs (at most RAY_START_TIMEOUT=${RAY_START_TIMEOUT} s)"
    return 0
  fi
  local deadline=$((SECONDS + RAY_START_TIMEOUT))
  until "$PYTHON" - "$head_ip:$RAY_PORT" "$1" "$N_GPUS_PER_NODE" <<'PY'; do
import sys, ray
ray.init(address=sys.argv[1], logging_level="ERROR")
ready = [n for n in ray.nodes() if n["Alive"] and n["Resources"].get("GPU", 0) >= float(sys.argv[3])]
sys.exit(0 if len(ready) >= int(sys.argv[2]) else 1)
PY
    ((SECONDS < deadline)) ||
      die "the Ray cluster did not reach $1 node(s) with $N_GPUS_PER_NODE GPUs each within ${RAY_START_TIMEOUT}s"
    sleep 10
  done
}

# ray_step NODE RAY-START-ARGS...: a Ray node as a job step on NODE, with the node's CPUs and GPUs.
ray_step() {
  local node="$1"
  shift
  local -a step=(srun --nodes=1 --ntasks=1 --cpus-per-task="$CPUS_PER_NODE" --gpus-per-node="$N_GPUS_PER_NODE" -w "$node"
    "$RAY" start --block "$@" --num-cpus="$CPUS_PER_NODE" --num-gpus="$N_GPUS_PER_NODE" --disable-usage-stats)
  if [[ "${DRY_RUN:-0}" == 1 ]]; then
    printf '%s &\n' "$(command_line "${step[@]}")"
    return 0
  fi
  "${step[@]}" &
  ray_steps+=($!)
}

ray_step "$head_node" --head --node-ip-address="$head_ip" --port="$RAY_PORT" \
  --dashboard-host=0.0.0.0 --dashboard-port="$DASHBOARD_PORT"
wait_for_nodes 1
for node in "${nodes[@]:1}"; do
  ray_step "$node" --address="$head_ip:$RAY_PORT"
done
wait_for_nodes "$NNODES"

RAY_ADDRESS="http://$head_ip:$DASHBOARD_PORT" submit_recipe "$RECIPE" "$@"
