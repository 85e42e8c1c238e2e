#!/usr/bin/env bash
# Seed 000 through kopt's own tracer: `kopt trace` of the MoE routing step
# (topk + sort + cat, batch 4; one NVTX range per step), kopt's diagnosis and
# predicted graph-capture gain, then eager vs CUDA-graph replay measured in a
# separate process, predicted vs measured; and the large-matmul step, where
# kopt must not recommend graph capture.
#   scripts/capture/seed000/kopt_trace.sh OUT_DIR  (needs target/release/{kopt,libkopt_tracer.so})
set -uo pipefail
OUT=${1:?usage}; ROOT=$(cd "$(dirname "$0")/../../.." && pwd); KOPT=$ROOT/target/release/kopt
T=$(mktemp -d); mkdir -p "$OUT"; M=$ROOT/scripts/examples/moe_route.py
"$KOPT" trace --runs-dir "$T/moe" --format json -o "$OUT/moe_kopt_report.json" -- python3 "$M" --iters 50 --nvtx > "$T/moe.log" 2>&1 || tail -5 "$T/moe.log"
"$KOPT" trace --runs-dir "$T/mm" --format json -o "$OUT/matmul_kopt_report.json" -- python3 "$M" --matmul --iters 10 --nvtx > "$T/mm.log" 2>&1 || tail -5 "$T/mm.log"
cp "$(ls -d "$T"/moe/*/ | head -1)/trace.jsonl" "$OUT/moe_nvtx_trace.jsonl" 2>/dev/null
python3 "$M" --time-graph "$OUT/moe_timing.json" || exit 1
"$KOPT" analyze "$OUT/moe_nvtx_trace.jsonl" --width 150 | sed -n '/^Timeline/,/^Recommendations/p' | head -24
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
t = json.load(open(os.path.join(out, "moe_timing.json")))
r = json.load(open(os.path.join(out, "moe_kopt_report.json")))
m = json.load(open(os.path.join(out, "matmul_kopt_report.json")))
tl = r["timeline"]
wall_step = tl["wall_ns"] / tl["iterations"] / 1e3
busy_step = tl["busy_per_iteration_ns"] / 1e3
print(f"device: {t['device']}")
print(f"kopt trace, MoE step: primary = {r['primary']['type']}; GPU busy {tl['busy_pct']:.1f}% of the window; {tl['iterations']} steps (NVTX)")
print(f"predicted by kopt: per-step floor after graph capture {busy_step:.2f} us (GPU busy per step); bound on the speed-up {tl['wall_ns']/tl['gpu_busy_ns']:.2f}x (wall/busy, traced)")
print(f"measured (untraced): eager {t['eager_us']:.1f} us/step, graph replay {t['graph_us']:.1f} us/step, {t['eager_us']/t['graph_us']:.2f}x")
print(f"predicted speed-up from the untraced eager step and kopt's floor: {t['eager_us']/busy_step:.2f}x (measured {t['eager_us']/t['graph_us']:.2f}x)")
recs = [x["id"] for x in m["recommendations"]]
mt = m["timeline"]
print(f"large matmul under kopt trace: GPU busy {mt['busy_pct']:.1f}%, launch_bound={mt['launch_bound']}, capture_cuda_graph recommended: {'capture_cuda_graph' in recs}, primary = {m['primary']['type']}")
PY
