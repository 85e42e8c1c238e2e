#!/usr/bin/env bash
# Two checks of the suite's truth on a GPU machine (kopt, libkopt_tracer.so,
# the module driver and kopt_optimize.py beside this script, as run.sh):
#   bash diag.sh OUT [MODEL...]
# 1. bert_b1_s64_bf16's CUDA graph traced (`kopt trace` of the module
#    driver with variant=graph): its nodes' kernel times against the eager
#    trace's, for the graph-capture prediction's replay cost.
# 2. eager_phases.py over the models given: eager alone, beside its graph,
#    after torch.compile, in one process, with the card's clocks.
set -uo pipefail
out=${1:?OUT}; shift
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"; out=$(cd "$out" && pwd)
start=$(date +%s)
export ADVICE_DIR=$here PYTHONUNBUFFERED=1
work=$(mktemp -d); cd "$work"
ADVICE_MODEL=bert_b1_s64_bf16 timeout 120 "$here/kopt" trace -q --timeout 100 --runs-dir runs --db h.db \
  -- python3 "$here/kopt_profile_driver.py" "$here/module.py" bert_b1_s64_bf16 3 20 variant=graph \
  > "$out/bert_graph.log" 2>&1
echo "exit $? seconds $(( $(date +%s) - start ))" >> "$out/bert_graph.log"
run=$(ls -td runs/*/ 2>/dev/null | head -1)
if [ -n "$run" ]; then
  "$here/kopt" analyze "$run" --width 200 > "$out/bert_graph.txt" 2>&1
  (cd "$run" && gzip -9 trace.jsonl 2>/dev/null; tar czf "$out/bert_graph.run.tgz" --exclude='*.py' --exclude='sitecustomize*' .)
fi
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(gpt2_b4_s1024_bf16_eager resnet50_b1_fp32 bert_b1_s64_bf16 gpt2_b1_s128_fp32 lstmcell_b16_fp32 efficientnet_b8_bf16_cl)
for m in "${models[@]}"; do
  left=$(( ${BUDGET:-540} - ($(date +%s) - start) ))
  [ "$left" -lt 60 ] && { echo "skipped $m: ${left}s left" >> "$out/phases.log"; continue; }
  t0=$(date +%s)
  (cd "$here" && timeout $(( left - 10 )) python3 eager_phases.py "$m") >> "$out/phases.jsonl" 2>> "$out/phases.log"
  echo "$m exit $? $(( $(date +%s) - t0 ))s" >> "$out/phases.log"
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/card.txt"
echo "total seconds $(( $(date +%s) - start ))" >> "$out/card.txt"
rm -rf "$work"
