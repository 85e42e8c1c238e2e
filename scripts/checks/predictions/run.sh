#!/usr/bin/env bash
# Graph-capture predictions against measurements (issue 14), GPU machine,
# target/release/kopt and libkopt_tracer.so carried. Usage: run.sh OUT_DIR
# OUT_DIR gets card.txt, measured.jsonl, summary.txt and predictions.tgz
# (kopt traces, torch.profiler traces, every report).
set -uo pipefail
out=${1:?OUT_DIR}
mkdir -p "$out/w"
here=$(cd "$(dirname "$0")" && pwd)
kopt=$PWD/target/release/kopt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/card.txt"
cd "$out/w"
python3 "$here/workloads.py" replay_cost | tee -a ../measured.jsonl
for w in moe mlp decode matmuls; do
  steps=60; [ "$w" = matmuls ] && steps=25
  python3 "$here/workloads.py" $w measure | tee -a ../measured.jsonl
  "$kopt" trace --runs-dir runs --db h.db -q -f json -o $w.kopt.json -- python3 "$here/workloads.py" $w steps $steps 2> $w.trace.log
  run=$(ls -td runs/*/ | head -1)
  cp "${run}trace.jsonl" $w.trace.jsonl
  # The bare run kopt trace made (launch-bound steps only).
  [ -f "${run}bare_steps.jsonl" ] && cp "${run}bare_steps.jsonl" $w.bare_steps.jsonl
  python3 "$here/workloads.py" $w profile $w.pt.trace.json
  "$kopt" analyze $w.pt.trace.json -f json -o $w.torch.json 2> $w.analyze.log
done
python3 "$here/summary.py" kopt,torch moe mlp decode matmuls | tee ../summary.txt
rm -rf runs h.db
cd "$out" && tar czf predictions.tgz w && rm -rf w
