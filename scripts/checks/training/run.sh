#!/usr/bin/env bash
# The training suite on one GPU: each workload of workloads.py in its own
# process (measure.py: every variant bare, then a torch.profiler trace of
# the baseline), files into OUT/ (WORKLOAD.measured.json,
# WORKLOAD.trace.json.gz, WORKLOAD.log), packed as OUT/training.tgz.
#   bash run.sh OUT [WORKLOAD...]
# BUDGET (s, default 500) stops starting a workload once less than 25 s
# is left; each is bounded by PER_S (default 110).
set -uo pipefail
out=${1:?OUT}; shift
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/t"; out=$(cd "$out" && pwd)
models=("$@")
[ ${#models[@]} -gt 0 ] || mapfile -t models < <(cd "$here" && python3 -c 'import workloads; print("\n".join(workloads.WORKLOADS))')
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__)'; } > "$out/t/card.txt" 2>&1
start=$(date +%s)
for m in "${models[@]}"; do
  left=$(( ${BUDGET:-500} - ($(date +%s) - start) ))
  [ "$left" -lt 25 ] && { echo "skipped $m: ${left}s left" >> "$out/t/card.txt"; continue; }
  t0=$(date +%s)
  (cd "$here" && timeout $(( left < ${PER_S:-110} ? left : ${PER_S:-110} )) python3 measure.py "$m" "$out/t") > "$out/t/$m.log" 2>&1
  echo "$m exit $? $(( $(date +%s) - t0 ))s" >> "$out/t/card.txt"
done
cd "$out" && tar czf training.tgz t && rm -rf t && ls -la
