#!/usr/bin/env bash
# The GPU stack verl prescribes, checked on a CPU machine: one fresh venv (deleted after) with verl, transformers and
# everything else under the stack's constraints file (constraints-vllm.txt or constraints-sglang.txt), torch a CPU
# build, the package from this checkout; then the estimator's checks against verl (compat/check_estimator.py), the
# core's equality with verl's GRPO, the hooks and one `avspo verl-demo` run through verl's trainer (the test suite's
# own files, by path; the trl extra too, since the suite's fresh-process fixture imports every runtime module), and
# both stacks' metadata (compat/check_stack_metadata.py: what cannot be installed here,
# vLLM, sglang and verl's CUDA torch, against the file and against what was).
#
#   compat/check_gpu_stack.sh [vllm|sglang]          (default: vllm)
#
# TORCH: the torch version to install (default: the file's pin), a CPU build; TORCH_INDEX: pip's arguments for it
# (default: --index-url https://download.pytorch.org/whl/cpu; empty: pip's configured index). A CUDA build stops the
# check before anything else is installed. The result goes to compat/results/gpu-STACK.json, the log beside it on
# failure. Slow: verl's dependencies (about 2 GB) and one verl launch, 10-15 minutes on 2 cores.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
stack=${1:-vllm}
file=constraints-$stack.txt
[ -f "$file" ] || { echo "no $file: the stacks are vllm and sglang" >&2; exit 2; }
python=${PYTHON:-python3.11}
torch=${TORCH:-$(sed -n 's/^torch==\([^ ]*\).*/\1/p' "$file")}
read -r -a torch_index <<< "${TORCH_INDEX---index-url https://download.pytorch.org/whl/cpu}"
venv=$(mktemp -d "${TMPDIR:-/tmp}/avspo-gpu-$stack.XXXX")
log=$venv/check.log
result=compat/results/gpu-$stack.json
mkdir -p compat/results
trap 'rm -rf "$venv"' EXIT
pip=("$venv/env/bin/pip" install -q --disable-pip-version-check)
py=$venv/env/bin/python

# The stack's file with its torch line set to the torch installed here, and the packages that need CUDA left out.
grep -vE '^(torch|torchvision|torchaudio|vllm|sglang)==' "$file" > "$venv/constraints.txt"
echo "torch==$torch" >> "$venv/constraints.txt"

echo "== verl's $stack stack ($file) in $venv, torch $torch"
start=$SECONDS
if ! {
  "$python" -m venv "$venv/env" &&
  "${pip[@]}" "${torch_index[@]}" "torch==$torch" &&
  "$py" -c 'import sys, torch; sys.exit(f"torch {torch.__version__} is a CUDA build" if torch.version.cuda else 0)' &&
  "${pip[@]}" -c "$venv/constraints.txt" ".[verl,math,lab,analyze,trl,test]" "verl[verl-core]"
} > "$log" 2>&1; then
  cp "$log" "compat/results/gpu-$stack.log"
  echo "   install FAILED (compat/results/gpu-$stack.log)"; tail -5 "$log"; exit 1
fi
install_s=$((SECONDS - start))
echo "   installed in ${install_s} s"

estimator=$("$py" compat/check_estimator.py 2>>"$log" | tail -1)
estimator_rc=$?
start=$SECONDS
"$py" -m pytest -q -p no:cacheprovider tests/core/test_against_verl.py tests/verl/test_hooks.py \
    "tests/verl/test_e2e.py::test_demo_trains_with_the_default_trainer_and_logs_avspo_metrics_at_every_step" \
    > "$venv/pytest.log" 2>&1
pytest_rc=$?
pytest_s=$((SECONDS - start))
cat "$venv/pytest.log" >> "$log"
metadata_vllm=$("$py" compat/check_stack_metadata.py constraints-vllm.txt 2>>"$log")
metadata_vllm_rc=$?
metadata_sglang=$("$py" compat/check_stack_metadata.py constraints-sglang.txt 2>>"$log")
metadata_sglang_rc=$?

ESTIMATOR=$estimator PYTEST_SUMMARY=$(tail -1 "$venv/pytest.log") METADATA_VLLM=$metadata_vllm \
METADATA_SGLANG=$metadata_sglang "$py" - "$stack" "$file" "$install_s" "$pytest_s" "$estimator_rc" "$pytest_rc" \
    "$metadata_vllm_rc" "$metadata_sglang_rc" > "$result" <<'EOF'
import datetime, importlib.metadata as metadata, json, os, platform, sys
stack, file, install_s, pytest_s, *codes = sys.argv[1:]
names = ("verl", "torch", "transformers", "ray", "numpy", "tensordict", "pyarrow", "vllm", "sglang")
versions = {name: metadata.version(name) for name in names if any(d.metadata["Name"].lower() == name for d in metadata.distributions())}
print(json.dumps({
    "date": datetime.date.today().isoformat(), "python": platform.python_version(), "stack": stack, "constraints": file,
    "installed": versions, "install_s": int(install_s), "pytest_s": int(pytest_s),
    "exit_codes": dict(zip(("check_estimator", "pytest", "metadata_vllm", "metadata_sglang"), map(int, codes))),
    "check_estimator": json.loads(os.environ["ESTIMATOR"] or "null"), "pytest": os.environ["PYTEST_SUMMARY"],
    "metadata": {"vllm": json.loads(os.environ["METADATA_VLLM"] or "null"),
                 "sglang": json.loads(os.environ["METADATA_SGLANG"] or "null")},
}, indent=1))
EOF
echo "   check_estimator.py: exit $estimator_rc; pytest: $(tail -1 "$venv/pytest.log") (${pytest_s} s)"
echo "   metadata: vllm exit $metadata_vllm_rc, sglang exit $metadata_sglang_rc; $result"
status=$((estimator_rc || pytest_rc || metadata_vllm_rc || metadata_sglang_rc))
[ "$status" -eq 0 ] || cp "$log" "compat/results/gpu-$stack.log"
exit "$status"
