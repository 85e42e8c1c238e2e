#!/usr/bin/env bash
# Seed 000 reproduced: trace the MoE step, let kopt predict the graph-capture
# gain from the trace, measure eager vs graph replay, print both.
#   scripts/capture/seed000/capture.sh OUT_DIR   (needs target/release/kopt)
set -uo pipefail
OUT=${1:?usage}; ROOT=$(cd "$(dirname "$0")/../../.." && pwd); KOPT=$ROOT/target/release/kopt
mkdir -p "$OUT"
python3 "$ROOT/scripts/capture/seed000/moe_trace.py" "$OUT" || exit 1
"$KOPT" analyze "$OUT/moe_trace.json" --format json -o "$OUT/moe_report.json"
"$KOPT" analyze "$OUT/matmul_trace.json" --format json -o "$OUT/matmul_report.json"
"$KOPT" analyze "$OUT/moe_trace.json" --width 150 | sed -n '/^Timeline/,/^Recommendations/p'
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
t = json.load(open(os.path.join(out, "moe_timing.json")))
r = json.load(open(os.path.join(out, "moe_report.json")))
m = json.load(open(os.path.join(out, "matmul_report.json")))
tl = r["timeline"]
pred = tl["wall_ns"] / max(tl["gpu_busy_ns"], 1)
print(f"device: {t['device']}")
print(f"moe step: primary = {r['primary']['type']}; GPU busy {tl['busy_pct']:.1f}% of the traced window")
print(f"predicted graph-capture speedup (upper bound wall/busy): {pred:.2f}x")
print(f"measured: eager {t['eager_us']:.1f} us/call, graph replay {t['graph_us']:.1f} us/call: {t['eager_us']/t['graph_us']:.2f}x")
recs = [x["id"] for x in m["recommendations"]]
print(f"large matmul: GPU busy {m['timeline']['busy_pct']:.1f}%, launch_bound={m['timeline']['launch_bound']}, capture_cuda_graph recommended: {'capture_cuda_graph' in recs}")
PY
