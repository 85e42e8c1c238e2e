#!/usr/bin/env bash
# Issue 4's evidence on the GPU machine: host cost per launch of 10,000
# one-block kernels bare, under `kopt trace`, and under torch.profiler
# (interleaved, 3 rounds, medians), whether kopt's trace holds every kernel;
# then seed 000's MoE step through `kopt trace`.
#   scripts/bench/tracer_overhead.sh OUT_DIR  (needs target/release/{kopt,libkopt_tracer.so})
set -uo pipefail
OUT=${1:?usage}; ROOT=$(cd "$(dirname "$0")/../.." && pwd); KOPT=$ROOT/target/release/kopt
T=$(mktemp -d); mkdir -p "$OUT"; export PYTHONUNBUFFERED=1
L=$ROOT/scripts/bench/launch_loop.py
: > "$OUT/overhead.jsonl"
for round in 1 2 3; do
  echo "{\"mode\":\"bare\",\"r\":$(python3 "$L")}" >> "$OUT/overhead.jsonl"
  "$KOPT" trace --runs-dir "$T/runs" --format json -o "$T/loop_report_$round.json" -- python3 "$L" > "$T/kopt_$round.log" 2>&1 || { tail -20 "$T/kopt_$round.log"; }
  echo "{\"mode\":\"kopt_trace\",\"r\":$(grep per_launch_us "$T/kopt_$round.log" | tail -1)}" >> "$OUT/overhead.jsonl"
  echo "{\"mode\":\"torch_profiler\",\"r\":$(python3 "$L" --torch-profiler 2>/dev/null | tail -1)}" >> "$OUT/overhead.jsonl"
done
cp "$T/loop_report_1.json" "$OUT/loop_report.json" 2>/dev/null
R=$(ls -d "$T"/runs/*/ | head -1); head -c 2000000 "$R/trace.jsonl" > "$OUT/loop_trace_head.jsonl"
"$KOPT" trace --runs-dir "$T/moe" --export perfetto "$OUT/moe_perfetto.json" --width 150 -- python3 "$ROOT/scripts/examples/moe_route.py" --iters 20 > "$OUT/moe_kopt_trace.txt" 2>&1; echo "moe kopt trace rc=$?"
M=$(ls -d "$T"/moe/*/ | head -1); cp "$M/trace.jsonl" "$OUT/moe_trace.jsonl" 2>/dev/null; cp "$M/report.json" "$OUT/moe_report.json" 2>/dev/null
sed -n '/^Timeline/,/^Recommendations/p' "$OUT/moe_kopt_trace.txt" | head -20
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(os.path.join(out, "overhead.jsonl")) if l.strip()]
by = {}
for r in rows:
    v = r["r"]
    if isinstance(v, dict): by.setdefault(r["mode"], []).append(v["per_launch_us"])
med = lambda v: sorted(v)[len(v) // 2]
print("| mode | host us per launch (median of 3) | all |")
for m in ("bare", "kopt_trace", "torch_profiler"):
    if m in by: print(f"| {m} | {med(by[m]):.2f} | {', '.join(f'{x:.2f}' for x in by[m])} |")
if "bare" in by and "kopt_trace" in by:
    print(f"kopt trace adds {100*(med(by['kopt_trace'])/med(by['bare'])-1):.1f}% per launch (goal <= 5%)")
if "bare" in by and "torch_profiler" in by:
    print(f"torch.profiler adds {100*(med(by['torch_profiler'])/med(by['bare'])-1):.1f}% per launch")
try:
    rep = json.load(open(os.path.join(out, "loop_report.json")))
    k = [x for x in rep["kernels"] if x["name"].startswith("kopt_noop")]
    print("kernels recorded by kopt trace:", k[0]["launches"] if k else 0, "(expected 10100)")
except Exception as e:
    print("loop report unavailable:", e)
PY
