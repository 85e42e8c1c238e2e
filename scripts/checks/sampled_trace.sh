#!/usr/bin/env bash
# GPU check of sampled tracing (`kopt trace --sample`): every window's kernels
# and launch calls recorded (CuPy launch loop); then seed 000's MoE step
# traced whole and sampled, REPEAT times.
#   scripts/checks/sampled_trace.sh OUT_DIR   (needs target/release/{kopt,libkopt_tracer.so})
set -uo pipefail
OUT=${1:?usage}; ROOT=$(cd "$(dirname "$0")/../.." && pwd); KOPT=$ROOT/target/release/kopt
T=$(mktemp -d); mkdir -p "$OUT"
lscpu -e=CPU,NODE,SOCKET,CORE 2>/dev/null | head -20 | tr '\n' ';'; echo
for v in loop; do
  "$KOPT" trace --sample 10ms/100ms --timeout 120 --runs-dir "$T/$v" --format json -o "$T/$v.json" \
    -- python3 "$ROOT/scripts/bench/launch_loop.py" --loops 10 > "$T/$v.log" 2>&1 || tail -3 "$T/$v.log"
  f=$(ls "$T"/$v/*/trace.jsonl); cp "$f" "$OUT/loop_sampled_$v.jsonl"
  python3 - "$f" "$v" <<'PY'
import json, sys
w, k, a = 0, {}, {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["t"] == "window": w += 1
    elif r["t"] == "kernel": k[w] = k.get(w, 0) + 1
    elif r["t"] == "api" and "Launch" in r["name"]: a[w] = a.get(w, 0) + 1
print(f"{sys.argv[2]}: {w} windows; per window kernels/launch calls:",
      " ".join(f"{k.get(i,0)}/{a.get(i,0)}" for i in range(w + 1)))
PY
done
# Seed 000's MoE step whole and sampled (with NVTX ranges; then sampled
# without NVTX, and with NVTX but without CUPTI as its injection), REPEAT times.
for rep in $(seq "${REPEAT:-1}"); do
for m in full sampled sampled_nonvtx sampled_noinject; do
  a=(); nv=(--nvtx); e=()
  case $m in sampled*) a=(--sample 10ms/100ms) ;; esac
  [ $m = sampled_nonvtx ] && nv=()
  [ $m = sampled_noinject ] && e=(NVTX_INJECTION64_PATH=/nonexistent)
  env "${e[@]}" "$KOPT" trace "${a[@]}" --timeout 120 --runs-dir "$T/moe_$m" --format json -o "$OUT/moe_${m}_report.json" \
    -- python3 "$ROOT/scripts/examples/moe_route.py" --iters "${MOE_ITERS:-4000}" "${nv[@]}" > "$T/moe_$m.log" 2>&1 || { echo "moe $m FAILED:"; grep -v "^\[" "$T/moe_$m.log" | tail -3; continue; }
  python3 -c "import json; r=json.load(open('$OUT/moe_${m}_report.json')); t=r['timeline']; print('moe $m:', 'primary', r['primary']['type'], 'busy %.1f%%' % t['busy_pct'], 'kernels', t['kernels'], 'launch calls', t['kernel_launch_calls'], 'iterations', t.get('iterations'), 'busy/iter %.1f us' % ((t.get('busy_per_iteration_ns') or 0) / 1e3), 'median launch %s ns' % t.get('median_launch_ns'), 'sampling', t.get('sampling'), 'graph advice', any('graph' in (x['id'] + x['title']).lower() for x in r.get('recommendations', [])))" 2>&1
done
done
cp "$(ls "$T"/moe_sampled/*/trace.jsonl | head -1)" "$OUT/moe_sampled_trace.jsonl" 2>/dev/null
