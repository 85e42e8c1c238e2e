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
python3 - $workloads <<'PY' | tee -a ../summary.txt
import json, sys
m = {}
for line in open("../measured.jsonl"):
    d = json.loads(line)
    if "workload" in d:
        m[d["workload"]] = d
for w in sys.argv[1:]:
    row = [w, f"measured {m[w]['speedup']:.2f}x (eager {m[w]['eager_us']:.1f} us, graph {m[w]['graph_us']:.1f} us)"]
    for src in ["torch", "torchbare", "kopt"]:
        try:
            r = json.load(open(f"{w}.{src}.json"))
        except Exception as e:
            row.append(f"{src}: no report ({e})")
            continue
        rec = next((x for x in r["recommendations"] if x["id"] == "capture_cuda_graph"), None)
        p = (rec or {}).get("predicted_speedup")
        t = r.get("timeline") or {}
        g = t.get("graph_prediction") or {}
        bare = " bare" if g.get("eager_measured_bare") else ""
        eager = f" eager {g['eager_corrected_per_step_ns']/1e3:.1f} us" if g else ""
        pred = f"{p['estimate']:.2f}x [{p['low']:.2f}, {p['high']:.2f}]{bare}{eager}" if p else "no graph recommendation"
        row.append(f"{src}: {pred} (steps {(t.get('steps') or {}).get('source', '-')}, primary {r['primary']['type'] if r.get('primary') else '-'})")
    print(" | ".join(row))
PY
rm -rf runs h.db
cd "$out" && tar czf profiler_bare.tgz w && rm -rf w
