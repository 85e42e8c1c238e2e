#!/usr/bin/env bash
# torch.profiler traces predicted with and without a bare run of their own
# program (issue 14), GPU machine, target/release/kopt and libkopt_tracer.so
# carried. Usage: profiler_bare.sh OUT_DIR [WORKLOAD...]
# Per workload: eager vs graph replay measured bare; the program's own
# torch.profiler trace; `kopt analyze TRACE` (the trace alone); `kopt
# analyze TRACE -- PROGRAM` (the program run again with kopt's stand-in for
# torch.profiler, its steps timed bare); `kopt trace -- PROGRAM` (kopt
# records the same program, its profiler stood in for). OUT_DIR gets
# card.txt, measured.jsonl, summary.txt and profiler_bare.tgz.
set -uo pipefail
out=${1:?OUT_DIR}
shift
workloads=${*:-moe mlp decode matmuls lstm convnet}
mkdir -p "$out/w"
here=$(cd "$(dirname "$0")" && pwd)
kopt=$PWD/target/release/kopt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/card.txt"
cd "$out/w"
for w in $workloads; do
  python3 "$here/workloads.py" $w measure | tee -a ../measured.jsonl
  python3 "$here/workloads.py" $w profile $w.pt.trace.json
  "$kopt" analyze $w.pt.trace.json -f json -o $w.torch.json 2> $w.analyze.log
  "$kopt" analyze $w.pt.trace.json --runs-dir runs --db h.db -q -f json -o $w.torchbare.json \
    -- python3 "$here/workloads.py" $w profile $w.standin1.json 2> $w.analyze-bare.log
  run=$(ls -td runs/*/ 2>/dev/null | head -1)
  [ -n "$run" ] && [ -f "${run}bare_steps.jsonl" ] && cp "${run}bare_steps.jsonl" $w.torch.bare_steps.jsonl
  "$kopt" trace --runs-dir runs --db h.db -q -f json -o $w.kopt.json \
    -- python3 "$here/workloads.py" $w profile $w.standin2.json 2> $w.trace.log
  run=$(ls -td runs/*/ | head -1)
  cp "${run}trace.jsonl" $w.trace.jsonl
  [ -f "${run}bare_steps.jsonl" ] && cp "${run}bare_steps.jsonl" $w.bare_steps.jsonl
  # The stand-in records nothing: the program's own trace must not appear.
  ls $w.standin*.json 2>/dev/null && echo "$w: the stand-in let torch.profiler write a trace" | tee -a ../summary.txt
done
python3 "$here/summary.py" torch,torchbare,kopt $workloads | tee -a ../summary.txt
rm -rf runs h.db
cd "$out" && tar czf profiler_bare.tgz w && rm -rf w
